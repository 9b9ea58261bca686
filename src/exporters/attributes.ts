/**
 * A window's record as flat attributes (OpenTelemetry span attributes and events): every scalar
 * field of the fleet record (Energy.toJSON) that is not null, as `giul.energy.<field>`, and the
 * node as `giul.node`. The same keys on a span, on its stage events and in the metrics' labels.
 */
import type { Energy } from "../energy.js";

export type AttributeValue = string | number | boolean | string[];
export type FlatAttributes = Record<string, AttributeValue>;

/** Buckets for joules per request: 0.1 J … 10 kJ (a short completion on a small card to a long one on a large). */
export const JOULE_BUCKETS: readonly number[] = Object.freeze([
  0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
]);

function put(out: FlatAttributes, key: string, value: number | null): void {
  if (value !== null && Number.isFinite(value)) out[key] = value;
}

/** The record's fields for a span (the window) or a span event (a stage, without `giul.node`). */
export function energyAttributes(e: Energy, node: string | null): FlatAttributes {
  const out: FlatAttributes = {
    "giul.energy.method": e.method,
    "giul.energy.backend": e.backend,
    "giul.energy.attribution": e.attribution,
    "giul.energy.contended": e.contended,
  };
  if (node !== null) out["giul.node"] = node;
  put(out, "giul.energy.joules", e.joules);
  put(out, "giul.energy.uncertainty_joules", e.uncertaintyJoules);
  put(out, "giul.energy.card_joules", e.cardJoules);
  put(out, "giul.energy.measured_joules", e.measuredJoules);
  put(out, "giul.energy.seconds", e.seconds);
  put(out, "giul.energy.idle_w", e.idleW);
  put(out, "giul.energy.tokens", e.tokens);
  put(out, "giul.energy.joules_per_1k_tokens", e.joulesPer1kTokens);
  put(out, "giul.energy.samples", e.samples);
  put(out, "giul.energy.max_gap_ms", e.maxGapMs);
  put(out, "giul.energy.concurrency_mean", e.concurrency?.mean ?? null);
  put(out, "giul.energy.concurrency_max", e.concurrency?.max ?? null);
  if (e.contentionChecked !== null) out["giul.energy.contention_checked"] = e.contentionChecked;
  if (e.contendedBy.length > 0) {
    out["giul.energy.contended_by"] = e.contendedBy.map((p) => `${p.name ?? "?"} (pid ${p.pid})`);
  }
  if (e.reason !== null) out["giul.energy.reason"] = e.reason;
  return out;
}

/**
 * The labels of the per-request metrics (`giul.energy.method`, `giul.energy.backend`, `giul.node`),
 * one frozen object per combination so that recording allocates nothing.
 */
export class LabelCache {
  private readonly cache = new Map<string, Readonly<Record<string, string>>>();

  constructor(private readonly keys: { method: string; backend: string; node: string }) {}

  of(method: string, backend: string, node: string): Readonly<Record<string, string>> {
    const key = `${method}\u0000${backend}\u0000${node}`;
    let labels = this.cache.get(key);
    if (labels === undefined) {
      labels = Object.freeze({
        [this.keys.method]: method,
        [this.keys.backend]: backend,
        [this.keys.node]: node,
      });
      if (this.cache.size < 10_000) this.cache.set(key, labels);
    }
    return labels;
  }
}

/** CLOCK_MONOTONIC ns (process.hrtime.bigint) as [seconds, nanoseconds] since the epoch. */
export function epochHrTime(tNs: bigint): [number, number] {
  // performance.now() runs on the same monotonic clock as process.hrtime; the OpenTelemetry SDK
  // stamps spans with timeOrigin + now() too, so the two line up.
  const offsetNs =
    BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6)) - process.hrtime.bigint();
  const epochNs = tNs + offsetNs;
  return [Number(epochNs / 1_000_000_000n), Number(epochNs % 1_000_000_000n)];
}
