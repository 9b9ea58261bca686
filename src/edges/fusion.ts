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
import { boundingModel, ClosedSteps, type FusedOutcome, type FusedTarget } from "./closed-step.js";
import { FreshCounter, freshInstant, type ReadWindow } from "./fresh.js";
import { type FusionReport, fusionReport } from "./fusion-report.js";
import {
  type Basis,
  CONTINUOUS,
  COUNTER_ONLY,
  PowerReadings,
  SensorJudge,
  type SensorModel,
} from "./power-model.js";
import { SampleCopy } from "./sample-copy.js";
import { SensorEnergyMemo } from "./sensor-energy.js";
import { PowerShape } from "./shape.js";
import { CounterStaleness } from "./staleness.js";
import { CALIBRATION_LIMITS, discontinuity, LATE_READ_LIMITS } from "./step-judge.js";
import type { Bound } from "./uncertainty.js";

/** What a ring's power readings are. */
export type PowerKind = "instant" | "averaged";

export type { FusedOutcome, FusedTarget } from "./closed-step.js";
export type { FusionReport } from "./fusion-report.js";
export { type Basis, COUNTER_ONLY } from "./power-model.js";

/** Reads further apart than this many periods came late (dither and asked reads keep them under 2). */
const LATE_READ_GAP = 3;
/** judgeSpans() judges the rise over 2 to SPAN_STEPS + 1 steps back (one is judgeStep()'s). */
const SPAN_STEPS = 8;

export class CounterFusion {
  /** @internal (./closed-step.ts) */
  readonly ring: SampleRing;
  /** @internal (./closed-step.ts) */
  readonly power: PowerReadings;
  /** Whether the power readings are instant (not a 1 s average); read by ./closed-step.ts. */
  readonly usePower: boolean;
  /** @internal (./closed-step.ts) */
  readonly s: Sample = emptySample();
  /** The anchor in force at each sample (its global number), by k % capacity; −1: none; read by ./closed-step.ts. */
  readonly anchorAt: Float64Array;
  /** What edges need of each sample, copied as it is digested (./sample-copy.ts); read by ./closed-step.ts. */
  readonly copy: SampleCopy;
  // Anchors by global number − anchorBase: the counter's value, its raw window, its run (segment).
  /** @internal (./closed-step.ts) */
  aValue: number[] = [];
  /** @internal (./closed-step.ts) */
  aLo: number[] = [];
  private aHi: number[] = [];
  private aSeg: number[] = [];
  /** Each anchor's read index and the duration of its read (ns); read by ./closed-step.ts. */
  aK: number[] = [];
  private aRead: number[] = [];
  /** The start of the latest read that still showed each anchor's value (ns). */
  private aSeen: number[] = [];
  /** @internal (./closed-step.ts) */
  anchorBase = 0;
  /** How stale a read can be where no lattice is found, and whether the newest value stalled; read by ./closed-step.ts. */
  readonly staleness = new CounterStaleness();
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
  /** Which reading of the power sensor the counter supports (power-model.ts); read by ./closed-step.ts. */
  readonly judge: SensorJudge;
  /** @internal (./closed-step.ts) */
  readonly bounds = { lo: 0, hi: 0 };
  private readonly windowA = { lo: 0, hi: 0, readNs: 0 };
  private readonly windowB = { lo: 0, hi: 0, readNs: 0 };
  private readonly stepA: Bound = { lo: 0, hi: 0 };
  private readonly stepB: Bound = { lo: 0, hi: 0 };
  /** Edges bounded inside closed counter steps (./closed-step.ts). */
  private readonly closed = new ClosedSteps(this);
  /** Where inside a step the energy went, by the readings (./shape.ts): the estimate's, not the bar's; read by ./closed-step.ts. */
  readonly shape = new PowerShape();
  /** The sensor's energy between readings, memoized (./sensor-energy.ts). */
  private readonly memo: SensorEnergyMemo;

  /** After update() digested new samples (the track pushes its digest timer back). */
  private readonly onDigest: (() => void) | null;

  constructor(ring: SampleRing, kind: PowerKind, onDigest: (() => void) | null = null) {
    this.ring = ring;
    this.onDigest = onDigest;
    this.usePower = kind === "instant";
    this.power = new PowerReadings(ring.capacity);
    this.power.quantumMw = ring.powerQuantumMw?.() ?? 1;
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
        if (why === null && !first && this.usePower) why = this.judgeSpans(s.energyMj, k, pt);
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
        if (!first) this.checkStep(n - 2);
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
    const late = this.readLate(this.aK[prev] as number, k);
    return b.hi > b.lo ? this.judge.judge(dvMj, a, b, late) : null;
  }

  /**
   * The rise to `value`, first read now (read k), from each of the SPAN_STEPS anchors of this run
   * before the newest, judged on the reads alone (no cadence, no staleness bound) and only where the sensor is
   * continuous: a counter that skipped updates can make each step look possible and still not
   * count what the readings say was drawn over several.
   */
  private judgeSpans(value: number, k: number, powerNs: number): string | null {
    const last = this.aValue.length - 1;
    const b = this.stepB;
    b.lo = this.lastT - this.lastRead / 2;
    b.hi = powerNs;
    if (!(b.hi > b.lo) || !this.power.fresh() || this.judge.basis() !== CONTINUOUS) return null;
    const a = this.stepA;
    for (let i = last - 1; i >= Math.max(0, last - SPAN_STEPS); i--) {
      if ((this.aSeg[i] as number) !== this.segment) break;
      a.lo = this.aLo[i] as number;
      a.hi = this.aHi[i] as number;
      const late = this.readLate(this.aK[i] as number, k);
      // The least a continuous sensor's readings need inside (a.hi, b.lo); a jump is at one
      // update, where judgeStep() sees it whole.
      this.memo.energy(a.hi, b.lo, CONTINUOUS, this.bounds);
      const limits = late ? LATE_READ_LIMITS : CALIBRATION_LIMITS;
      const why = discontinuity(value - (this.aValue[i] as number), this.bounds.lo, Infinity, a, b, limits);
      if (why !== null) return why;
    }
    return null;
  }

  /** Whether reads kA to kB came further apart than the dither allows (a starved sampler thread). */
  private readLate(kA: number, kB: number): boolean {
    return this.copy.maxGap(kA, kB) > LATE_READ_GAP * this.ring.periodNs();
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

  /** For diagnosis (the GPU check): what the samples have shown of the counter and the sensor. */
  report(): FusionReport {
    this.update();
    const basis = this.basis();
    return fusionReport({
      basis,
      gain: basis === COUNTER_ONLY ? null : this.judge.evidence(basis),
      counter: this.cadence.report(),
      changeEveryRead: this.fresh.changesEveryRead(),
      updateAtMostNs: this.staleness.bound(),
      updateIntervalNs: this.staleness.intervals(),
      bounding: this.usePower ? (boundingModel(this.judge, this.power) ?? COUNTER_ONLY) : COUNTER_ONLY,
      shapeLagNs: this.shape.lagNs(),
      power: this.power,
      steps: this.judge.steps,
      persistentMismatch: this.judge.persistentMismatch,
    });
  }

  /** @internal (./closed-step.ts) */
  valueOf(n: number): number {
    return this.aValue[n - this.anchorBase] as number;
  }

  /** The sensor's energy over anchor j's update window `w` into this.bounds (kept per anchor); read by ./closed-step.ts. */
  windowEnergy(j: number, w: Bound, basis: SensorModel): void {
    this.memo.anchorWindow(j, w.lo, w.hi, basis, this.bounds);
  }

  /** energyBounds over (x, y) into this.bounds (memoized, ./sensor-energy.ts); read by ./closed-step.ts. */
  sensorEnergy(x: number, y: number, model: SensorModel): void {
    this.memo.energy(x, y, model, this.bounds);
  }

  /**
   * The cumulative energy at `t`, given `kA`, the last sample at or before it, into `out`. False
   * while the samples present cannot bound it yet (see FusedOutcome; ./closed-step.ts).
   */
  at(t: number, kA: number, out: FusedTarget): FusedOutcome {
    this.update();
    return this.closed.at(t, kA, out);
  }

  /**
   * A number that changes with every change of the counter or fault digested (the new samples
   * digested first): what edges waiting for the counter's next update wait for (../ring/waits.ts).
   */
  changes(): number {
    this.update();
    return (this.anchorBase + this.aValue.length) * 1024 + (this.segment % 1024);
  }

  /**
   * Whether an edge at `t` (kA the last sample at or before it) waits only for the counter's next
   * update: no update read wholly after it yet. As of the last at() (no new samples digested).
   */
  awaitsUpdate(t: number, kA: number): boolean {
    return this.closed.awaitsUpdate(t, kA);
  }

  /** Bounds on the energy between two instants from the power readings alone (./closed-step.ts). */
  between(x: number, y: number, kA: number): { lo: number; hi: number } | null {
    this.update();
    return this.closed.between(x, y, kA);
  }

  /** @internal (./closed-step.ts) */
  seg(n: number): number {
    return this.aSeg[n - this.anchorBase] as number;
  }

  /**
   * Anchor n's update instant: narrowed by the counter's cadence where it is known, or to just
   * before its read where the counter has shown it updates at every read; its read interval
   * otherwise.
   */
  /** @internal (./closed-step.ts) */
  locked(n: number, out: Bound): Bound {
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
   * Checks the closed step from anchor n to n + 1: against each sensor model (the counter's
   * difference must lie between the least energy the readings allow inside the step and the most
   * they allow over it, times one gain common to the recent steps), and against each lag of the
   * readings' shape (./shape.ts), which the estimate uses whatever the power is.
   */
  private checkStep(n: number): void {
    if (n < this.anchorBase || this.seg(n) !== this.seg(n + 1)) return;
    const a = this.locked(n, this.stepA);
    if (!Number.isFinite(a.lo)) return;
    const b = this.locked(n + 1, this.stepB);
    const dv = this.valueOf(n + 1) - this.valueOf(n);
    this.shape.check(dv, (a.lo + a.hi) / 2, (b.lo + b.hi) / 2);
    if (!this.usePower) return;
    // Reads that came late (a starved sampler thread) cannot resolve the power between them: such
    // a step is no evidence of the sensor's gain (nor a glitch, judgeStep()).
    const kA = this.aK[n - this.anchorBase] as number;
    const kB = this.aK[n + 1 - this.anchorBase] as number;
    if (this.readLate(kA, kB)) return;
    this.judge.check(dv, a, b);
    // The hypotheses that the counter is at most δ behind each read: only between two reads in a
    // row that both changed it.
    if (kB === kA + 1) {
      this.fresh.check(dv, this.readWindow(n, this.windowA), this.readWindow(n + 1, this.windowB));
    }
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
