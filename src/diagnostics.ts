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
 * Each message is a fresh object. Subscribers run synchronously and must not throw (Node turns a
 * subscriber's throw into an uncaught exception, and giul's own exporters never throw).
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
  /** CLOCK_MONOTONIC ns of the opening edge (the clock of `process.hrtime.bigint()`). */
  readonly openNs: bigint;
}

/** `giul:window:close`: a window's closing edge was taken; its record follows on `giul:energy`. */
export interface WindowCloseMessage {
  readonly meter: Meter;
  readonly node: ResolvedNode;
  readonly backend: BackendName;
  readonly openNs: bigint;
  /** CLOCK_MONOTONIC ns of the closing edge. */
  readonly closeNs: bigint;
}

/** `giul:energy`: a closed window's record, once. */
export interface EnergyMessage {
  readonly meter: Meter;
  readonly node: ResolvedNode;
  /** What the window cost, as `result()` returns it (`energy.toJSON()` is the fleet record). */
  readonly energy: Energy;
  /** CLOCK_MONOTONIC ns of the window's opening and closing edges (its stages run back to back between). */
  readonly openNs: bigint;
  readonly closeNs: bigint;
}

export const windowOpenChannel = channel(GIUL_CHANNELS.windowOpen);
export const windowCloseChannel = channel(GIUL_CHANNELS.windowClose);
export const energyChannel = channel(GIUL_CHANNELS.energy);

/** Publishes `giul:window:open` (the caller checks hasSubscribers first). */
export function announceOpen(meter: Meter, backend: BackendName, openNs: bigint): void {
  const message: WindowOpenMessage = { meter, node: meter.node, backend, openNs };
  windowOpenChannel.publish(message);
}

/** Publishes `giul:window:close` (the caller checks hasSubscribers first). */
export function announceClose(meter: Meter, backend: BackendName, openNs: bigint, closeNs: bigint): void {
  const message: WindowCloseMessage = { meter, node: meter.node, backend, openNs, closeNs };
  windowCloseChannel.publish(message);
}

/** Publishes `giul:energy`: once per window (the Meter sees to that). */
export function publishEnergy(meter: Meter, energy: Energy, openNs: bigint, closeNs: bigint): void {
  const message: EnergyMessage = { meter, node: meter.node, energy, openNs, closeNs };
  energyChannel.publish(message);
}

/** Closed windows whose record is still owed to `giul:energy` (none while nobody subscribes). */
const owed = new Set<Meter>();
let flushQueued = false;

/**
 * A window closed while `giul:energy` had subscribers: its record is owed. The first `result()`
 * before this tick is over publishes it (see {@link claimEnergy}); else one `process.nextTick`
 * for every window that closed in the tick publishes what `result()` gives with no tokens.
 */
export function oweEnergy(meter: Meter): void {
  owed.add(meter);
  if (flushQueued) return;
  flushQueued = true;
  process.nextTick(flushOwed);
}

/** Whether `meter`'s record is owed, and no longer once asked: the caller publishes it. */
export function claimEnergy(meter: Meter): boolean {
  return owed.size !== 0 && owed.delete(meter);
}

function flushOwed(): void {
  flushQueued = false;
  const due = [...owed];
  for (const meter of due) {
    try {
      meter.result(); // claims and publishes (a window's result() never throws once it is closed)
    } catch {
      owed.delete(meter);
    }
  }
}
