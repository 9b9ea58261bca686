/**
 * What was observed, turned into bounds: how far a span's energy can be from the truth, and which
 * readings are not power at all. One module for every backend: RingTrack (the native ring, the
 * nvidia-smi sampler's, a polled agent's), the fused counter (./fusion.ts: an anchor's bound on an
 * edge, a counter step's bound on the power sensor's gain) and the remote track's exact readings
 * call it, so that a counter's step, an edge's staleness or a trapezoid is bounded the same way
 * wherever it is read.
 *
 * Units are the rings': mW, mJ, ns.
 */

import { MAX_PLAUSIBLE_W } from "../vocabulary/measurement.js";

export { MAX_PLAUSIBLE_W };
/** {@link MAX_PLAUSIBLE_W} in mW. */
export const MAX_PLAUSIBLE_MW = MAX_PLAUSIBLE_W * 1000;

/** Each counter read is a whole number of mJ: up to one mJ of rounding at each edge. */
export const COUNTER_READ_QUANTUM_MJ = 1;
/** … so two at a span's two edges. */
const COUNTER_QUANTUM_MJ = 2 * COUNTER_READ_QUANTUM_MJ;

/** What a counter's update step means for a span (see {@link counterStep}). */
export interface CounterStep {
  /** A step the error bar may assume: never below the true one (ns). */
  readonly boundNs: number;
  /** The shortest window worth measuring: the estimate less the period it overshoots by (ns). */
  readonly shortestNs: number;
}

/**
 * What a sampler's upper estimate of the counter's update step (0: unknown) means for a window,
 * given the sampling period. Unknown: twice the period, and windows down to one period.
 */
export function counterStep(stepUpperNs: number, periodNs: number): CounterStep {
  if (!(stepUpperNs > 0)) return { boundNs: 2 * periodNs, shortestNs: periodNs };
  return { boundNs: stepUpperNs, shortestNs: Math.max(stepUpperNs - periodNs, 0) };
}

/** A duration in ms with at most two decimals ("12.5"): the local ring's messages. */
export function msRounded(ns: number): string {
  return String(Math.round(ns / 1e4) / 100);
}

/** A duration in ms with exactly two decimals ("12.50"): the remote track's messages. */
export function msFixed(ns: number): string {
  return (ns / 1e6).toFixed(2);
}

/**
 * Why a window of `durationNs` on an energy counter is too short to measure (its update step is
 * longer, or `noUpdate`: the counter did not change between its edges; the difference would be 0
 * or one step, not the window's energy), or null. `ms` formats the durations in the message.
 */
export function tooShortForCounter(
  durationNs: number,
  step: CounterStep,
  ms: (ns: number) => string,
  noUpdate = false,
): string | null {
  const shorter = durationNs < step.shortestNs;
  if (!shorter && !noUpdate) return null;
  const known = shorter ? ` (~${ms(step.shortestNs)} ms)` : "";
  return `window of ${ms(durationNs)} ms is shorter than the energy counter's update step${known}: too short to measure`;
}

/**
 * Why a window of `durationNs` is too short for an integral of power readings whose largest
 * interval around and inside it is `maxGapNs` (../ring/integral-spread.ts) and which lag the card
 * by up to `lagNs`, or null. Power that rose and fell between two reads, or within a reading's lag,
 * is in no reading; a window no longer than that may be nothing else (a request as short), and the
 * readings cannot measure it, as a counter cannot a window shorter than its update step.
 */
export function tooShortForReads(durationNs: number, maxGapNs: number, lagNs: number): string | null {
  const resolvedNs = maxGapNs + (lagNs > 0 ? lagNs : 0);
  if (!(durationNs < resolvedNs)) return null;
  return (
    `window of ${msRounded(durationNs)} ms is shorter than the power reads resolve ` +
    `(${msRounded(maxGapNs)} ms between reads, readings up to ${msRounded(resolvedNs - maxGapNs)} ms behind the card): too short to measure`
  );
}

/**
 * The power at which a counter's staleness at the edges is charged: the span's mean, or the power
 * at either edge where it is known and higher. A null or non-finite edge power is unknown.
 */
export function edgePower(mean: number, a: number | null, b: number | null): number {
  return Math.max(mean, finiteOr0(a), finiteOr0(b));
}

/**
 * The error a counter's staleness adds to a span (mJ): each read is as of the counter's last
 * update, up to one step before it, so the two edges' staleness differs by at most one step plus
 * the reads' own durations, at `edgeMw` ({@link edgePower}); and each read is a whole number of mJ.
 */
export function counterEdgeErrMj(
  edgeMw: number,
  stepBoundNs: number,
  readANs: number,
  readBNs: number,
): number {
  return edgeMw * ((stepBoundNs + (readANs + readBNs) / 2) / 1e9) + COUNTER_QUANTUM_MJ;
}

/**
 * How much a counter's value at one edge can lag the truth (mJ): it is as of the counter's last
 * update, up to one step (plus the read's own duration) before the edge, at `edgeMw`. One-sided:
 * the value is never ahead of the truth.
 */
export function counterLagMj(edgeMw: number, stepBoundNs: number, readNs: number): number {
  return edgeMw * ((stepBoundNs + readNs) / 1e9);
}

/**
 * The largest error of interpolating a cumulative value at an edge between the samples around it:
 * the true value lies between `before` and `after` (any unit).
 */
export function interpolationErr(before: number, value: number, after: number): number {
  return Math.max(value - before, after - value);
}

/**
 * Why an integral of power averaged over about a second (nvmlDeviceGetPowerUsage on Ampere and
 * newer, nvidia-smi's power.draw; from `source`) is no measurement: it lags and smooths the card,
 * so what a span drew can be anywhere in the card's range, whatever its readings say.
 */
export function averagedIntegral(source: string): string {
  return `the card has no energy counter, and its power is a trailing average (${source}): it lags and smooths what the card drew, so its integral over a window bounds nothing`;
}

function finiteOr0(x: number | null): number {
  return x !== null && Number.isFinite(x) ? x : 0;
}

/**
 * The caveat of a counter whose card offers only averaged power (from `source`): its edges are
 * bounded by the counter's updates alone (no power to place energy inside a step).
 */
export function averagedPowerCaveat(source: string): string {
  return (
    `the card's power is a trailing average (${source}), too slow to place energy inside the energy ` +
    "counter's steps: the edges are bounded by the counter's updates alone"
  );
}

/**
 * A span on a fused counter (mJ): the difference of its two edges (`diffMj` ± `errMj`), its bar
 * narrowed where the power readings bound the span on their own (`direct`, or null) and the
 * difference lies inside both. The figure stays the edges' difference, as the per-card ledger's
 * shares are, so that the shares of windows open together add up to the card over their edges.
 */
export function fusedSpan(
  diffMj: number,
  errMj: number,
  direct: { readonly lo: number; readonly hi: number } | null,
): { valueMj: number; errMj: number } {
  if (direct === null) return { valueMj: diffMj, errMj };
  const lo = Math.max(diffMj - errMj, direct.lo);
  const hi = Math.min(diffMj + errMj, direct.hi);
  if (!(lo <= diffMj && diffMj <= hi)) return { valueMj: diffMj, errMj };
  return { valueMj: diffMj, errMj: Math.max(diffMj - lo, hi - diffMj) };
}

/** A two-sided bound, written in place by the functions below (no allocation on the edge's path). */
export interface Bound {
  lo: number;
  hi: number;
}

/**
 * What one update of a counter says alone of its cumulative energy at `t` (mJ), into `out`: at an
 * instant somewhere in [lo, hi] the card's energy was `valueMj` (to the counter's read quantum),
 * and nothing bounds the power, so an update wholly before `t` bounds E(t) from below, one wholly
 * after it from above, and one whose instant may lie either side of `t` bounds nothing.
 */
export function updateBound(
  valueMj: number,
  instant: { readonly lo: number; readonly hi: number },
  t: number,
  out: Bound,
): void {
  out.lo = instant.hi <= t ? valueMj - COUNTER_READ_QUANTUM_MJ : Number.NEGATIVE_INFINITY;
  out.hi = instant.lo > t ? valueMj + COUNTER_READ_QUANTUM_MJ : Number.POSITIVE_INFINITY;
}

/**
 * The bound of an update wholly before `t` (mJ), into `out`: the energy since is at least the
 * sensor's least from the update window's end (`fromEndLo`), at most its most from the window's
 * start (`fromStartHi`), times the gain range.
 */
export function anchorBefore(
  valueMj: number,
  fromEndLo: number,
  fromStartHi: number,
  gainLo: number,
  gainHi: number,
  out: Bound,
): void {
  const q = COUNTER_READ_QUANTUM_MJ;
  out.lo = valueMj - q + gainLo * fromEndLo;
  out.hi = valueMj + q + gainHi * fromStartHi;
}

/**
 * The bound of an update wholly after `t` (mJ), into `out`: the energy until it is at least the
 * sensor's least to the update window's start (`toStartLo`), at most its most to the window's end
 * (`toEndHi`), times the gain range.
 */
export function anchorAfter(
  valueMj: number,
  toStartLo: number,
  toEndHi: number,
  gainLo: number,
  gainHi: number,
  out: Bound,
): void {
  const q = COUNTER_READ_QUANTUM_MJ;
  out.lo = valueMj - q - gainHi * toEndHi;
  out.hi = valueMj + q - gainLo * toStartLo;
}

/**
 * The sensor gains a closed counter step allows (true power = gain × sensor), into `out`: its
 * difference `dvMj` (to a read quantum at each end) lies between the least energy the sensor
 * allows inside the step (`innerMinMj`, from the latest first update to the earliest second one)
 * and the most it allows over it (`outerMaxMj`).
 */
export function stepGain(dvMj: number, innerMinMj: number, outerMaxMj: number, out: Bound): void {
  const q = 2 * COUNTER_READ_QUANTUM_MJ;
  out.lo = (dvMj - q) / outerMaxMj;
  out.hi = innerMinMj > 0 ? (dvMj + q) / innerMinMj : Number.POSITIVE_INFINITY;
}
