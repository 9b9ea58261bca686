/**
 * The energy counter fused with instantaneous power: the cumulative energy at any instant, with a
 * bound, from the samples of a ring (the counter and the power read at each tick).
 *
 * The counter fixes each step's total; power fixes the shape within it. Every change of the
 * counter is an *anchor*: at its update instant u (known to within the read interval, narrowed by
 * locking onto the counter's cadence, ./cadence.ts) the card's energy was its value V, to the mJ.
 * From any anchor the energy at an edge t is V plus the energy between u and t, which the power
 * readings bound (./power-model.ts); the edge's bound is the intersection of the anchors'. With no
 * usable power (a card whose only power is a 1 s average, or none) the anchors alone bound the
 * edge, between the last update before it and the first after it.
 *
 * How far the power readings can be trusted is decided by the counter: each closed step must be
 * explained by the readings under a reading of the sensor (power-model.ts) and one gain common to
 * the recent steps; the most trusting reading not contradicted is used, and none before one step
 * has been seen (a new ring bounds its edges by the counter alone). A step that the reading in use
 * explains with no allowed gain (a jump, a stall) is a discontinuity, not evidence: a fault.
 *
 * Bounds are two-sided: the estimate is the middle of the interval and the error its half-width.
 * Times are ns relative to the ring's epoch, energy mJ, power mW.
 */

import { emptySample, FLAG, type Sample, type SampleRing } from "../track/ring.js";
import { CounterCadence } from "./cadence.js";
import { FreshCounter, freshInstant, type ReadWindow } from "./fresh.js";
import { type FusionReport, fusionReport } from "./fusion-report.js";
import {
  type Basis,
  CONTINUOUS,
  COUNTER_ONLY,
  LAG_NS,
  PowerReadings,
  SensorJudge,
  type SensorModel,
} from "./power-model.js";
import { SampleCopy } from "./sample-copy.js";
import { SensorEnergyMemo } from "./sensor-energy.js";
import { PowerShape } from "./shape.js";
import { CounterStaleness } from "./staleness.js";
import { anchorAfter, anchorBefore, anchorBound, type Bound, type EnergyBound } from "./uncertainty.js";

/** An edge's bound and the point estimate inside it (mJ). */
interface EdgeBound extends Bound {
  estimate: number;
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

/** What a ring's power readings are. */
export type PowerKind = "instant" | "averaged";

export type { FusionReport } from "./fusion-report.js";
export { type Basis, COUNTER_ONLY } from "./power-model.js";

/** Where CounterFusion.at writes the fused energy at an instant (RingEdge has these fields). */
export interface FusedTarget {
  /** The cumulative energy (mJ); the truth lies within value ± errMj. */
  value: number;
  errMj: number;
  basis: number;
}

/** CounterFusion.at: true when it wrote the target; false while it cannot bound it yet; else why never. */
export type FusedOutcome = boolean | string;

/** Reads further apart than this many periods came late (dither and asked reads keep them under 2). */
const LATE_READ_GAP = 3;
/** Two power readings' changes within this many sampler periods show a sensor as fresh as its reads. */
const FRESH_PERIODS = 2.5;
/** The longest a sensor is taken to hold a reading where its refresh is not bounded yet (ns). */
const MAX_HOLD_NS = 1e9;

export class CounterFusion {
  private readonly ring: SampleRing;
  private readonly power: PowerReadings;
  private readonly usePower: boolean;
  private readonly s: Sample = emptySample();
  /** The anchor in force at each sample (its global number), by k % capacity; −1: none. */
  private readonly anchorAt: Float64Array;
  /** What edges need of each sample, copied as it is digested (./sample-copy.ts). */
  private readonly copy: SampleCopy;
  // Anchors by global number − anchorBase: the counter's value, its raw window, its run (segment).
  private aValue: number[] = [];
  private aLo: number[] = [];
  private aHi: number[] = [];
  private aSeg: number[] = [];
  /** Each anchor's read index and the duration of its read (ns). */
  private aK: number[] = [];
  private aRead: number[] = [];
  /** The start of the latest read that still showed each anchor's value (ns). */
  private aSeen: number[] = [];
  private anchorBase = 0;
  /** How stale a read can be where no lattice is found, and whether the newest value stalled. */
  private readonly staleness = new CounterStaleness();
  private standing = false;
  /** Whether the counter is at most δ behind each read (./fresh.ts). */
  private readonly fresh: FreshCounter;
  /** The current run of the counter's changes, and the anchor number of its first change. */
  private cadence = new CounterCadence();
  private cadenceFirst = 0;
  private cadenceSeg = -1;
  private segment = 0;
  private lastT = Number.NaN;
  private lastRead = 0;
  private lastEnergy = Number.NaN;
  private processed = 0;
  /** Which reading of the power sensor the counter supports (power-model.ts). */
  private readonly judge: SensorJudge;
  private readonly bounds = { lo: 0, hi: 0 };
  // Scratch (nothing allocated per edge): two anchors' update instants, one anchor's bound, a
  // step's two updates (checkStep, judgeStep), the edge's bound, and the basis energyOf uses.
  private readonly wScratch: Bound = { lo: 0, hi: 0 };
  private readonly wOther: Bound = { lo: 0, hi: 0 };
  private readonly anchorScratch: Bound = { lo: 0, hi: 0 };
  private readonly missedScratch: Bound = { lo: 0, hi: 0 };
  /** The closed step around the edge being bounded (stepAround). */
  private readonly step: ClosedStep = { left: -1, right: -1, from: 0, leftHi: 0, rightLo: 0, to: 0 };
  private readonly windowA = { lo: 0, hi: 0, readNs: 0 };
  private readonly windowB = { lo: 0, hi: 0, readNs: 0 };
  private readonly stepA: Bound = { lo: 0, hi: 0 };
  private readonly stepB: Bound = { lo: 0, hi: 0 };
  private readonly edgeBound: EdgeBound = { lo: 0, hi: 0, estimate: 0 };
  private basisNow: Basis = COUNTER_ONLY;
  private readonly energyOf: EnergyBound = (x, y, end) => this.energy(x, y, this.basisNow, end);
  /** Where inside a step the energy went, by the readings (./shape.ts): the estimate's, not the bar's. */
  private readonly shape = new PowerShape();
  /** shapeEstimate found the readings short of the step's end (the edge waits for them). */
  private shapeWaits = false;
  /** The sensor's energy between readings, memoized (./sensor-energy.ts). */
  private readonly memo: SensorEnergyMemo;

  /** After update() digested new samples (the track pushes its digest timer back). */
  private readonly onDigest: (() => void) | null;

  constructor(ring: SampleRing, kind: PowerKind, onDigest: (() => void) | null = null) {
    this.ring = ring;
    this.onDigest = onDigest;
    this.usePower = kind === "instant";
    this.power = new PowerReadings(ring.capacity);
    this.memo = new SensorEnergyMemo(this.power);
    this.judge = new SensorJudge(this.power, (x, y, model, out) => this.memo.energy(x, y, model, out));
    this.fresh = new FreshCounter(this.memo);
    this.anchorAt = new Float64Array(ring.capacity).fill(-1);
    this.copy = new SampleCopy(ring.capacity);
  }

  /** Reads the samples written since the last call. */
  update(): void {
    const ring = this.ring;
    const head = ring.head();
    if (this.processed < head - ring.capacity) {
      // Fell a whole ring behind: start over from the oldest sample held.
      this.processed = head - ring.capacity;
      this.power.head = this.processed;
      this.segment += 1;
      this.lastEnergy = Number.NaN;
    }
    if (this.processed >= head) return;
    this.power.freshWithinNs = FRESH_PERIODS * ring.periodNs();
    const s = this.s;
    for (; this.processed < head; this.processed++) {
      const k = this.processed;
      if (!ring.read(k, s)) {
        this.copy.write(k, null);
        this.power.push(Number.NaN, 0, Number.NaN);
        this.anchorAt[k % ring.capacity] = -1;
        this.lastEnergy = Number.NaN;
        this.segment += 1;
        continue;
      }
      this.copy.write(k, s);
      const pt = Number.isFinite(s.powerT) ? s.powerT : s.t;
      this.power.push(pt, s.powerReadNs, s.powerMw);
      this.shape.push(pt, s.powerMw);
      if ((s.flags & (FLAG.COUNTER_BACKWARDS | FLAG.COUNTER_JUMP | FLAG.READ_FAILED)) !== 0) {
        this.segment += 1;
        this.lastEnergy = Number.NaN;
      }
      if (Number.isNaN(s.energyMj)) {
        this.anchorAt[k % ring.capacity] = -1;
        this.segment += 1;
        this.lastEnergy = Number.NaN;
        continue;
      }
      if (s.energyMj !== this.lastEnergy) {
        // A new value: its update came after the previous read (of this run of the counter).
        const first = Number.isNaN(this.lastEnergy);
        const prev = this.aValue.length - 1;
        const lo = this.lastT - this.lastRead / 2;
        const hi = s.t + s.readNs / 2;
        // Where the value before stood still for longer than the counter had gone between
        // updates, that bound is in doubt: the step is judged on its reads alone, and where they
        // cannot place it, the stand itself is the evidence of a stall.
        const stood = this.standing && !first;
        let why =
          first || !this.usePower ? null : this.judgeStep(s.energyMj - this.lastEnergy, s, k, pt, !stood);
        if (stood) {
          const aHi = this.aHi[prev] as number;
          const aSeen = this.aSeen[prev] as number;
          if (!this.staleness.placed(this.aLo[prev] as number, aHi, lo, hi) && why === null)
            why = `${this.staleness.describe(aHi, aSeen)}, then went on`;
          this.staleness.widen(aSeen - aHi);
        }
        this.standing = false;
        if (!first && why === null)
          this.staleness.step(this.aLo[prev] as number, this.aHi[prev] as number, lo, hi);
        if (why !== null) {
          // Not the card's energy: a fault from this read on, and a new run of the counter's
          // values (its cadence goes on: when it updates has not changed).
          this.copy.addFault(k, why);
          this.segment += 1;
          this.cadenceSeg = this.segment;
        }
        this.aValue.push(s.energyMj);
        this.aLo.push(first ? Number.NEGATIVE_INFINITY : this.lastT - this.lastRead / 2);
        this.aHi.push(s.t + s.readNs / 2);
        this.aSeg.push(this.segment);
        this.aK.push(k);
        this.aRead.push(s.readNs);
        this.aSeen.push(s.t - s.readNs / 2);
        this.lastEnergy = s.energyMj;
        const n = this.anchorBase + this.aValue.length - 1;
        if (first) {
          this.cadence = new CounterCadence();
          this.cadenceFirst = n + 1;
          this.cadenceSeg = this.segment;
          this.fresh.restart();
        } else this.fresh.read(true);
        if (!first)
          this.cadence.push(this.aLo[n - this.anchorBase] as number, this.aHi[n - this.anchorBase] as number);
        this.anchorAt[k % ring.capacity] = n;
        if (!first) {
          this.checkStep(n - 2);
          this.checkShape(n - 2);
        }
        this.trimAnchors();
      } else {
        const i = this.aValue.length - 1;
        this.anchorAt[k % ring.capacity] = this.anchorBase + i;
        this.fresh.read(false);
        this.aSeen[i] = s.t - s.readNs / 2;
        // Standing still for longer than the counter has gone between updates: judged where it
        // goes on (a stall, or a new cadence).
        if (!this.standing)
          this.standing = this.staleness.standsLong(this.aHi[i] as number, this.aSeen[i] as number);
      }
      this.lastT = s.t;
      this.lastRead = s.readNs;
    }
    this.onDigest?.();
  }

  /**
   * SensorJudge.judge of the change `dvMj` first read now (in `s`), up to the power's newest
   * reading (`powerNs`).
   */
  private judgeStep(
    dvMj: number,
    s: Sample,
    k: number,
    powerNs: number,
    cadenceHolds: boolean,
  ): string | null {
    const prev = this.aValue.length - 1;
    if (prev < 0) return null;
    // A run's first update has no start (a.lo is -Infinity): its step can still be too small.
    const a = cadenceHolds
      ? this.judged(this.anchorBase + prev, this.stepA)
      : this.locked(this.anchorBase + prev, this.stepA);
    const b = this.stepB;
    const stale = cadenceHolds ? this.staleness.bound() : Number.POSITIVE_INFINITY;
    b.lo = Math.max(this.lastT - this.lastRead / 2, s.t - s.readNs / 2 - stale);
    b.hi = powerNs;
    // Reads further apart than the dither allows came late (a starved sampler thread).
    const late = this.copy.maxGap(this.aK[prev] as number, k) > LATE_READ_GAP * this.ring.periodNs();
    return b.hi > b.lo ? this.judge.judge(dvMj, a, b, late) : null;
  }

  /**
   * Every sample as an edge needs it, up to the newest (./sample-copy.ts: its reads, gaps and the
   * faults found here): no walk of the ring itself.
   */
  samples(): SampleCopy {
    this.update();
    return this.copy;
  }

  /** The sensor model the counter supports now, or COUNTER_ONLY. */
  basis(): Basis {
    if (!this.usePower) return COUNTER_ONLY;
    return this.judge.basis() ?? COUNTER_ONLY;
  }

  /**
   * The reading of the sensor that bounds energy inside the closed step (from, to): the judge's
   * (SensorJudge.bounding), or, where the power read the same from a refresh before the step to
   * one after it, the judge's basis whatever it is (nothing in between was shaped by a lag); the
   * counter alone where neither. Inside the bound, what the readings leave unexplained of the
   * step (a burst a part-time sensor never saw, A100/H100: 75 % of the time) is taken care of by
   * bound()'s hull.
   */
  private boundingBasis(from: number, to: number): Basis {
    const basis = this.basis();
    if (basis === COUNTER_ONLY) return COUNTER_ONLY;
    const model = this.judge.bounding();
    if (model !== null) return model;
    const hold = Number.isFinite(this.power.refreshUpperNs) ? this.power.refreshUpperNs : MAX_HOLD_NS;
    const reach = Math.min(hold, MAX_HOLD_NS) + LAG_NS;
    return this.power.flat(from - reach, to + reach) ? basis : COUNTER_ONLY;
  }

  /** For diagnosis (the GPU check): what the samples have shown of the counter and the sensor. */
  report(): FusionReport {
    this.update();
    const basis = this.basis();
    return fusionReport({
      basis,
      gain: basis === COUNTER_ONLY ? null : this.judge.evidence(basis),
      counter: this.cadence.report(),
      changeEveryRead: Number.isFinite(this.fresh.delta()),
      updateAtMostNs: this.staleness.bound(),
      stepSpanNs: this.staleness.spans(),
      bounding: this.usePower ? (this.judge.bounding() ?? COUNTER_ONLY) : COUNTER_ONLY,
      shapeLagNs: this.shape.lagNs(),
      power: this.power,
      steps: this.judge.steps,
      persistentMismatch: this.judge.persistentMismatch,
    });
  }

  /**
   * The cumulative energy at `t`, given `kA`, the last sample at or before it, into `out`. False
   * while the samples present cannot bound it yet (see FusedOutcome).
   */
  at(t: number, kA: number, out: FusedTarget): FusedOutcome {
    this.update();
    const n = this.anchorAt[kA % this.ring.capacity] ?? -1;
    if (n < 0 || n < this.anchorBase) return "no energy counter reading before the edge";
    // Every edge is bounded inside a step the counter has closed: the readings only where the
    // step's total checks them (a burst they missed, before or after the edge, shows as a step
    // that disagrees with them, not as a tight bar around the wrong figure), and the counter alone
    // needs the update after the edge anyway.
    const step = this.stepAround(t, n);
    if (step === null) {
      const last = this.anchorBase + this.aValue.length - 1;
      if (n < last && this.seg(n + 1) !== this.seg(n)) {
        return `${this.faultAfter(n)}: the energy counter's energy at the edge cannot be bounded`;
      }
      return false;
    }
    let basis = this.boundingBasis(step.from, step.to);
    const r = this.edgeBound;
    this.bound(t, basis, r);
    if (r.lo > r.hi && basis !== COUNTER_ONLY) {
      // The readings contradict the counter around this edge: bound it by the counter alone.
      basis = COUNTER_ONLY;
      this.bound(t, basis, r);
    }
    if (!Number.isFinite(r.lo) || !Number.isFinite(r.hi)) {
      // The counter's run ended after anchor n (a fault): no later change will bound this edge.
      const last = this.anchorBase + this.aValue.length - 1;
      if (n < last && this.seg(n + 1) !== this.seg(n)) {
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
   * What the updates around t say of E(t) (the closed step this.step), and a point estimate. The counter alone: E(t)
   * lies between the value of each update before t and of each after it (the intersection). The
   * readings, where they may bound the closed step around t (its last update wholly before t and
   * first wholly after, this.step): from the update before, E(t) is its value plus the readings'
   * energy since; from the update after, its value less the readings' energy until it. Where the
   * readings missed energy (a burst between reads) or counted some not drawn, the two differ by
   * it, and which side of t it lay on nothing says: E(t) lies in the hull of the two, not their
   * intersection (a held sensor's lag splits it across t too, but such readings never bound).
   * The estimate: the readings' energy from the update before, plus what the step's total says
   * they missed, placed where the readings are unsure (the counter fixes the total, power the
   * shape).
   */
  private bound(t: number, basis: Basis, r: EdgeBound): void {
    let lo = Number.NEGATIVE_INFINITY;
    let hi = Number.POSITIVE_INFINITY;
    const w = this.wScratch;
    const one = this.anchorScratch;
    this.basisNow = COUNTER_ONLY;
    const step = this.step;
    // The counter alone: every update from the last wholly before t to the first wholly after it
    // (those between straddle t, each bounding E(t) by its value on the side its instant may be).
    for (let j = step.left; j <= step.right; j++) {
      this.locked(j, w);
      anchorBound(this.valueOf(j), w, t, this.energyOf, 0, Number.POSITIVE_INFINITY, one);
      if (one.lo > lo) lo = one.lo;
      if (one.hi < hi) hi = one.hi;
    }
    r.estimate = Number.NaN;
    if (basis === COUNTER_ONLY) {
      r.lo = lo;
      r.hi = hi;
      return;
    }
    const gain = this.judge.evidence(basis);
    const gLo = gain.gainLo;
    const gHi = gain.gainHi;
    const e = this.bounds;
    this.basisNow = basis;
    // From the update before t: its value plus the readings' energy since (at least from its
    // window's end, at most from its start).
    const vL = this.valueOf(step.left);
    w.lo = step.from;
    w.hi = step.leftHi;
    this.sensorEnergy(w.hi, t, basis);
    const aLo = e.lo;
    const aHi = e.hi;
    this.windowEnergy(step.left, w, basis);
    const leftE = (aLo + aHi) / 2 + (e.lo + e.hi) / 4;
    // How unsure that is: the readings' range since the update, and the update's own window.
    const leftW = aHi - aLo + e.hi;
    anchorBefore(vL, aLo, aHi + e.hi, gLo, gHi, one);
    let hullLo = one.lo;
    let hullHi = one.hi;
    // From the update after t: its value less the readings' energy until it.
    const vR = this.valueOf(step.right);
    w.lo = step.rightLo;
    w.hi = step.to;
    this.sensorEnergy(t, w.lo, basis);
    const bLo = e.lo;
    const bHi = e.hi;
    this.windowEnergy(step.right, w, basis);
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
    if (!this.shape.covers(uR)) {
      this.shapeWaits = true;
      return Number.NaN;
    }
    const left = step.left;
    const right = step.right;
    const vL = this.aValue[left - this.anchorBase] as number;
    const dv = (this.aValue[right - this.anchorBase] as number) - vL;
    // The step's start known far less well than its end (a run's first update, placed only to an
    // update interval): the estimate hangs from its end, the readings' energy back to the edge.
    if (step.leftHi - step.from > 4 * (step.to - step.rightLo)) {
      const back = this.shape.energy(t, uR);
      if (Number.isFinite(back)) return vL + dv - this.shape.gain() * back;
    }
    // Power is mostly steps (idle, prefill, decode): where the readings change little inside the
    // step and its energy lies between the levels read at its two ends, it is taken as one change
    // between them, at the instant that gives the counter's energy; else shared out as the
    // readings' shape over the step.
    const g = this.shape.gain();
    const p1 = g * this.shape.levelAt(uL);
    const p2 = g * this.shape.levelAt(uR - 1);
    const span = uR - uL;
    if (Math.abs(p1 - p2) > 0.05 * Math.max(p1, p2) && this.shape.changesBetween(uL, uR) <= 2) {
      const tau = (dv * 1e9 - p2 * uR + p1 * uL) / (p1 - p2);
      if (tau > uL && tau < uR) return vL + (p1 * (Math.min(t, tau) - uL) + p2 * Math.max(0, t - tau)) / 1e9;
    }
    const before = this.shape.energy(uL, t);
    const after = this.shape.energy(t, uR);
    if (!(before + after > 0) || !Number.isFinite(before + after)) return vL + (dv * (t - uL)) / span;
    return vL + (dv * before) / (before + after);
  }

  /**
   * What the readings leave unexplained of each step from anchor `a` to anchor `b`, summed into
   * `out` (see unexplained): each step's missed energy may lie anywhere inside it.
   */
  private missedOver(a: number, b: number, basis: Basis, gLo: number, gHi: number, out: Bound): void {
    const e = this.bounds;
    const wa = this.stepA;
    const wb = this.stepB;
    out.lo = 0;
    out.hi = 0;
    this.locked(a, wa);
    for (let j = a; j < b; j++) {
      this.locked(j + 1, wb);
      const dv = this.valueOf(j + 1) - this.valueOf(j);
      this.sensorEnergy(wa.hi, wb.lo, basis as SensorModel);
      const innerLo = e.lo;
      this.sensorEnergy(wa.lo, wb.hi, basis as SensorModel);
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
    const seg = this.seg(n);
    const last = this.anchorBase + this.aValue.length - 1;
    const w = this.wOther;
    const step = this.step;
    step.left = -1;
    // Updates whose reads straddle t (reads asked at an edge come a fraction of a period apart)
    // are passed over, up to the first wholly after it; and from a few before n (a sample written
    // just before the edge read the ring's head may already be stamped after it).
    for (let j = n - 4; j <= Math.min(n + 8, last); j++) {
      if (j < this.anchorBase || this.seg(j) !== seg) continue;
      this.locked(j, w);
      if (w.hi <= t) {
        step.left = j;
        step.leftHi = w.hi;
        step.from = w.lo;
        // A run's first update came at most one update interval before the next one (./staleness.ts):
        // −∞ while the interval is not bounded yet.
        if (!Number.isFinite(w.lo) && j < last)
          step.from = Math.min(w.hi, this.locked(j + 1, w).lo - this.staleness.bound());
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
    const k = this.aK[n + 1 - this.anchorBase] as number;
    const s = this.s;
    const found = this.copy.faultsBetween(this.aK[n - this.anchorBase] as number, k);
    if (found.length > 0) return `after the edge ${found.join("; ")}`;
    for (let j = (this.aK[n - this.anchorBase] as number) + 1; j <= k; j++) {
      if (!this.ring.read(j, s)) continue;
      if (s.flags & FLAG.COUNTER_BACKWARDS)
        return "after the edge the energy counter went backwards (driver reload?)";
      if (s.flags & FLAG.COUNTER_JUMP)
        return "after the edge the energy counter jumped faster than any card draws (driver reload?)";
      if (s.flags & FLAG.READ_FAILED) return "after the edge a read failed";
    }
    return "the energy counter's next change after the edge was a fault";
  }

  private valueOf(n: number): number {
    return this.aValue[n - this.anchorBase] as number;
  }

  /**
   * Bounds on the energy between two instants from the power readings alone (mJ), where the
   * counter has closed the steps over them and their readings may bound (readingsBound), widened
   * by what the readings leave unexplained of each of those steps; null otherwise. `kA` is the last sample at or before `x`. For spans
   * shorter than a step, this beats the difference of two edges.
   */
  between(x: number, y: number, kA: number): { lo: number; hi: number } | null {
    this.update();
    const n = this.anchorAt[kA % this.ring.capacity] ?? -1;
    if (n < 0 || n < this.anchorBase) return null;
    const step = this.stepAround(x, n);
    if (step === null) return null;
    const first = step.left;
    const from = step.from;
    // The first update wholly after y, in the same run of the counter.
    const last = this.anchorBase + this.aValue.length - 1;
    const w = this.wOther;
    let end = -1;
    for (let j = step.right; j <= last && this.seg(j) === this.seg(first); j++) {
      if (this.locked(j, w).lo >= y) {
        end = j;
        break;
      }
    }
    if (end < 0) return null;
    const basis = this.boundingBasis(from, w.hi);
    if (basis === COUNTER_ONLY) return null;
    const e = this.judge.evidence(basis as SensorModel);
    const missed = this.missedScratch;
    this.missedOver(first, end, basis, e.gainLo, e.gainHi, missed);
    this.sensorEnergy(x, y, basis as SensorModel);
    return { lo: e.gainLo * this.bounds.lo - missed.lo, hi: e.gainHi * this.bounds.hi + missed.hi };
  }

  /** One end of the sensor's energy over (x, y) under `basis` (COUNTER_ONLY: 0 to +∞). */
  private energy(x: number, y: number, basis: Basis, end: "lo" | "hi"): number {
    if (!(y > x)) return 0;
    if (!Number.isFinite(x) || !Number.isFinite(y)) return end === "lo" ? 0 : Number.POSITIVE_INFINITY;
    if (basis === COUNTER_ONLY) return end === "lo" ? 0 : Number.POSITIVE_INFINITY;
    this.sensorEnergy(x, y, basis);
    return end === "lo" ? this.bounds.lo : this.bounds.hi;
  }

  /** The sensor's energy over anchor j's update window `w` into this.bounds (kept per anchor). */
  private windowEnergy(j: number, w: Bound, basis: SensorModel): void {
    this.memo.anchorWindow(j, w.lo, w.hi, basis, this.bounds);
  }

  /** energyBounds over (x, y) into this.bounds (memoized, ./sensor-energy.ts). */
  private sensorEnergy(x: number, y: number, model: SensorModel): void {
    this.memo.energy(x, y, model, this.bounds);
  }

  private seg(n: number): number {
    return this.aSeg[n - this.anchorBase] as number;
  }

  /**
   * Anchor n's update instant: narrowed by the counter's cadence where it is known, or to just
   * before its read where the counter has shown it updates at every read; its read interval
   * otherwise.
   */
  private locked(n: number, out: Bound): Bound {
    const i = n - this.cadenceFirst;
    const ownLo = this.aLo[n - this.anchorBase] as number;
    const ownHi = this.aHi[n - this.anchorBase] as number;
    if (this.seg(n) === this.cadenceSeg && i >= 0 && i < this.cadence.length) {
      this.cadence.instantInto(i, out);
      // The update lies between the reads around it, whatever a lattice says: a lock that
      // disagrees with them is not used.
      const lo = Math.max(out.lo, ownLo);
      const hi = Math.min(out.hi, ownHi);
      if (lo <= hi && hi - lo < ownHi - ownLo) {
        out.lo = lo;
        out.hi = hi;
        return out;
      }
      const delta = this.fresh.delta();
      if (Number.isFinite(delta)) return freshInstant(this.readWindow(n, this.windowA), delta, out);
    }
    out.lo = ownLo;
    out.hi = ownHi;
    return out;
  }

  /**
   * Anchor n's update instant as a step is judged by: locked(), and no staler than one update
   * interval before the last read that showed its value (./staleness.ts). Sound for a counter that
   * keeps its cadence; a stall that breaks it can only make the step look faulty. Neither the
   * edges' bounds nor the evidence (checkStep) assume it.
   */
  private judged(n: number, out: Bound): Bound {
    this.locked(n, out);
    const since = (this.aSeen[n - this.anchorBase] as number) - this.staleness.bound();
    out.lo = Math.min(out.hi, Math.max(out.lo, since));
    return out;
  }

  /** Anchor n's read window (for ./fresh.ts), into `out`. */
  private readWindow(n: number, out: { lo: number; hi: number; readNs: number }): ReadWindow {
    const i = n - this.anchorBase;
    out.lo = this.aLo[i] as number;
    out.hi = this.aHi[i] as number;
    out.readNs = this.aRead[i] as number;
    return out;
  }

  /**
   * Checks the step from anchor n to n + 1 against each sensor model: the counter's difference
   * must lie between the least energy the readings allow inside the step and the most they allow
   * over it, times one gain common to the recent steps.
   */
  private checkStep(n: number): void {
    if (!this.usePower || n < this.anchorBase || this.seg(n) !== this.seg(n + 1)) return;
    const a = this.locked(n, this.stepA);
    const b = this.locked(n + 1, this.stepB);
    if (!Number.isFinite(a.lo)) return;
    const dv =
      (this.aValue[n + 1 - this.anchorBase] as number) - (this.aValue[n - this.anchorBase] as number);
    this.judge.check(dv, a, b);
    // The hypotheses that the counter is at most δ behind each read: only between two reads in a
    // row that both changed it.
    if ((this.aK[n + 1 - this.anchorBase] as number) === (this.aK[n - this.anchorBase] as number) + 1) {
      this.fresh.check(dv, this.readWindow(n, this.windowA), this.readWindow(n + 1, this.windowB));
    }
  }

  /** Scores the shape's lags on the step from anchor n to n + 1 (./shape.ts). */
  private checkShape(n: number): void {
    if (n < this.anchorBase || this.seg(n) !== this.seg(n + 1)) return;
    const a = this.locked(n, this.stepA);
    if (!Number.isFinite(a.lo)) return;
    const b = this.locked(n + 1, this.stepB);
    const dv =
      (this.aValue[n + 1 - this.anchorBase] as number) - (this.aValue[n - this.anchorBase] as number);
    this.shape.check(dv, (a.lo + a.hi) / 2, (b.lo + b.hi) / 2);
  }

  private trimAnchors(): void {
    if (this.aValue.length < 4096) return;
    const drop = 2048;
    this.aValue = this.aValue.slice(drop);
    this.aLo = this.aLo.slice(drop);
    this.aHi = this.aHi.slice(drop);
    this.aSeg = this.aSeg.slice(drop);
    this.aK = this.aK.slice(drop);
    this.aRead = this.aRead.slice(drop);
    this.aSeen = this.aSeen.slice(drop);
    this.anchorBase += drop;
    const gone = Math.min(this.cadence.length, Math.max(0, this.anchorBase - this.cadenceFirst));
    if (gone > 0) {
      this.cadence.drop(gone);
      this.cadenceFirst += gone;
    }
  }
}
