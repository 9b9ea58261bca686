/**
 * Which event log a card's windows share (./ledger.ts): the host's, through the addon, for every
 * process of this user and every copy of giul in them (src/sources/native/card-log.ts); else one
 * this JavaScript environment keeps (no addon, or a track that cannot take an edge at a logged
 * instant), with why. One registry per environment, on globalThis, so that the ESM and CommonJS
 * builds (or two installs of one version) share one log per card; a copy of another version
 * finds the registry's layout differs and refuses to share rather than misread it.
 */
import { loadBinding } from "../sources/native/binding.js";
import { NativeCardEventLog } from "../sources/native/card-log.js";
import type { EventLog, EventLogEntry, LogScope } from "../track/track.js";

/** The layout of this registry and of MemoryEventLog's entries: bumped when either changes. */
const REGISTRY_LAYOUT = 1;
const REGISTRY = Symbol.for("giul.cardLogs");

interface Registry {
  readonly layout: number;
  readonly logs: Map<string, EventLog>;
}

/** A log that cannot be shared: every append refused, with why. */
export class RefusedLog implements EventLog {
  readonly scope: LogScope = "environment";
  readonly epochNs = 0n;
  readonly capacity = 0;
  readonly slot = 0;
  constructor(readonly reason: string) {}
  append(): number {
    return REFUSED;
  }
  published(): number {
    return 0;
  }
  read(): boolean {
    return false;
  }
}
/** The kinds of event a window appends (binding.d.ts CardLogLayout.eKind). */
export const KIND = { OPEN: 1, CLOSE: 2, WEIGHT: 3, MARK: 4 } as const;

/** RefusedLog.append's code. */
export const REFUSED = -5;

const CAPACITY = 65_536;
const FIELDS = 7;

/** A card's log in this environment's memory: the same entries as the addon's, checked by nobody. */
export class MemoryEventLog implements EventLog {
  readonly capacity = CAPACITY;
  readonly slot = 0;
  readonly epochNs = process.hrtime.bigint();
  private readonly entries = new Float64Array(CAPACITY * FIELDS);
  private count = 0;
  private weight = 0;
  private idle = Number.NaN;
  private next = 0;

  constructor(
    readonly scope: LogScope,
    readonly reason: string | null,
  ) {}

  append(deltaWeight: number, deltaCount: number, idleW: number, kind: number): number {
    const before = this.weight;
    if (this.count === 0) this.idle = Number.NaN;
    this.count = Math.max(0, this.count + deltaCount);
    // Floating sums drift: an empty card has exactly no weight.
    this.weight = this.count === 0 ? 0 : Math.max(0, before + deltaWeight);
    if (deltaCount > 0 && Number.isNaN(this.idle)) this.idle = idleW;
    if (this.count === 0) this.idle = Number.NaN;
    const k = this.next++;
    const at = (k % CAPACITY) * FIELDS;
    const e = this.entries;
    e[at] = Number(process.hrtime.bigint() - this.epochNs);
    e[at + 1] = before;
    e[at + 2] = this.weight;
    e[at + 3] = this.count;
    e[at + 4] = this.idle;
    e[at + 5] = kind;
    return k;
  }

  published(): number {
    return this.next;
  }

  read(k: number, out: EventLogEntry): boolean {
    if (k < 0 || k >= this.next || k < this.next - CAPACITY) return false;
    const at = (k % CAPACITY) * FIELDS;
    const e = this.entries;
    out.t = e[at] as number;
    out.weightBefore = e[at + 1] as number;
    out.weightAfter = e[at + 2] as number;
    out.countAfter = e[at + 3] as number;
    out.idleAfter = e[at + 4] as number;
    out.slot = 0;
    out.kind = e[at + 5] as number;
    return true;
  }
}

/** Processes share a card only with processes of the same group (GIUL_SHARE_GROUP; default all). */
function shareGroup(env: NodeJS.ProcessEnv): string {
  return env.GIUL_SHARE_GROUP ?? "";
}

/** What GIUL_SHARE_GROUP and GIUL_SHARING may hold; a bad value turns host-wide sharing off, with why. */
const GROUP = /^[A-Za-z0-9._-]{0,96}$/;

/** The card's key in a segment's name: its UUID, or another stable name, in the allowed characters. */
function segmentKey(key: string): string {
  return key.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 96);
}

function registry(): Registry | string {
  const holder = globalThis as Record<symbol, Registry | undefined>;
  holder[REGISTRY] ??= { layout: REGISTRY_LAYOUT, logs: new Map() };
  const found = holder[REGISTRY] as Registry;
  if (found.layout !== REGISTRY_LAYOUT) {
    return (
      `the card is shared with a copy of giul in this process that giul cannot account ` +
      `(its event-log registry has layout ${String(found.layout)}, this giul's is ${REGISTRY_LAYOUT})`
    );
  }
  return found;
}

/**
 * The log card `key` (its UUID) shares in this environment: one per card, for every copy of giul
 * here. `localOnly`: why the key is not one other processes know the card by (then the log is
 * this environment's own). `env`: where GIUL_SHARE_GROUP and GIUL_SHARING are read.
 */
export function cardLogFor(
  key: string,
  localOnly: string | null = null,
  env: NodeJS.ProcessEnv = process.env,
): EventLog {
  const reg = registry();
  if (typeof reg === "string") return new RefusedLog(reg);
  const name = localOnly === null ? key : `environment:${key}`;
  const known = reg.logs.get(name);
  if (known !== undefined) return known;
  const log = localOnly === null ? openLog(key, env) : new MemoryEventLog("environment", localOnly);
  reg.logs.set(name, log);
  return log;
}

/**
 * After the host's log failed (garbage in it): this process's own from now on, with why. Windows
 * open across the change are not measured (their events are in two logs).
 */
export function replaceCardLog(key: string, reason: string, env: NodeJS.ProcessEnv = process.env): EventLog {
  const reg = registry();
  if (typeof reg === "string") return new RefusedLog(reg);
  const log = openLog(key, env, reason);
  reg.logs.set(key, log);
  return log;
}

function openLog(key: string, env: NodeJS.ProcessEnv, failed: string | null = null): EventLog {
  const loaded = loadBinding();
  if (!loaded.ok) {
    return new MemoryEventLog(
      "environment",
      "the giul addon is not loaded: windows share the card only with windows of this JavaScript environment",
    );
  }
  const binding = loaded.binding;
  const group = shareGroup(env);
  const sharing = env.GIUL_SHARING ?? "host";
  let processOnly = failed !== null || sharing === "process";
  let why = failed;
  if (!GROUP.test(group)) {
    processOnly = true;
    why = `GIUL_SHARE_GROUP=${JSON.stringify(group)} is not [A-Za-z0-9._-], at most 96 characters`;
  } else if (sharing !== "host" && sharing !== "process") {
    processOnly = true;
    why = `GIUL_SHARING=${JSON.stringify(sharing)}: expected host or process`;
  }
  try {
    const opened = binding.openCardLog(segmentKey(key), GROUP.test(group) ? group : "", processOnly);
    if (!opened.ok) return new RefusedLog(opened.reason);
    return new NativeCardEventLog(opened, binding.cardLogLayout, why);
  } catch (error) {
    return new MemoryEventLog("environment", `the card's event log could not be opened: ${String(error)}`);
  }
}
