/**
 * What giul produces, on `node:diagnostics_channel`: the seam between the Meter and every exporter
 * (OpenTelemetry, Prometheus, a log line). The Meter imports no exporter; exporters subscribe by
 * channel name. Nothing is built or published while a channel has no subscriber.
 *
 * The contract (stable; README "Diagnostics channels"):
 *
 * - `giul:window:open` — once per window, when `open()` has taken the opening edge, synchronously
 *   in the async context of the caller of `open()` (so a subscriber can capture the active span).
 * - `giul:window:close` — once per window, when `close()` takes the closing edge (after `sync`).
 * - `giul:energy` — once per closed window, with the window's record: synchronously inside the
 *   first `result()` call if it comes before the tick in which `close()` settled is over
 *   (`await m.close(); m.result({ tokens })`, and `measure()`), carrying that call's record;
 *   otherwise from `process.nextTick` right after that tick, with the record `result()` gives
 *   with no tokens (then in no particular request's async context: a subscriber that needs the
 *   request's context captures it on `giul:window:open`). Later `result()` calls publish nothing.
 *   A window never closed publishes no record.
 *
 * Each message is a fresh object; `openNs` / `closeNs` are CLOCK_MONOTONIC ns, `openMs` / `closeMs`
 * the same instants on performance.now()'s clock. Subscribers run
 * synchronously and must not throw (Node turns a subscriber's throw into an uncaught exception, and
 * giul's own exporters never throw).
 */
import { channel } from "node:diagnostics_channel";
import type { Energy } from "./rules/energy.js";
import type { ResolvedNode } from "./rules/node.js";
import type { BackendName } from "./vocabulary/measurement.js";

/** The names of giul's channels. */
export const GIUL_CHANNELS = Object.freeze({
  windowOpen: "giul:window:open",
  windowClose: "giul:window:close",
  energy: "giul:energy",
} as const);

/** What a message says of its window (the Meter: src/index.ts exports the messages typed with it). */
export interface MeteredWindow {
  readonly node: ResolvedNode;
}

/** The messages as giul's own code handles them (any window). */
export type WindowOpenMessage = OpenMessageOf<MeteredWindow>;
export type WindowCloseMessage = CloseMessageOf<MeteredWindow>;
export type EnergyMessage = EnergyMessageOf<MeteredWindow>;

/** `giul:window:open`: a window's opening edge was taken. */
export interface OpenMessageOf<M extends MeteredWindow> {
  /** The window (a stable key for the window while it lives; use it in a WeakMap). */
  readonly meter: M;
  readonly node: ResolvedNode;
  readonly backend: BackendName;
  /** CLOCK_MONOTONIC ns of the opening edge (the clock of `process.hrtime.bigint()`). */
  readonly openNs: bigint;
  /**
   * The opening edge in ms on the clock of `performance.now()` (`performance.timeOrigin + openMs`
   * is ms since the epoch): what a span or a log line is stamped with, with no bigint made.
   */
  readonly openMs: number;
}

/** `giul:window:close`: a window's closing edge was taken; its record follows on `giul:energy`. */
export interface CloseMessageOf<M extends MeteredWindow> {
  readonly meter: M;
  /**
   * The message this window published on `giul:window:open`, or null where that channel had no
   * subscriber when it opened: what a subscriber kept there of the window (under a `Symbol` of its
   * own), found again without a `WeakMap` of open windows.
   */
  readonly opening: OpenMessageOf<M> | null;
  readonly node: ResolvedNode;
  readonly backend: BackendName;
  readonly openNs: bigint;
  /** CLOCK_MONOTONIC ns of the closing edge. */
  readonly closeNs: bigint;
  readonly openMs: number;
  /** The closing edge in ms on the clock of `performance.now()`. */
  readonly closeMs: number;
}

/** `giul:energy`: a closed window's record, once. */
export interface EnergyMessageOf<M extends MeteredWindow> {
  readonly meter: M;
  /** The window's `giul:window:open` message, as on `giul:window:close` (null where none was published). */
  readonly opening: OpenMessageOf<M> | null;
  readonly node: ResolvedNode;
  /** What the window cost, as `result()` returns it (`energy.toJSON()` is the fleet record). */
  readonly energy: Energy;
  /** CLOCK_MONOTONIC ns of the window's opening and closing edges (its stages run back to back between). */
  readonly openNs: bigint;
  readonly closeNs: bigint;
  /** The same edges in ms on the clock of `performance.now()`. */
  readonly openMs: number;
  readonly closeMs: number;
}

export const windowOpenChannel = channel(GIUL_CHANNELS.windowOpen);
export const windowCloseChannel = channel(GIUL_CHANNELS.windowClose);
export const energyChannel = channel(GIUL_CHANNELS.energy);

// performance.now() and process.hrtime run on the same monotonic clock: one pair of readings lines
// the two up for good, the tightest of a few with performance.now() read on both sides (a pair
// preempted between its two readings would be off by the preemption).
function pairClocks(): [bigint, number] {
  let pair: [bigint, number] = [0n, 0];
  let width = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 5; i++) {
    const before = performance.now();
    const ns = process.hrtime.bigint();
    const after = performance.now();
    if (after - before < width) {
      width = after - before;
      pair = [ns, (before + after) / 2];
    }
  }
  return pair;
}
const [ORIGIN_NS, ORIGIN_MS] = pairClocks();

/** CLOCK_MONOTONIC ns in ms on performance.now()'s clock. */
function msOf(ns: bigint): number {
  return ORIGIN_MS + Number(ns - ORIGIN_NS) / 1e6;
}

class OpenMessage implements WindowOpenMessage {
  readonly node: ResolvedNode;
  readonly openMs: number;

  constructor(
    readonly meter: MeteredWindow,
    readonly backend: BackendName,
    readonly openNs: bigint,
  ) {
    this.node = meter.node;
    this.openMs = msOf(openNs);
  }
}

/** Both edges of a closed window (the close and energy messages). */
class ClosedEdges {
  readonly node: ResolvedNode;
  readonly openMs: number;
  readonly closeMs: number;

  constructor(
    readonly meter: MeteredWindow,
    readonly opening: WindowOpenMessage | null,
    readonly openNs: bigint,
    readonly closeNs: bigint,
  ) {
    this.node = meter.node;
    this.openMs = msOf(openNs);
    this.closeMs = msOf(closeNs);
  }
}

class CloseMessage extends ClosedEdges implements WindowCloseMessage {
  constructor(
    meter: MeteredWindow,
    opening: WindowOpenMessage | null,
    readonly backend: BackendName,
    openNs: bigint,
    closeNs: bigint,
  ) {
    super(meter, opening, openNs, closeNs);
  }
}

class RecordMessage extends ClosedEdges implements EnergyMessage {
  constructor(
    meter: MeteredWindow,
    opening: WindowOpenMessage | null,
    readonly energy: Energy,
    openNs: bigint,
    closeNs: bigint,
  ) {
    super(meter, opening, openNs, closeNs);
  }
}

/**
 * Publishes `giul:window:open` (the caller checks hasSubscribers first), and returns the message:
 * the window keeps it for its close and energy messages.
 */
export function announceOpen(meter: MeteredWindow, backend: BackendName, openNs: bigint): WindowOpenMessage {
  const message = new OpenMessage(meter, backend, openNs);
  windowOpenChannel.publish(message);
  return message;
}

/** Publishes `giul:window:close` (the caller checks hasSubscribers first). */
export function announceClose(
  meter: MeteredWindow,
  opening: WindowOpenMessage | null,
  backend: BackendName,
  openNs: bigint,
  closeNs: bigint,
): void {
  windowCloseChannel.publish(new CloseMessage(meter, opening, backend, openNs, closeNs));
}

/** Publishes `giul:energy`: once per window (the Meter sees to that). */
export function publishEnergy(
  meter: MeteredWindow,
  opening: WindowOpenMessage | null,
  energy: Energy,
  openNs: bigint,
  closeNs: bigint,
): void {
  energyChannel.publish(new RecordMessage(meter, opening, energy, openNs, closeNs));
}

/**
 * Closed windows whose record may still be owed to `giul:energy` (none while nobody subscribes).
 * Whether it still is, is the window's own flag (claimed by its first result()), not membership
 * of a Set added to at each close and deleted from at each result() (a hash table's churn, and
 * its garbage, on every window).
 */
let owed: MeteredWindow[] = [];
let flushQueued = false;
let settle: (meter: MeteredWindow) => void = () => {};

/** How a flush settles a window's debt, if it is still owed (the Meter says: the flag is its own). */
export function settleOwedEnergyWith(fn: (meter: MeteredWindow) => void): void {
  settle = fn;
}

/**
 * A window closed while `giul:energy` had subscribers: its record is owed. The first `result()`
 * before this tick is over publishes it; else one `process.nextTick` for every window that closed
 * in the tick settles those still owed (what `result()` gives with no tokens).
 */
export function oweEnergy(meter: MeteredWindow): void {
  owed.push(meter);
  if (flushQueued) return;
  flushQueued = true;
  process.nextTick(flushOwed);
}

function flushOwed(): void {
  flushQueued = false;
  const due = owed;
  owed = [];
  for (let i = 0; i < due.length; i++) settle(due[i] as MeteredWindow);
}
