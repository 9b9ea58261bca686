/**
 * What the power readings of a ring say about the power between them, under one of three readings
 * of the sensor (SensorModel): for judging the counter's steps (SensorJudge: a stall, a jump, the
 * gain) and, for a fresh sensor only, bounding energy inside them (./closed-step.ts).
 *
 * - CONTINUOUS: each reading is the power at its read; between two reads the power lies between
 *   the two readings (what comes and goes between reads, ./closed-step.ts's hull answers for).
 * - HOLD: the sensor holds its value between refreshes (real cards: 10–100 ms); a reading is the
 *   power at some instant after the last read that showed a different value (no further back than
 *   the refresh, where bounded); between two such instants the power lies between their values.
 * - HOLD_AVERAGED: as HOLD, each value an average over up to LAG_NS before its instant (A100/H100
 *   average 25 ms of every 100 ms). Which reading holds is decided by the energy counter
 *   (./fusion.ts). Times are ns relative to the ring's epoch, power mW, energy mJ.
 */

import { ReadRuns } from "./read-runs.js";
import {
  CALIBRATION_LIMITS,
  discontinuity,
  GAIN_LIMITS,
  glitch,
  LATE_READ_LIMITS,
  SETTLED_STEPS,
} from "./step-judge.js";
import { stepGain } from "./uncertainty.js";

export const CONTINUOUS = 0;
export const HOLD = 1;
export const HOLD_AVERAGED = 2;
export type SensorModel = typeof CONTINUOUS | typeof HOLD | typeof HOLD_AVERAGED;
/** How an edge was bounded (./fusion.ts): a sensor model, or the counter alone. */
export const COUNTER_ONLY = 3;
export type Basis = SensorModel | typeof COUNTER_ONLY;
export const SENSOR_MODELS: readonly SensorModel[] = [CONTINUOUS, HOLD, HOLD_AVERAGED];

/** How far back an averaged reading can reach under HOLD_AVERAGED (ns). */
export const LAG_NS = 50e6;

/**
 * The power readings of a ring, one per sample index k, and their runs (consecutive identical
 * readings). Stored in arrays of the ring's capacity; index k is valid while k ≥ head − capacity.
 */
export class PowerReadings {
  readonly capacity: number;
  /** Stamp of each reading (ns), its read's duration (ns), its value (mW; NaN: none). */
  readonly at: Float64Array;
  readonly readNs: Float64Array;
  readonly mw: Float64Array;
  /** The run each reading belongs to (a counter over the ring's life). */
  readonly run: Float64Array;
  /** Runs: first sample index and value, by run number − runBase. */
  private runStart: number[] = [];
  private runValue: number[] = [];
  private runBase = 0;
  /** Samples written so far. */
  head = 0;
  /** The runs of one value ended by a change: whether the sensor holds its readings. */
  readonly runs = new ReadRuns();
  /**
   * An upper bound on the sensor's refresh interval (ns; +∞ until known): the shortest span from
   * the read before one change to the read that showed the next change holds two refreshes.
   */
  refreshUpperNs = Number.POSITIVE_INFINITY;
  /** The shortest run of identical readings between two changes (ns), for diagnosis. */
  shortestRunNs = Number.POSITIVE_INFINITY;
  /** Readings that differed from the one before, for diagnosis. */
  changes = 0;
  /** The readings' resolution (mW; set by the ring's owner): 1 for NVML, 1000 for AMD's whole W. */
  quantumMw = 1;

  constructor(capacity: number) {
    this.capacity = capacity;
    this.at = new Float64Array(capacity);
    this.readNs = new Float64Array(capacity);
    this.mw = new Float64Array(capacity);
    this.run = new Float64Array(capacity);
  }

  /** Appends reading k (= head). */
  push(at: number, readNs: number, mw: number): void {
    const k = this.head;
    const slot = k % this.capacity;
    const prev = k > 0 ? this.mw[(k - 1) % this.capacity] : Number.NaN;
    this.at[slot] = at;
    this.readNs[slot] = readNs;
    this.mw[slot] = mw;
    const same = k > 0 && mw === prev; // NaN never equals: a failed read is a run of its own
    if (same) this.run[slot] = this.run[(k - 1) % this.capacity] as number;
    else {
      this.changes += 1;
      const n = this.runBase + this.runStart.length;
      if (this.runStart.length > 0 && k > 0 && Number.isFinite(mw) && Number.isFinite(prev)) {
        const last = this.runStart.length - 1;
        const start = this.runStart[last] as number;
        // The previous run began with a change too (not the first reading): two changes.
        if (last > 0 && start > 0 && start - 1 >= this.head - this.capacity + 1) {
          const bracket = at - this.atOf(start - 1);
          if (bracket < this.refreshUpperNs) this.refreshUpperNs = bracket;
          const run = at - this.atOf(start);
          if (run < this.shortestRunNs) this.shortestRunNs = run;
          this.runs.record(k - start, run);
        }
      }
      this.runStart.push(k);
      this.runValue.push(mw);
      this.run[slot] = n;
      if (this.runStart.length > 2 * this.capacity) {
        const drop = this.runStart.length - this.capacity;
        this.runStart = this.runStart.slice(drop);
        this.runValue = this.runValue.slice(drop);
        this.runBase += drop;
      }
    }
    this.head = k + 1;
  }

  /** Whether the sensor refreshes at every read, as far as its runs show (./read-runs.ts). */
  fresh(): boolean {
    return this.runs.fresh(this.quantumMw);
  }

  /** Stamp of reading k (ns). */
  atOf(k: number): number {
    return this.at[k % this.capacity] as number;
  }

  mwOf(k: number): number {
    return this.mw[k % this.capacity] as number;
  }

  private runOf(k: number): number {
    return this.run[k % this.capacity] as number;
  }

  /**
   * The last reading held whose stamp is at or before `t`, or −1: galloping back from the newest
   * (most instants asked about are recent), then bisecting, by offset from the oldest reading held
   * (its slot found once: indices arrive as doubles, and `%` on doubles is a C library call).
   */
  indexAtOrBefore(t: number): number {
    const cap = this.capacity;
    const oldest = Math.max(0, this.head - cap);
    const base = oldest % cap;
    const at = this.at;
    let b = this.head - 1 - oldest;
    if (b < 0 || (at[base] as number) > t) return -1;
    let a = b;
    let step = 1;
    while (a > 0 && (at[base + a < cap ? base + a : base + a - cap] as number) > t) {
      b = a - 1;
      a = Math.max(0, a - step);
      step *= 2;
    }
    while (b > a) {
      const mid = (a + b + 1) >> 1;
      if ((at[base + mid < cap ? base + mid : base + mid - cap] as number) <= t) a = mid;
      else b = mid - 1;
    }
    return oldest + a;
  }

  /** Whether reading k is still held. */
  held(k: number): boolean {
    return k >= 0 && k < this.head && k >= this.head - this.capacity;
  }

  /**
   * Least and most power over (at(i), at(i + 1)) under `model`, mW, widened by the readings' own
   * quantum; [0, +∞] where the readings cannot say (a failed read, or a held value whose end has
   * not been seen yet).
   */
  range(i: number, model: SensorModel, out: { min: number; max: number }): void {
    out.min = 0;
    out.max = Number.POSITIVE_INFINITY;
    if (!this.held(i) || !this.held(i + 1)) return;
    const a = this.mwOf(i);
    const b = this.mwOf(i + 1);
    if (!Number.isFinite(a) || !Number.isFinite(b)) return;
    if (model === CONTINUOUS) {
      out.min = Math.max(0, Math.min(a, b) - this.quantumMw);
      out.max = Math.max(a, b) + this.quantumMw;
      return;
    }
    // The first reading whose instant is surely after at(i + 1): every run between holds values
    // the power took in between.
    const end = this.atOf(i + 1) + (model === HOLD_AVERAGED ? LAG_NS : 0);
    let lo = Math.min(a, b);
    let hi = Math.max(a, b);
    let r = this.runOf(i + 1);
    for (;;) {
      const idx = r - this.runBase;
      const start = this.runStart[idx];
      if (start === undefined) return; // not seen yet: unknown
      const v = this.runValue[idx] as number;
      if (!Number.isFinite(v)) return;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
      // Readings of this run are instants after the read before it (when that read is after
      // i + 1), and no earlier than the refresh bound before their own read.
      if (start >= i + 2 && this.held(start - 1) && this.atOf(start - 1) >= end) break;
      if (Number.isFinite(this.refreshUpperNs)) {
        const need = end + this.refreshUpperNs;
        const next = this.runStart[idx + 1] ?? this.head;
        const lastInRun = next - 1;
        if (this.held(lastInRun) && this.atOf(lastInRun) >= need) break;
      }
      r += 1;
    }
    out.min = Math.max(0, lo - this.quantumMw);
    out.max = hi + this.quantumMw;
  }
}

/** Scratch for PowerReadings.range. */
const span = { min: 0, max: 0 };

/**
 * Bounds on the sensor's energy over (x, y), x ≤ y, under `model` (mJ, before any gain): the least
 * and most power of each interval between readings times its share of (x, y), widened by the
 * uncertainty of the readings' instants (half their read). Parts of (x, y) outside the readings
 * held are unknown: 0 below, +∞ above.
 */
export function energyBounds(
  p: PowerReadings,
  x: number,
  y: number,
  model: SensorModel,
  out: { lo: number; hi: number },
): void {
  out.lo = 0;
  out.hi = 0;
  if (!(y > x)) return;
  const first = Math.max(0, p.head - p.capacity);
  const last = p.head - 1;
  if (last < first || p.atOf(first) > x || p.atOf(last) < y) out.hi = Number.POSITIVE_INFINITY;
  // From the reading at or before x (the first held, where none is).
  for (let i = Math.max(first, p.indexAtOrBefore(x)); i < last; i++) {
    const t0 = p.atOf(i);
    const t1 = p.atOf(i + 1);
    if (t0 >= y) break;
    addIntervalBound(p, i, Math.max(t0, x), Math.min(t1, y), model, out);
  }
}

/**
 * Adds to `out` the bounds of interval k (between readings k and k + 1) over (from, to) inside it
 * (nothing when empty): its least and most power times the piece's length, widened by the
 * uncertainty of the readings' instants — energyBounds' term for that interval.
 */
export function addIntervalBound(
  p: PowerReadings,
  k: number,
  from: number,
  to: number,
  model: SensorModel,
  out: { lo: number; hi: number },
): void {
  if (!(to > from)) return;
  p.range(k, model, span);
  const len = (to - from) / 1e9;
  const slack =
    ((span.max - span.min) *
      ((p.readNs[k % p.capacity] as number) + (p.readNs[(k + 1) % p.capacity] as number))) /
    4e9;
  out.lo += Math.max(0, span.min * len - slack);
  out.hi += span.max * len + slack;
}

/** Closed counter steps remembered as evidence. */
const EVIDENCE = 64;

/**
 * What the counter's closed steps say of a reading of the sensor: each step allows the gains in
 * [lo, hi] (true power = gain × sensor); the reading holds while one gain suits the last EVIDENCE
 * steps, and that gain is known to within their intersection. Past one step, the one step that
 * narrows each side most is left out: one fault the judge could not tell (a jump the readings
 * allow at the widest gain, early in a run) then costs a wider bar, not a wrong gain for the run.
 */
export class GainEvidence {
  readonly lo = new Float64Array(EVIDENCE);
  readonly hi = new Float64Array(EVIDENCE);
  readonly informative = new Uint8Array(EVIDENCE);
  count = 0;
  gainLo = 0;
  gainHi = 0;
  /** Steps among the last EVIDENCE on which this reading made a difference. */
  informativeCount = 0;
  /** No one gain has suited the steps at some point. */
  private contradicted = false;

  push(lo: number, hi: number, informative: boolean): void {
    const n = this.count;
    const slot = n % EVIDENCE;
    if (n >= EVIDENCE) this.informativeCount -= this.informative[slot] as number;
    this.lo[slot] = lo;
    this.hi[slot] = hi;
    this.informative[slot] = informative ? 1 : 0;
    this.informativeCount += informative ? 1 : 0;
    this.count = n + 1;
    // The largest two lo and the smallest two hi of the steps held (a pass over at most EVIDENCE).
    let lo1 = Number.NEGATIVE_INFINITY;
    let lo2 = Number.NEGATIVE_INFINITY;
    let hi1 = Number.POSITIVE_INFINITY;
    let hi2 = Number.POSITIVE_INFINITY;
    const held = Math.min(this.count, EVIDENCE);
    for (let i = 0; i < held; i++) {
      const l = this.lo[i] as number;
      const h = this.hi[i] as number;
      if (l > lo1) {
        lo2 = lo1;
        lo1 = l;
      } else if (l > lo2) lo2 = l;
      if (h < hi1) {
        hi2 = hi1;
        hi1 = h;
      } else if (h < hi2) hi2 = h;
    }
    const trim = held >= 2;
    const gLo = Math.max(GAIN_LIMITS[0], trim ? lo2 : lo1);
    const gHi = Math.min(GAIN_LIMITS[1], trim ? hi2 : hi1);
    this.gainLo = gLo;
    this.gainHi = gHi;
    if (!(gLo <= gHi)) this.contradicted = true;
  }

  /**
   * One gain suits the last steps, and always has: a reading the counter has contradicted once is
   * not trusted again on this run of the sampler (a held sensor can look continuous for a while).
   */
  consistent(): boolean {
    if (this.count > 0 && !(this.gainLo <= this.gainHi)) this.contradicted = true;
    return this.count > 0 && !this.contradicted;
  }
}

/** Steps on which CONTINUOUS must be confirmed, once a held sensor is suspected. */
const CONFIRM = 8;
/** A step confirms CONTINUOUS when a held sensor would have been looser by this share of it. */
const INFORMATIVE_SHARE = 0.02;

/**
 * Which reading of the power sensor the energy counter supports: every closed counter step is
 * checked against each (the counter's difference must lie between the least energy the readings
 * allow inside the step and the most over it, for one gain common to the recent steps), and the
 * most trusting one not contradicted is chosen — CONTINUOUS only while nothing suggests a held
 * sensor (repeated readings ending in a change, or the counter contradicting it) or, once
 * something does, after it has been confirmed on CONFIRM steps where a held sensor would have been
 * looser.
 */
export class SensorJudge {
  private readonly power: PowerReadings;
  private readonly byModel = SENSOR_MODELS.map(() => new GainEvidence());
  private readonly bounds = { lo: 0, hi: 0 };
  /** Scratch for stepEnergy(): each model's least energy inside a step and most over it; a step's gains. */
  private readonly inner = new Float64Array(SENSOR_MODELS.length);
  private readonly outer = new Float64Array(SENSOR_MODELS.length);
  private readonly gain = { lo: 0, hi: 0 };
  /** Closed steps checked, and whether the counter contradicted a continuous sensor. */
  steps = 0;
  private contradicted = false;
  /** The step count at the last glitch (see judge). */
  private lastOutlier = Number.NEGATIVE_INFINITY;
  /** Glitches have recurred: the counter and the sensor disagree for good. */
  persistentMismatch = false;

  /**
   * `energy` bounds the sensor's energy over a span as energyBounds does (fusion.ts passes its
   * running sums, ./sensor-energy.ts, which give the same bounds without a walk).
   */
  constructor(
    power: PowerReadings,
    private readonly energy: (
      x: number,
      y: number,
      model: SensorModel,
      out: { lo: number; hi: number },
    ) => void = (x, y, model, out) => energyBounds(power, x, y, model, out),
  ) {
    this.power = power;
  }

  evidence(model: SensorModel): GainEvidence {
    return this.byModel[model] as GainEvidence;
  }

  /** The sensor model the counter supports now; null before any step, or when none holds. */
  basis(): SensorModel | null {
    if (this.steps === 0) return null;
    const [continuous, hold, averaged] = this.byModel as [GainEvidence, GainEvidence, GainEvidence];
    const suspect = !this.power.fresh() || this.contradicted;
    if (continuous.consistent() && (!suspect || continuous.informativeCount >= CONFIRM)) return CONTINUOUS;
    if (hold.consistent()) return HOLD;
    if (averaged.consistent()) return HOLD_AVERAGED;
    return null;
  }

  /**
   * Judges a step as it closes (the counter rose by `dvMj` between an update in `a` and the next
   * in `b`), under the reading of the sensor the counter has supported so far: why it is not the
   * card's energy — a discontinuity (no allowed gain explains it: a jump, a stall) or a glitch (a
   * gain the settled steps exclude, where its reads came in time to resolve the power; once: a
   * second within EVIDENCE steps is a mismatch for good, taken as evidence and said in the
   * diagnosis) — or null. A step so judged starts a new run and never becomes evidence.
   */
  judge(
    dvMj: number,
    a: { lo: number; hi: number },
    b: { lo: number; hi: number },
    readsLate = false,
  ): string | null {
    const limits = readsLate ? LATE_READ_LIMITS : CALIBRATION_LIMITS;
    const basis = this.basis();
    if (basis === null) return this.judgeUnsettled(dvMj, a, b, limits);
    this.stepEnergy(basis, a, b);
    const innerMj = this.inner[basis] as number;
    const outerMj = this.outer[basis] as number;
    const why = discontinuity(dvMj, innerMj, outerMj, a, b, limits);
    if (why !== null) return why;
    const e = this.byModel[basis] as GainEvidence;
    if (readsLate || this.persistentMismatch || e.count < SETTLED_STEPS || !e.consistent()) return null;
    const odd = glitch(dvMj, innerMj, outerMj, e.gainLo, e.gainHi, this.gain);
    if (odd === null) return null;
    if (this.steps - this.lastOutlier <= EVIDENCE) {
      this.persistentMismatch = true;
      return null;
    }
    this.lastOutlier = this.steps;
    return odd;
  }

  /**
   * Before the counter has settled on a reading of the sensor: a discontinuity when no reading
   * explains the step with an allowed gain (the step would otherwise become evidence for a gain
   * no sensor has, and contradict every reading for the rest of the run).
   */
  private judgeUnsettled(
    dvMj: number,
    a: { lo: number; hi: number },
    b: { lo: number; hi: number },
    limits: readonly [number, number],
  ): string | null {
    let why: string | null = null;
    for (const model of SENSOR_MODELS) {
      this.stepEnergy(model, a, b);
      const innerMj = this.inner[model] as number;
      const outerMj = this.outer[model] as number;
      if (!Number.isFinite(outerMj)) return null;
      const said = discontinuity(dvMj, innerMj, outerMj, a, b, limits);
      if (said === null) return null;
      why ??= said;
    }
    return why;
  }

  /**
   * The least energy `model` allows inside a step from an update in `a` to the next in `b`, and the
   * most over it, into this.inner[model] and this.outer[model].
   */
  private stepEnergy(model: SensorModel, a: { lo: number; hi: number }, b: { lo: number; hi: number }): void {
    this.energy(a.hi, b.lo, model, this.bounds);
    this.inner[model] = this.bounds.lo;
    this.energy(a.lo, b.hi, model, this.bounds);
    this.outer[model] = this.bounds.hi;
  }

  /**
   * Checks one closed step: the counter rose by `dvMj` between an update in `a` and the next in
   * `b` (instants, ns).
   */
  check(dvMj: number, a: { lo: number; hi: number }, b: { lo: number; hi: number }): void {
    const inner = this.inner;
    const outer = this.outer;
    for (const model of SENSOR_MODELS) this.stepEnergy(model, a, b);
    const looser = (outer[HOLD_AVERAGED] as number) - (inner[HOLD_AVERAGED] as number);
    const continuousWidth = (outer[CONTINUOUS] as number) - (inner[CONTINUOUS] as number);
    let counted = false;
    for (const model of SENSOR_MODELS) {
      const innerMj = inner[model] as number;
      const outerMj = outer[model] as number;
      if (!Number.isFinite(outerMj) || !(outerMj > 0)) continue;
      stepGain(dvMj, innerMj, outerMj, this.gain);
      // Evidence for a continuous sensor counts where a held one would have been looser.
      const informative =
        model !== CONTINUOUS ||
        !Number.isFinite(looser) ||
        looser - continuousWidth > INFORMATIVE_SHARE * dvMj;
      const e = this.byModel[model] as GainEvidence;
      e.push(this.gain.lo, this.gain.hi, informative);
      if (model === CONTINUOUS && !e.consistent()) this.contradicted = true;
      counted = true;
    }
    if (counted) this.steps += 1;
  }
}
