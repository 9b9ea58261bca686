/**
 * How one closed counter step is judged against the power readings before it becomes evidence
 * (./power-model.ts SensorJudge): a discontinuity (no allowed gain explains it) or a glitch (a gain
 * the settled steps exclude). Energy mJ, instants ns.
 */
import { type Bound, COUNTER_READ_QUANTUM_MJ, stepGain } from "./uncertainty.js";

/**
 * Gains a calibration of the sensor can have (true power = gain × reading): a step that needs one
 * beyond them is a discontinuity of the counter (the sensor and the counter are one telemetry).
 */
export const CALIBRATION_LIMITS = [0.75, 1.33] as const;
/**
 * The same where the step's reads came late (a sampler thread starved on a loaded host): power
 * that changed between them can make a step look off by a factor, so only a larger one is a fault.
 */
export const LATE_READ_LIMITS = [0.5, 2] as const;
/**
 * Gains an edge's bound allows until the steps narrow them: wider than CALIBRATION_LIMITS, so that
 * a step that fits only at their edge (a jump too small to tell) does not pin its edges.
 */
export const GAIN_LIMITS = [1 / 3, 3] as const;
/** Energy no reading of the sensor is off by, on top of its gain (mJ): a discontinuity is beyond it. */
const DISCONTINUITY_SLACK_MJ = 1000;
/** Steps that must have agreed on one gain before a step that disagrees is taken for a glitch. */
export const SETTLED_STEPS = 8;

/**
 * Why a counter step of `dvMj` between updates in `a` and `b` cannot be the card's energy: more
 * than the most the sensor's readings allow at the largest gain, or less than the least at the
 * smallest; null when it can be, or when the readings cannot tell.
 */
export function discontinuity(
  dvMj: number,
  innerMj: number,
  outerMj: number,
  a: { lo: number; hi: number },
  b: { lo: number; hi: number },
  limits: readonly [number, number],
): string | null {
  const q = 2 * COUNTER_READ_QUANTUM_MJ;
  const most = limits[1] * outerMj + DISCONTINUITY_SLACK_MJ;
  if (Number.isFinite(outerMj) && dvMj - q > most) {
    return (
      `the energy counter advanced ${(dvMj / 1000).toFixed(1)} J in at most ${((b.hi - a.lo) / 1e6).toFixed(0)} ms, ` +
      `more than the power read allows (${(most / 1000).toFixed(1)} J): a counter jump`
    );
  }
  const least = limits[0] * innerMj - DISCONTINUITY_SLACK_MJ;
  if (Number.isFinite(innerMj) && dvMj + q < least) {
    return (
      `the energy counter advanced ${(dvMj / 1000).toFixed(1)} J in at least ${((b.lo - a.hi) / 1e6).toFixed(0)} ms, ` +
      `less than the power read needs (${(least / 1000).toFixed(1)} J): a stalled counter`
    );
  }
  return null;
}

/**
 * Why a step of `dvMj` is a glitch: the gains it allows (the least energy inside it, `innerMj`,
 * and the most over it, `outerMj`) exclude the gains [gainLo, gainHi] the settled steps agree on;
 * null when they overlap or the readings cannot tell. `gain` is scratch.
 */
export function glitch(
  dvMj: number,
  innerMj: number,
  outerMj: number,
  gainLo: number,
  gainHi: number,
  gain: Bound,
): string | null {
  if (!Number.isFinite(outerMj) || !(outerMj > 0)) return null;
  stepGain(dvMj, innerMj, outerMj, gain);
  if (gain.lo <= gainHi && gain.hi >= gainLo) return null;
  const g = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "∞");
  return (
    `one step of the energy counter (${(dvMj / 1000).toFixed(1)} J) disagreed with the power readings: ` +
    `it needs a sensor gain of ${g(gain.lo)}–${g(gain.hi)}, where the steps before agreed on ` +
    `${g(gainLo)}–${g(gainHi)}`
  );
}
