/**
 * An edge of the fused counter (./fusion.ts) bounded inside the counter step it falls in, once the
 * counter has closed that step: the counter alone (the updates around it), a fresh sensor's
 * readings where the counter supports them (their bound is the hull of what the updates before and
 * after the edge say, so what they missed widens it), and an estimate inside (the readings' energy,
 * or for a held sensor their shape, ./shape.ts, which never bounds). Also a
 * short span's bound from the readings alone (between). Times ns relative to the ring's epoch,
 * energy mJ, power mW.
 */

import { FLAG, type Sample, type SampleRing } from "../track/ring.js";
import {
  type Basis,
  CONTINUOUS,
  COUNTER_ONLY,
  type GainEvidence,
  type PowerReadings,
  type SensorJudge,
  type SensorModel,
} from "./power-model.js";
import type { SampleCopy } from "./sample-copy.js";
import type { PowerShape } from "./shape.js";
import type { CounterStaleness } from "./staleness.js";
import { CALIBRATION_LIMITS } from "./step-judge.js";
import { anchorAfter, anchorBefore, type Bound, updateBound } from "./uncertainty.js";

/** Where CounterFusion.at writes the fused energy at an instant (RingEdge has these fields). */
export interface FusedTarget {
  /** The cumulative energy (mJ); the truth lies within value ± errMj. */
  value: number;
  errMj: number;
  basis: number;
}

/** CounterFusion.at: true when it wrote the target; false while it cannot bound it yet; else why never. */
export type FusedOutcome = boolean | string;

/** What of the fused counter (./fusion.ts CounterFusion) an edge is bounded from. */
export interface FusedCounter {
  readonly ring: SampleRing;
  readonly anchorAt: Float64Array;
  readonly anchorBase: number;
  readonly aValue: readonly number[];
  readonly aK: readonly number[];
  /** Each update's raw read interval starts (ns): the read before its value was first seen. */
  readonly aLo: readonly number[];
  readonly copy: SampleCopy;
  readonly s: Sample;
  readonly power: PowerReadings;
  /** Whether the power readings are instant (not a 1 s average). */
  readonly usePower: boolean;
  readonly judge: SensorJudge;
  readonly shape: PowerShape;
  readonly staleness: CounterStaleness;
  /** Written by sensorEnergy and windowEnergy. */
  readonly bounds: Bound;
  basis(): Basis;
  seg(n: number): number;
  valueOf(n: number): number;
  locked(n: number, out: Bound): Bound;
  sensorEnergy(x: number, y: number, model: SensorModel): void;
  windowEnergy(j: number, w: Bound, basis: SensorModel): void;
}

/** A closed counter step: anchors `left` and `right`, updates in (from, leftHi] and (rightLo, to]. */
interface ClosedStep {
  left: number;
  right: number;
  from: number;
  leftHi: number;
  rightLo: number;
  to: number;
}

/** An edge's bound and the point estimate inside it (mJ). */
interface EdgeBound extends Bound {
  estimate: number;
}

/** Readings refreshing less often than this many of the counter's steps place nothing in one. */
const SLOW_SENSOR_STEPS = 2.5;

export class ClosedSteps {
  /** The closed step around the edge being bounded (stepAround). */
  private readonly step: ClosedStep = { left: -1, right: -1, from: 0, leftHi: 0, rightLo: 0, to: 0 };
  private readonly edgeBound: EdgeBound = { lo: 0, hi: 0, estimate: 0 };
  /** shapeEstimate found the readings short of the step's end (the edge waits for them). */
  private shapeWaits = false;
  // Scratch (nothing allocated per edge).
  private readonly wScratch: Bound = { lo: 0, hi: 0 };
  private readonly wOther: Bound = { lo: 0, hi: 0 };
  private readonly anchorScratch: Bound = { lo: 0, hi: 0 };
  private readonly stepA: Bound = { lo: 0, hi: 0 };
  private readonly stepB: Bound = { lo: 0, hi: 0 };
  private readonly missedScratch: Bound = { lo: 0, hi: 0 };

  constructor(private readonly f: FusedCounter) {}

  /**
   * The reading of the sensor that bounds energy inside a closed step: a fresh sensor's readings
   * where the counter supports them (boundingModel); else the counter alone. A held or averaging
   * sensor (A100/H100: 25 ms of every 100 ms) says nothing sure of the power between its refreshes,
   * however long it averages: its readings shape the estimate (shapeEstimate), never the bar.
   */
  private boundingBasis(): Basis {
    if (this.f.basis() === COUNTER_ONLY) return COUNTER_ONLY;
    return boundingModel(this.f.judge, this.f.power) ?? COUNTER_ONLY;
  }
  /** Whether the newest update of anchor kA's run began before t: none read wholly after it yet. */
  awaitsUpdate(t: number, kA: number): boolean {
    const n = this.f.anchorAt[kA % this.f.ring.capacity] ?? -1;
    if (n < 0 || n < this.f.anchorBase) return false;
    const newest = this.f.anchorBase + this.f.aValue.length - 1;
    return this.f.seg(newest) === this.f.seg(n) && (this.f.aLo[newest - this.f.anchorBase] as number) < t;
  }

  /**
   * What the updates around t say of E(t) (the closed step this.step), and a point estimate. The
   * counter alone: E(t) lies between the value of each update before t and of each after it (the intersection). The
   * readings, where they may bound the closed step around t (its last update wholly before t and
   * first wholly after, this.step): from the update before, E(t) is its value plus the readings'
   * energy since; from the update after, its value less the readings' energy until it. Where the
   * readings missed energy (a burst between reads) or counted some not drawn, the two differ by
   * it, and which side of t it lay on nothing says: E(t) lies in the hull of the two, not their
   * intersection. A held sensor's lag would split it across t: its readings never bound here.
   * The estimate: the readings' energy from the update before, plus what the step's total says
   * they missed, placed where the readings are unsure (the counter fixes the total, power the
   * shape).
   */
  private bound(t: number, basis: Basis, r: EdgeBound): void {
    let lo = Number.NEGATIVE_INFINITY;
    let hi = Number.POSITIVE_INFINITY;
    const w = this.wScratch;
    const one = this.anchorScratch;
    const step = this.step;
    // The counter alone: every update from the last wholly before t to the first wholly after it
    // (those between straddle t, each bounding E(t) by its value on the side its instant may be).
    for (let j = step.left; j <= step.right; j++) {
      this.f.locked(j, w);
      updateBound(this.f.valueOf(j), w, t, one);
      if (one.lo > lo) lo = one.lo;
      if (one.hi < hi) hi = one.hi;
    }
    r.estimate = Number.NaN;
    if (basis === COUNTER_ONLY) {
      r.lo = lo;
      r.hi = hi;
      return;
    }
    const gain = this.f.judge.evidence(basis);
    const gLo = gain.gainLo;
    const gHi = gain.gainHi;
    const e = this.f.bounds;
    // From the update before t: its value plus the readings' energy since (at least from its
    // window's end, at most from its start).
    const vL = this.f.valueOf(step.left);
    w.lo = step.from;
    w.hi = step.leftHi;
    this.f.sensorEnergy(w.hi, t, basis);
    const aLo = e.lo;
    const aHi = e.hi;
    this.f.windowEnergy(step.left, w, basis);
    const leftE = (aLo + aHi) / 2 + (e.lo + e.hi) / 4;
    // How unsure that is: the readings' range since the update, and the update's own window.
    const leftW = aHi - aLo + e.hi;
    anchorBefore(vL, aLo, aHi + e.hi, gLo, gHi, one);
    let hullLo = one.lo;
    let hullHi = one.hi;
    // From the update after t: its value less the readings' energy until it.
    const vR = this.f.valueOf(step.right);
    w.lo = step.rightLo;
    w.hi = step.to;
    this.f.sensorEnergy(t, w.lo, basis);
    const bLo = e.lo;
    const bHi = e.hi;
    this.f.windowEnergy(step.right, w, basis);
    const rightE = (bLo + bHi) / 2 + (e.lo + e.hi) / 4;
    const rightW = bHi - bLo + e.hi;
    anchorAfter(vR, bLo, bHi + e.hi, gLo, gHi, one);
    if (one.lo < hullLo) hullLo = one.lo;
    if (one.hi > hullHi) hullHi = one.hi;
    r.lo = Math.max(lo, hullLo);
    r.hi = Math.min(hi, hullHi);
    const g = (gLo + gHi) / 2;
    let estimate = vL + 0.5 + g * leftE;
    // No readings before a run's first update: the estimate hangs from the update after the edge.
    if (!Number.isFinite(leftW) && Number.isFinite(rightW)) estimate = vR + 0.5 - g * rightE;
    else if (Number.isFinite(leftW + rightW)) {
      const missed = vR - vL - g * (leftE + rightE);
      if (leftW + rightW > 1e-9) estimate += (missed * leftW) / (leftW + rightW);
      else if (leftE + rightE > 0) estimate = vL + 0.5 + ((vR - vL) * leftE) / (leftE + rightE);
    }
    r.estimate = estimate;
  }
  /**
   * The counter's step around `t` shared out by the power readings (mJ), NaN without a step after
   * `t` or readings over it: the step's energy placed where the readings say it was drawn, each
   * reading taken as the power at its read. No bound rests on it (a held or averaged sensor may
   * have missed the shape); it keeps a window that starts or ends a burst from being charged the
   * middle of the step, which is biased against every such window.
   */
  private shapeEstimate(t: number): number {
    const step = this.step;
    this.shapeWaits = false;
    if (step.left < 0) return Number.NaN;
    const uL = (step.from + step.leftHi) / 2;
    const uR = (step.rightLo + step.to) / 2;
    if (!this.f.shape.covers(uR)) {
      this.shapeWaits = true;
      return Number.NaN;
    }
    const left = step.left;
    const right = step.right;
    const vL = this.f.aValue[left - this.f.anchorBase] as number;
    const dv = (this.f.aValue[right - this.f.anchorBase] as number) - vL;
    // The step's start known far less well than its end (a run's first update, placed only to an
    // update interval): the estimate hangs from its end, the readings' energy back to the edge.
    if (step.leftHi - step.from > 4 * (step.to - step.rightLo)) {
      const back = this.f.shape.energy(t, uR);
      if (Number.isFinite(back)) return vL + dv - this.f.shape.gain() * back;
    }
    // Readings slower than the counter (a 1 s average; a sensor refreshing far less often than
    // the counter updates): the levels of the counter's own steps either side place the change.
    if (!this.f.usePower || this.f.power.refreshUpperNs > SLOW_SENSOR_STEPS * (uR - uL)) {
      const x = this.counterLevels(t, uL, uR, vL, dv);
      if (!Number.isNaN(x)) return x;
    }
    // Power is mostly steps (idle, prefill, decode): where the readings change little inside the
    // step and its energy lies between the levels read at its two ends, it is taken as one change
    // between them, at the instant that gives the counter's energy; else shared out as the
    // readings' shape over the step.
    const g = this.f.shape.gain();
    const p1 = g * this.f.shape.levelAt(uL);
    const p2 = g * this.f.shape.levelAt(uR - 1);
    const span = uR - uL;
    if (Math.abs(p1 - p2) > 0.05 * Math.max(p1, p2) && this.f.shape.changesBetween(uL, uR) <= 2) {
      const tau = (dv * 1e9 - p2 * uR + p1 * uL) / (p1 - p2);
      if (tau > uL && tau < uR) return vL + (p1 * (Math.min(t, tau) - uL) + p2 * Math.max(0, t - tau)) / 1e9;
    }
    const before = this.f.shape.energy(uL, t);
    const after = this.f.shape.energy(t, uR);
    if (!(before + after > 0) || !Number.isFinite(before + after)) return vL + (dv * (t - uL)) / span;
    return vL + (dv * before) / (before + after);
  }
  /**
   * The energy at `t` inside the closed step (uL, uR) rising by `dv` from `vL` as one change of
   * power, from the level of the counter's step before it to the level of the step after it, at
   * the instant that gives `dv` (power is mostly steps: idle, prefill, decode); NaN where the
   * levels differ by less than 5 % or `dv` is not between them (more than one change), or the
   * steps either side are not both read, in the same run (an edge does not wait for the step
   * after: a closing edge is usually bounded before it comes, and placed by the shape).
   */
  private counterLevels(t: number, uL: number, uR: number, vL: number, dv: number): number {
    const { left, right } = this.step;
    const f = this.f;
    const last = f.anchorBase + f.aValue.length - 1;
    const seg = f.seg(left);
    if (left - 1 < f.anchorBase || f.seg(left - 1) !== seg) return Number.NaN;
    if (right + 1 > last || f.seg(right + 1) !== seg) return Number.NaN;
    const w = this.wOther;
    f.locked(left - 1, w);
    const p1 = ((vL - f.valueOf(left - 1)) * 1e9) / (uL - (w.lo + w.hi) / 2);
    f.locked(right + 1, w);
    const p2 = ((f.valueOf(right + 1) - f.valueOf(right)) * 1e9) / ((w.lo + w.hi) / 2 - uR);
    if (!Number.isFinite(p1 + p2) || !(Math.abs(p1 - p2) > 0.05 * Math.max(p1, p2))) return Number.NaN;
    const tau = (dv * 1e9 - p2 * uR + p1 * uL) / (p1 - p2);
    if (!(tau > uL && tau < uR)) return Number.NaN;
    return vL + (p1 * (Math.min(t, tau) - uL) + p2 * Math.max(0, t - tau)) / 1e9;
  }
  /**
   * What the readings leave unexplained of each step from anchor `a` to anchor `b`, summed into
   * `out` (see unexplained): each step's missed energy may lie anywhere inside it.
   */
  private missedOver(a: number, b: number, basis: Basis, gLo: number, gHi: number, out: Bound): void {
    const e = this.f.bounds;
    const wa = this.stepA;
    const wb = this.stepB;
    out.lo = 0;
    out.hi = 0;
    this.f.locked(a, wa);
    for (let j = a; j < b; j++) {
      this.f.locked(j + 1, wb);
      const dv = this.f.valueOf(j + 1) - this.f.valueOf(j);
      this.f.sensorEnergy(wa.hi, wb.lo, basis as SensorModel);
      const innerLo = e.lo;
      this.f.sensorEnergy(wa.lo, wb.hi, basis as SensorModel);
      out.hi += Math.max(0, dv - gLo * innerLo);
      out.lo += Math.max(0, gHi * e.hi - dv);
      wa.lo = wb.lo;
      wa.hi = wb.hi;
    }
  }
  /**
   * The closed counter step around `t` (anchor n the last at or before its read): the last
   * update wholly before t and the first wholly after it in n's run, into this.step; null while
   * no update after t has been read.
   */
  private stepAround(t: number, n: number): ClosedStep | null {
    const seg = this.f.seg(n);
    const last = this.f.anchorBase + this.f.aValue.length - 1;
    const w = this.wOther;
    const step = this.step;
    step.left = -1;
    // Updates whose reads straddle t (reads asked at an edge come a fraction of a period apart)
    // are passed over, up to the first wholly after it; and from a few before n (a sample written
    // just before the edge read the ring's head may already be stamped after it).
    for (let j = n - 4; j <= Math.min(n + 8, last); j++) {
      if (j < this.f.anchorBase || this.f.seg(j) !== seg) continue;
      this.f.locked(j, w);
      if (w.hi <= t) {
        step.left = j;
        step.leftHi = w.hi;
        step.from = w.lo;
        // A run's first update came at most one update interval before the next one (./staleness.ts):
        // −∞ while the interval is not bounded yet.
        if (!Number.isFinite(w.lo) && j < last)
          step.from = Math.min(w.hi, this.f.locked(j + 1, w).lo - this.f.staleness.bound());
      } else if (w.lo >= t) {
        if (step.left < 0) return null;
        step.right = j;
        step.rightLo = w.lo;
        step.to = w.hi;
        return step;
      }
    }
    step.left = -1;
    return null;
  }
  /** What ended anchor n's run of the counter (its next change was a fault), for a reason. */
  private faultAfter(n: number): string {
    const k = this.f.aK[n + 1 - this.f.anchorBase] as number;
    const s = this.f.s;
    const found = this.f.copy.faultsBetween(this.f.aK[n - this.f.anchorBase] as number, k);
    if (found.length > 0) return `after the edge ${found.join("; ")}`;
    for (let j = (this.f.aK[n - this.f.anchorBase] as number) + 1; j <= k; j++) {
      if (!this.f.ring.read(j, s)) continue;
      if (s.flags & FLAG.COUNTER_BACKWARDS)
        return "after the edge the energy counter went backwards (driver reload?)";
      if (s.flags & FLAG.COUNTER_JUMP)
        return "after the edge the energy counter jumped faster than any card draws (driver reload?)";
      if (s.flags & FLAG.READ_FAILED) return "after the edge a read failed";
    }
    return "the energy counter's next change after the edge was a fault";
  }
  /**
   * The cumulative energy at `t`, given `kA`, the last sample at or before it, into `out`. False
   * while the samples present cannot bound it yet (see FusedOutcome).
   */
  at(t: number, kA: number, out: FusedTarget): FusedOutcome {
    const n = this.f.anchorAt[kA % this.f.ring.capacity] ?? -1;
    if (n < 0 || n < this.f.anchorBase) return "no energy counter reading before the edge";
    // No update read wholly after t yet (the newest began before it): wait, at the cost of a look.
    if (this.awaitsUpdate(t, kA)) return false;
    // Every edge is bounded inside a step the counter has closed: the readings only where the
    // step's total checks them (a burst they missed, before or after the edge, shows as a step
    // that disagrees with them, not as a tight bar around the wrong figure), and the counter alone
    // needs the update after the edge anyway.
    const step = this.stepAround(t, n);
    if (step === null) {
      const last = this.f.anchorBase + this.f.aValue.length - 1;
      if (n < last && this.f.seg(n + 1) !== this.f.seg(n)) {
        return `${this.faultAfter(n)}: the energy counter's energy at the edge cannot be bounded`;
      }
      return false;
    }
    let basis = this.boundingBasis();
    const r = this.edgeBound;
    this.bound(t, basis, r);
    if (r.lo > r.hi && basis !== COUNTER_ONLY) {
      // The readings contradict the counter around this edge: bound it by the counter alone.
      basis = COUNTER_ONLY;
      this.bound(t, basis, r);
    }
    if (!Number.isFinite(r.lo) || !Number.isFinite(r.hi)) {
      // The counter's run ended after anchor n (a fault): no later change will bound this edge.
      const last = this.f.anchorBase + this.f.aValue.length - 1;
      if (n < last && this.f.seg(n + 1) !== this.f.seg(n)) {
        return `${this.faultAfter(n)}: the energy counter's energy at the edge cannot be bounded`;
      }
      return false;
    }
    if (r.lo > r.hi) return "the energy counter contradicts itself around the edge";
    // The estimate inside the bound (its middle without power to go by), and the bound's reach
    // from it either way.
    out.basis = basis;
    // A held sensor's readings bound loosely and show power late: the estimate is the shape's,
    // whose lag the counter chose; a continuous sensor's is bound()'s.
    if (basis !== CONTINUOUS) {
      r.estimate = this.shapeEstimate(t);
      // The readings have not yet shown what was drawn up to the step's end: wait for them.
      if (Number.isNaN(r.estimate) && this.shapeWaits) return false;
    }
    if (!Number.isFinite(r.estimate)) {
      out.value = (r.lo + r.hi) / 2;
      out.errMj = (r.hi - r.lo) / 2;
      return true;
    }
    const x = Math.min(r.hi, Math.max(r.lo, r.estimate));
    out.value = x;
    out.errMj = Math.max(x - r.lo, r.hi - x);
    return true;
  }

  /**
   * Bounds on the energy between two instants from the power readings alone (mJ), where the
   * counter has closed the steps over them and their readings may bound (boundingBasis), widened
   * by what the readings leave unexplained of each of those steps; null otherwise. `kA` is the
   * last sample at or before `x`. For spans shorter than a step, this beats the difference of two
   * edges.
   */
  between(x: number, y: number, kA: number): { lo: number; hi: number } | null {
    const n = this.f.anchorAt[kA % this.f.ring.capacity] ?? -1;
    if (n < 0 || n < this.f.anchorBase) return null;
    const basis = this.boundingBasis();
    if (basis === COUNTER_ONLY) return null;
    const step = this.stepAround(x, n);
    if (step === null) return null;
    const first = step.left;
    // The first update wholly after y, in the same run of the counter.
    const last = this.f.anchorBase + this.f.aValue.length - 1;
    const w = this.wOther;
    let end = -1;
    for (let j = step.right; j <= last && this.f.seg(j) === this.f.seg(first); j++) {
      if (this.f.locked(j, w).lo >= y) {
        end = j;
        break;
      }
    }
    if (end < 0) return null;
    const e = this.f.judge.evidence(basis as SensorModel);
    const missed = this.missedScratch;
    this.missedOver(first, end, basis, e.gainLo, e.gainHi, missed);
    this.f.sensorEnergy(x, y, basis as SensorModel);
    return { lo: e.gainLo * this.f.bounds.lo - missed.lo, hi: e.gainHi * this.f.bounds.hi + missed.hi };
  }
}

/**
 * The reading of the sensor that may bound energy between reads: a continuous one, where the
 * counter supports it and the sensor has shown it refreshes about as often as it is read
 * (PowerReadings.fresh). Null: none may, and the counter alone bounds.
 */
export function boundingModel(judge: SensorJudge, power: PowerReadings): SensorModel | null {
  if (judge.steps === 0) return null;
  return power.fresh() && calibrated(judge.evidence(CONTINUOUS)) ? CONTINUOUS : null;
}

/**
 * Whether the steps agree on a gain a calibration can have (CALIBRATION_LIMITS). A sensor the
 * counter finds 1.6 times short has missed what it did not see (bursts between a held point
 * sample's refreshes); the gain that makes up for it on average says nothing of where, and the
 * readings place nothing.
 */
function calibrated(e: GainEvidence): boolean {
  return e.consistent() && e.gainLo >= CALIBRATION_LIMITS[0] && e.gainHi <= CALIBRATION_LIMITS[1];
}
