/**
 * A window's record as flat attributes for OpenTelemetry: on the request's span, the fields an
 * operator reads (`giul.energy.joules`, `.method`, `.backend`, `.uncertainty_joules`,
 * `.attribution`, `.contended`, `.card_joules`, `.tokens`, `.reason`, `.contended_by`, each where
 * not null) and `giul.node`; on each stage's event (at the stage's end), the stage's joules,
 * method and uncertainty. Kept to these because a span's attributes are paid for per request;
 * the whole record is `energy.toJSON()`.
 */
import type { Energy } from "../rules/energy.js";
import type { ResolvedNode } from "../rules/node.js";
import { nodeHwId, REQUEST_LABELS } from "./names.js";

export type AttributeValue = string | number | boolean | string[];
export type FlatAttributes = Record<string, AttributeValue>;

/** Buckets for joules per request: 0.1 J … 10 kJ (a short completion on a small card to a long one on a large). */
export const JOULE_BUCKETS: readonly number[] = Object.freeze([
  0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
]);

function put(out: FlatAttributes, key: string, value: number | null): void {
  if (value !== null && Number.isFinite(value)) out[key] = value;
}

/** Where attributes are set one by one (an OpenTelemetry span). */
export interface AttributeSink {
  setAttribute(key: string, value: AttributeValue): unknown;
}

function set(sink: AttributeSink, key: string, value: number | null): void {
  if (value !== null && Number.isFinite(value)) sink.setAttribute(key, value);
}

/** The record's fields on the request's span, set one by one (no object built per window). */
export function setEnergyAttributes(sink: AttributeSink, e: Energy, node: string): void {
  sink.setAttribute("giul.energy.method", e.method);
  sink.setAttribute("giul.energy.backend", e.backend);
  sink.setAttribute("giul.energy.attribution", e.attribution);
  sink.setAttribute("giul.energy.contended", e.contended);
  sink.setAttribute("giul.node", node);
  set(sink, "giul.energy.joules", e.joules);
  set(sink, "giul.energy.uncertainty_joules", e.uncertaintyJoules);
  set(sink, "giul.energy.card_joules", e.cardJoules);
  set(sink, "giul.energy.tokens", e.tokens);
  if (e.contendedBy.length > 0) {
    sink.setAttribute(
      "giul.energy.contended_by",
      e.contendedBy.map((p) => `${p.name ?? "?"} (pid ${p.pid})`),
    );
  }
  if (e.reason !== null) sink.setAttribute("giul.energy.reason", e.reason);
}

/** A stage's fields for its span event. */
export function stageAttributes(name: string, e: Energy): FlatAttributes {
  const out: FlatAttributes = { "giul.stage.name": name, "giul.energy.method": e.method };
  put(out, "giul.energy.joules", e.joules);
  put(out, "giul.energy.uncertainty_joules", e.uncertaintyJoules);
  return out;
}

/** One combination of the per-request metrics' labels, and the windows counted under it. */
export interface LabelEntry {
  readonly labels: Readonly<Record<string, string>>;
  count: number;
}

type Nested<T> = Map<string, T>;

/**
 * The labels of the per-request metrics (./names.ts REQUEST_LABELS, as `face` names them): one
 * frozen object per combination, so that recording allocates nothing, with a count of the
 * windows under each.
 */
export class LabelCache {
  /** method → backend → node → hw_id → entry: found with no string built per window. */
  private readonly cache: Nested<Nested<Nested<Nested<LabelEntry>>>> = new Map();
  private readonly all: LabelEntry[] = [];

  constructor(private readonly face: "prometheus" | "otel") {}

  of(method: string, backend: string, node: ResolvedNode): LabelEntry {
    const byNode = child(child(this.cache, method), backend);
    const byHw = child(byNode, node.name);
    const hwId = nodeHwId(node);
    let entry = byHw.get(hwId);
    if (entry === undefined) {
      const L = REQUEST_LABELS;
      const f = this.face;
      const labels = {
        [L.hwId[f]]: hwId,
        [L.hwType[f]]: "gpu",
        [L.method[f]]: method,
        [L.backend[f]]: backend,
        [L.node[f]]: node.name,
      };
      entry = { labels: Object.freeze(labels), count: 0 };
      byHw.set(hwId, entry);
      this.all.push(entry);
    }
    return entry;
  }

  entries(): readonly LabelEntry[] {
    return this.all;
  }
}

function child<T>(map: Map<string, Map<string, T>>, key: string): Map<string, T> {
  let next = map.get(key);
  if (next === undefined) {
    next = new Map();
    map.set(key, next);
  }
  return next;
}

/**
 * Ms since the epoch as OpenTelemetry's HrTime ([seconds, nanoseconds]): the SDK takes it as it
 * is, where a number in ms costs it a clock reading to tell an epoch time from a performance one.
 */
export function hrTimeOfMs(ms: number): [number, number] {
  const seconds = Math.floor(ms / 1000);
  const nanos = Math.round((ms - seconds * 1000) * 1e6);
  return nanos >= 1e9 ? [seconds + 1, nanos - 1e9] : [seconds, nanos];
}
