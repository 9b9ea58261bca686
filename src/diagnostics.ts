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
 * Each message is a fresh object. `openNs` / `closeNs` are getters (the bigint is made when read; a
 * spread copy of a message leaves them out), `openMs` / `closeMs` plain numbers. Subscribers run
 * synchronously and must not throw (Node turns a subscriber's throw into an uncaught exception, and
 * giul's own exporters never throw).
 */
import { channel } from "node:diagnostics_channel";
import type { Energy } from "./energy.js";
import type { BackendName } from "./measurement.js";
import type { Meter } from "./meter.js";
import type { ResolvedNode } from "./node.js";

/** The names of giul's channels. */
export const GIUL_CHANNELS = Object.freeze({
  windowOpen: "giul:window:open",
  windowClose: "giul:window:close",
  energy: "giul:energy",
} as const);

/** `giul:window:open`: a window's opening edge was taken. */
export interface WindowOpenMessage {
  /** The window (a stable key for the window while it lives; use it in a WeakMap). */
  readonly meter: Meter;
  readonly node: ResolvedNode;
  readonly backend: BackendName;
  /** CLOCK_MONOTONIC ns of the opening edge (the clock of `process.hrtime.bigint()`); made when read. */
  readonly openNs: bigint;
  /**
   * The opening edge in ms on the clock of `performance.now()` (`performance.timeOrigin + openMs`
   * is ms since the epoch): what a span or a log line is stamped with, with no bigint made.
   */
  readonly openMs: number;
}

/** `giul:window:close`: a window's closing edge was taken; its record follows on `giul:energy`. */
export interface WindowCloseMessage {
  readonly meter: Meter;
  /**
   * The message this window published on `giul:window:open`, or null where that channel had no
   * subscriber when it opened: what a subscriber kept there of the window (under a `Symbol` of its
   * own), found again without a `WeakMap` of open windows.
   */
  readonly opening: WindowOpenMessage | null;
  readonly node: ResolvedNode;
  readonly backend: BackendName;
  readonly openNs: bigint;
  /** CLOCK_MONOTONIC ns of the closing edge; made when read. */
  readonly closeNs: bigint;
  readonly openMs: number;
  /** The closing edge in ms on the clock of `performance.now()`. */
  readonly closeMs: number;
}

/** `giul:energy`: a closed window's record, once. */
export interface EnergyMessage {
  readonly meter: Meter;
  /** The window's `giul:window:open` message, as on `giul:window:close` (null where none was published). */
  readonly opening: WindowOpenMessage | null;
  readonly node: ResolvedNode;
  /** What the window cost, as `result()` returns it (`energy.toJSON()` is the fleet record). */
  readonly energy: Energy;
  /** CLOCK_MONOTONIC ns of the window's opening and closing edges (its stages run back to back between); made when read. */
  readonly openNs: bigint;
  readonly closeNs: bigint;
  /** The same edges in ms on the clock of `performance.now()`. */
  readonly openMs: number;
  readonly closeMs: number;
}

export const windowOpenChannel = channel(GIUL_CHANNELS.windowOpen);
export const windowCloseChannel = channel(GIUL_CHANNELS.windowClose);
export const energyChannel = channel(GIUL_CHANNELS.energy);

/*
 * An edge is passed as `base + afterNs`: an offloaded window's log keeps its instants as numbers of
 * ns past its card's epoch (one bigint for every window), a window accounted here keeps each edge
 * as a bigint (`afterNs` 0). Its bigint is made only where a subscriber reads `openNs` / `closeNs`
 * (for an offloaded window, a conversion and an addition each, and their garbage, on every
 * window), its ms on performance.now()'s clock always (number arithmetic).
 */

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
let lastBase = ORIGIN_NS;
let lastBaseMs = ORIGIN_MS;

/** `base + afterNs` in ms on performance.now()'s clock (the card's epoch converted once, not per window). */
function msOf(base: bigint, afterNs: number): number {
  if (base !== lastBase) {
    lastBase = base;
    lastBaseMs = ORIGIN_MS + Number(base - ORIGIN_NS) / 1e6;
  }
  return lastBaseMs + afterNs / 1e6;
}

function nsOf(base: bigint, afterNs: number): bigint {
  return afterNs === 0 ? base : base + BigInt(Math.round(afterNs));
}

class OpenMessage implements WindowOpenMessage {
  readonly node: ResolvedNode;
  readonly openMs: number;
  readonly #openBase: bigint;
  readonly #openAfter: number;

  constructor(
    readonly meter: Meter,
    readonly backend: BackendName,
    openBase: bigint,
    openAfter: number,
  ) {
    this.node = meter.node;
    this.openMs = msOf(openBase, openAfter);
    this.#openBase = openBase;
    this.#openAfter = openAfter;
  }

  get openNs(): bigint {
    return nsOf(this.#openBase, this.#openAfter);
  }
}

/** Both edges of a closed window (the close and energy messages). */
class ClosedEdges {
  readonly node: ResolvedNode;
  readonly openMs: number;
  readonly closeMs: number;
  readonly #openBase: bigint;
  readonly #openAfter: number;
  readonly #closeBase: bigint;
  readonly #closeAfter: number;

  constructor(
    readonly meter: Meter,
    readonly opening: WindowOpenMessage | null,
    openBase: bigint,
    openAfter: number,
    closeBase: bigint,
    closeAfter: number,
  ) {
    this.node = meter.node;
    this.openMs = msOf(openBase, openAfter);
    this.closeMs = msOf(closeBase, closeAfter);
    this.#openBase = openBase;
    this.#openAfter = openAfter;
    this.#closeBase = closeBase;
    this.#closeAfter = closeAfter;
  }

  get openNs(): bigint {
    return nsOf(this.#openBase, this.#openAfter);
  }

  get closeNs(): bigint {
    return nsOf(this.#closeBase, this.#closeAfter);
  }
}

class CloseMessage extends ClosedEdges implements WindowCloseMessage {
  constructor(
    meter: Meter,
    opening: WindowOpenMessage | null,
    readonly backend: BackendName,
    openBase: bigint,
    openAfter: number,
    closeBase: bigint,
    closeAfter: number,
  ) {
    super(meter, opening, openBase, openAfter, closeBase, closeAfter);
  }
}

class RecordMessage extends ClosedEdges implements EnergyMessage {
  constructor(
    meter: Meter,
    opening: WindowOpenMessage | null,
    readonly energy: Energy,
    openBase: bigint,
    openAfter: number,
    closeBase: bigint,
    closeAfter: number,
  ) {
    super(meter, opening, openBase, openAfter, closeBase, closeAfter);
  }
}

/**
 * Publishes `giul:window:open`, the edge at `base + afterNs` (the caller checks hasSubscribers
 * first), and returns the message: the window keeps it for its close and energy messages.
 */
export function announceOpen(
  meter: Meter,
  backend: BackendName,
  openBase: bigint,
  openAfter: number,
): WindowOpenMessage {
  const message = new OpenMessage(meter, backend, openBase, openAfter);
  windowOpenChannel.publish(message);
  return message;
}

/** Publishes `giul:window:close` (the caller checks hasSubscribers first). */
export function announceClose(
  meter: Meter,
  opening: WindowOpenMessage | null,
  backend: BackendName,
  openBase: bigint,
  openAfter: number,
  closeBase: bigint,
  closeAfter: number,
): void {
  windowCloseChannel.publish(
    new CloseMessage(meter, opening, backend, openBase, openAfter, closeBase, closeAfter),
  );
}

/** Publishes `giul:energy`: once per window (the Meter sees to that). */
export function publishEnergy(
  meter: Meter,
  opening: WindowOpenMessage | null,
  energy: Energy,
  openBase: bigint,
  openAfter: number,
  closeBase: bigint,
  closeAfter: number,
): void {
  energyChannel.publish(
    new RecordMessage(meter, opening, energy, openBase, openAfter, closeBase, closeAfter),
  );
}

/**
 * Closed windows whose record may still be owed to `giul:energy` (none while nobody subscribes).
 * Whether it still is, is the window's own flag (claimed by its first result()), not membership
 * of a Set added to at each close and deleted from at each result() (a hash table's churn, and
 * its garbage, on every window).
 */
let owed: Meter[] = [];
let flushQueued = false;
let settle: (meter: Meter) => void = () => {};

/** How a flush settles a window's debt, if it is still owed (the Meter says: the flag is its own). */
export function settleOwedEnergyWith(fn: (meter: Meter) => void): void {
  settle = fn;
}

/**
 * A window closed while `giul:energy` had subscribers: its record is owed. The first `result()`
 * before this tick is over publishes it; else one `process.nextTick` for every window that closed
 * in the tick settles those still owed (what `result()` gives with no tokens).
 */
export function oweEnergy(meter: Meter): void {
  owed.push(meter);
  if (flushQueued) return;
  flushQueued = true;
  process.nextTick(flushOwed);
}

function flushOwed(): void {
  flushQueued = false;
  const due = owed;
  owed = [];
  for (let i = 0; i < due.length; i++) settle(due[i] as Meter);
}
