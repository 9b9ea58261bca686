import { type BackendName, type Check, OK, type SpanMeasurement } from "../measurement.js";
import type { EdgeReading, LatestSample, RingInfo, TrackReadings } from "./readings.js";
import { FLAG, type RingSource, type Sample, type SampleRing } from "./ring.js";
import { PENDING, RESOLVED, RingEdge } from "./ring-edge.js";
import { RingWaits } from "./ring-waits.js";
import type { Edge, EdgeError, IntervalMeasurement, SharedLog, Track } from "./track.js";
import {
  averagingErrMj,
  COUNTER_READ_QUANTUM_MJ,
  counterEdgeErrMj,
  counterLagMj,
  counterStep,
  edgePower,
  msRounded,
  tooShortForCounter,
  trapezoidErrMj,
} from "./uncertainty.js";

/**
 * The window arithmetic shared by every sampling backend (the native thread's ring, the
 * nvidia-smi sampler's, a polled agent's): edges interpolated between the samples that bracket
 * them, spans as the difference of a cumulative quantity, quality and faults over the samples in
 * between, bounded by ./uncertainty.ts. Only the source of samples (./ring.ts) differs. How long a
 * window waits for the samples, and what a stalled sampler costs, is ./ring-waits.ts.
 */

const LINGER_MS = 5_000;

export class RingTrack implements Track, TrackReadings {
  readonly backend: BackendName;
  /** A ring's samples can be read one by one (giul-agent serves them): this track offers readings. */
  readonly readings: TrackReadings = this;
  private readonly source: RingSource;
  private ring: SampleRing | null = null;
  private openReason: string | null = null;
  private users = 0;
  private periodMs = Number.POSITIVE_INFINITY;
  private lingerTimer: NodeJS.Timeout | null = null;
  private readonly waits: RingWaits<RingEdge>;
  private readonly scratch: Sample = {
    t: 0,
    energyMj: 0,
    powerMw: 0,
    integralMj: 0,
    flags: 0,
    error: 0,
    faults: 0,
    readNs: 0,
  };
  private readonly scratch2: Sample = { ...this.scratch };

  private readonly clock: () => bigint;
  /** The event log of the running ring, with edges over that ring (see sharedLog). */
  private shared: (SharedLog & { readonly ring: SampleRing }) | null = null;
  /** Counts the rings opened, so that readings from two runs of the sampler are never subtracted. */
  private generation = 0;

  /** `clock` is CLOCK_MONOTONIC ns (process.hrtime.bigint); tests pass their own. */
  constructor(backend: BackendName, source: RingSource, clock: () => bigint = process.hrtime.bigint) {
    this.backend = backend;
    this.source = source;
    this.clock = clock;
    this.waits = new RingWaits<RingEdge>({
      ring: () => this.ring,
      notRunning: () => this.openReason ?? "the sampler is not running",
      pending: (e) => {
        if (e.state === PENDING) e.resolve(this.source, this.scratch);
        return e.state === PENDING;
      },
      fail: (e, reason) => e.fail(reason),
    });
  }

  retain(periodMs: number): void {
    this.users += 1;
    if (this.lingerTimer) {
      clearTimeout(this.lingerTimer);
      this.lingerTimer = null;
    }
    if (this.ring === null) {
      this.periodMs = periodMs;
      const opened = this.source.open(periodMs);
      if (!opened.ok) this.openReason = opened.reason;
      else {
        this.ring = opened.value;
        this.openReason = null;
        this.generation += 1;
      }
    } else if (periodMs < this.periodMs) {
      this.periodMs = periodMs;
      this.source.setPeriod(periodMs);
    }
  }

  release(): void {
    this.users -= 1;
    if (this.users > 0) return;
    this.users = 0;
    if (this.ring === null) {
      this.openReason = null;
      return;
    }
    // Keep the sampler a while: at thousands of requests a second windows follow each other.
    this.lingerTimer = setTimeout(() => this.shut(), LINGER_MS);
    this.lingerTimer.unref();
  }

  private shut(): void {
    this.lingerTimer = null;
    if (this.users > 0 || this.ring === null) return;
    this.ring = null;
    this.periodMs = Number.POSITIVE_INFINITY;
    this.source.close();
  }

  ready(withinMs?: number): Promise<Check> {
    return this.waits.ready(withinMs);
  }

  /** The longest a window waits now for the sample after an edge (ms; see ./ring-waits.ts). */
  waitBoundMs(): number {
    return this.waits.boundMs();
  }

  /**
   * The card's process-wide event log and edges at its logged instants, while a ring runs and its
   * source has a log (see Track.sharedLog).
   */
  sharedLog(): SharedLog | null {
    const ring = this.ring;
    if (ring === null || this.source.eventLog === undefined) return null;
    if (this.shared === null || this.shared.ring !== ring) {
      const log = this.source.eventLog();
      if (log === null) return null;
      this.shared = {
        ring,
        log,
        // Not resolved here: a logged instant is recent, its sample after rarely exists yet, and
        // settle() resolves it when it does.
        edgeAt: (t: number, ringHead: number): Edge =>
          new RingEdge(ring.epochNs + BigInt(Math.round(t)), ring, ringHead),
      };
    }
    return this.shared;
  }

  edge(): Edge {
    const tNs = this.clock();
    const ring = this.ring;
    if (ring === null) return { tNs };
    const e = new RingEdge(tNs, ring);
    e.resolve(this.source, this.scratch);
    return e;
  }

  settle(edges: readonly Edge[]): Promise<void> {
    let pending: RingEdge[] | null = null;
    for (const edge of edges) {
      if (!(edge instanceof RingEdge) || edge.state !== PENDING) continue;
      edge.resolve(this.source, this.scratch);
      if (edge.state === PENDING) {
        if (pending === null) pending = [];
        pending.push(edge);
      }
    }
    if (pending === null) return Promise.resolve();
    return this.waits.settle(pending);
  }

  span(edgeFrom: Edge, edgeTo: Edge): SpanMeasurement {
    // Settled, one run of the sampler, no fault in between (faults through the cumulative column).
    const checked = this.checkPair(edgeFrom, edgeTo);
    if (!checked.ok) return checked;
    const from = edgeFrom as RingEdge;
    const to = edgeTo as RingEdge;
    const ring = from.ring;
    const s = this.scratch;
    const seconds = (to.t - from.t) / 1e9;

    const step = counterStep(ring.counterStepNs(), ring.periodNs());
    const grossMj = to.value - from.value;
    if (this.source.column === "energy") {
      const tooShort = tooShortForCounter(to.t - from.t, step, msRounded);
      if (tooShort !== null) return { ok: false, reason: tooShort };
    }

    // One pass over the samples covering the span: gaps, and for an integral of power the error
    // that a trapezoid can make between samples.
    let maxGap = 0;
    let trapezoidMj = 0;
    let pMin = Number.POSITIVE_INFINITY;
    let pMax = Number.NEGATIVE_INFINITY;
    const first = Math.max(from.kA, ring.head() - ring.capacity);
    let prevT = Number.NaN;
    let prevP = Number.NaN;
    for (let k = first; k <= to.kB; k++) {
      if (!ring.read(k, s)) continue;
      if (!Number.isNaN(prevT)) {
        const dt = s.t - prevT;
        if (dt > maxGap) maxGap = dt;
        if (this.source.column === "integral") trapezoidMj += trapezoidErrMj(prevP, s.powerMw, dt);
      }
      prevT = s.t;
      prevP = s.powerMw;
      if (s.powerMw < pMin) pMin = s.powerMw;
      if (s.powerMw > pMax) pMax = s.powerMw;
    }
    const samples = Math.max(0, to.kA - from.kB + 1);
    let uncertaintyMj = from.interpErrMj() + to.interpErrMj();
    let caveat: string | null = null;
    if (this.source.column === "energy") {
      const meanMw = Math.max(0, grossMj) / Math.max(seconds, 1e-9);
      const edgeMw = edgePower(meanMw, from.powerMw, to.powerMw);
      uncertaintyMj += counterEdgeErrMj(edgeMw, step.boundNs, from.readNs, to.readNs);
    } else {
      uncertaintyMj += trapezoidMj;
      if (this.source.averagedPower && Number.isFinite(pMax)) {
        uncertaintyMj += averagingErrMj(pMin, pMax, seconds);
        caveat = `power from ${this.source.averagedPowerSource}, a 1 s trailing average on Ampere and newer cards`;
      }
    }
    return {
      ok: true,
      grossJoules: grossMj / 1000,
      samples,
      maxGapMs: maxGap / 1e6,
      uncertaintyJoules: uncertaintyMj / 1000,
      caveat,
    };
  }

  /**
   * Card energy between two settled edges however close together (for the per-card ledger): the
   * difference of the column, and the errors that belong to the interval itself (the trapezoid's
   * between samples, and averaging). The edges' own errors are {@link edgeError}'s.
   */
  interval(from: Edge, to: Edge): IntervalMeasurement {
    const checked = this.checkPair(from, to);
    if (!checked.ok) return checked;
    const a = from as RingEdge;
    const b = to as RingEdge;
    let spreadMj = 0;
    if (this.source.column === "integral") {
      const ring = a.ring;
      const s = this.scratch;
      let pMin = Number.POSITIVE_INFINITY;
      let pMax = Number.NEGATIVE_INFINITY;
      let prevT = Number.NaN;
      let prevP = Number.NaN;
      for (let k = Math.max(a.kA, ring.head() - ring.capacity); k <= b.kB; k++) {
        if (!ring.read(k, s)) continue;
        if (!Number.isNaN(prevT)) spreadMj += trapezoidErrMj(prevP, s.powerMw, s.t - prevT);
        prevT = s.t;
        prevP = s.powerMw;
        if (s.powerMw < pMin) pMin = s.powerMw;
        if (s.powerMw > pMax) pMax = s.powerMw;
      }
      if (this.source.averagedPower && Number.isFinite(pMax))
        spreadMj += averagingErrMj(pMin, pMax, (b.t - a.t) / 1e9);
    }
    return { ok: true, grossJoules: (b.value - a.value) / 1000, spreadJoules: spreadMj / 1000 };
  }

  /**
   * How far the column's value at a settled edge can be from the truth (for the per-card ledger):
   * the interpolation between the samples around it and the whole-mJ read, either way; and for the
   * counter, how much it can lag (its value is as of its last update, up to one step before the
   * read, at the power around the edge).
   */
  edgeError(edge: Edge): EdgeError {
    if (!(edge instanceof RingEdge)) {
      return { ok: false, reason: this.openReason ?? "the sampler was not running at the edge" };
    }
    if (edge.state !== RESOLVED) return { ok: false, reason: edge.reason ?? "not settled" };
    if (this.source.column !== "energy")
      return { ok: true, errJoules: edge.interpErrMj() / 1000, lagJoules: 0 };
    const ring = edge.ring;
    const step = counterStep(ring.counterStepNs(), ring.periodNs());
    return {
      ok: true,
      errJoules: (edge.interpErrMj() + COUNTER_READ_QUANTUM_MJ) / 1000,
      lagJoules: counterLagMj(edgePower(edge.slopeMw, edge.powerMw, null), step.boundNs, edge.readNs) / 1000,
    };
  }

  /** The checks every pair of edges passes before it is measured: settled, one run, no fault. */
  private checkPair(from: Edge, to: Edge): Check {
    if (!(from instanceof RingEdge) || !(to instanceof RingEdge)) {
      return { ok: false, reason: this.openReason ?? "the sampler was not running at the window's edges" };
    }
    if (from.state !== RESOLVED)
      return { ok: false, reason: `opening edge: ${from.reason ?? "not settled"}` };
    if (to.state !== RESOLVED) return { ok: false, reason: `closing edge: ${to.reason ?? "not settled"}` };
    if (from.ring !== to.ring) return { ok: false, reason: "the sampler restarted inside the window" };
    // Faults between the samples around the two edges, through the cumulative column (read when
    // each edge was resolved: a sample never changes once written).
    if (from.kA < from.ring.head() - from.ring.capacity) {
      return { ok: false, reason: "the window outlived the sampler's history" };
    }
    if (to.faultsB > from.faultsA)
      return { ok: false, reason: this.describeFaults(from.ring, from.kA + 1, to.kB) };
    return OK;
  }

  /**
   * The newest sample and what it means, or null before the first (for giul-agent's /power and
   * /metrics; windows never use it). `cumulativeMj` is the track's column (counter or integral).
   */
  latest(): LatestSample | null {
    const ring = this.ring;
    if (ring === null) return null;
    const head = ring.head();
    const s = this.scratch2;
    if (head === 0 || !ring.read(head - 1, s)) return null;
    return {
      tNs: ring.epochNs + BigInt(Math.round(s.t)),
      index: head - 1,
      cumulativeMj: this.source.column === "energy" ? s.energyMj : s.integralMj,
      powerMw: s.powerMw,
      faults: s.faults,
      generation: this.generation,
    };
  }

  /** What the running ring is: its column, period and counter step; null when none runs. */
  ringInfo(): RingInfo | null {
    const ring = this.ring;
    if (ring === null) return null;
    return {
      column: this.source.column,
      averagedPower: this.source.averagedPower,
      periodNs: ring.periodNs(),
      counterStepNs: ring.counterStepNs(),
      generation: this.generation,
    };
  }

  /**
   * The cumulative value at one settled edge, with the samples that bracket it (for giul-agent,
   * which hands single edges to a remote meter; windows use span()).
   */
  reading(edge: Edge): EdgeReading {
    if (!(edge instanceof RingEdge)) {
      return { ok: false, reason: this.openReason ?? "the sampler was not running at the edge" };
    }
    if (edge.state !== RESOLVED) return { ok: false, reason: edge.reason ?? "not settled" };
    if (edge.ring !== this.ring) return { ok: false, reason: "the sampler restarted" };
    const faultsA = this.readAt(edge.ring, edge.kA)?.faults;
    const faultsB = this.readAt(edge.ring, edge.kB)?.faults;
    if (faultsA === undefined || faultsB === undefined) {
      return { ok: false, reason: "the edge outlived the sampler's history" };
    }
    return {
      ok: true,
      tNs: edge.tNs,
      valueMj: edge.value,
      powerMw: edge.powerMw,
      interpErrMj: edge.interpErrMj(),
      readNs: edge.readNs,
      kA: edge.kA,
      faultsA,
      faultsB,
      generation: this.generation,
    };
  }

  powerRange(sinceNs: bigint): { readonly minMw: number; readonly maxMw: number } | null {
    const ring = this.ring;
    if (ring === null) return null;
    const since = Number(sinceNs - ring.epochNs);
    const s = this.scratch2;
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    const oldest = Math.max(0, ring.head() - ring.capacity);
    // The sample before `since` too: its power held into the range.
    for (let k = ring.head() - 1; k >= oldest; k--) {
      if (!ring.read(k, s)) continue;
      if (!Number.isNaN(s.powerMw)) {
        if (s.powerMw < min) min = s.powerMw;
        if (s.powerMw > max) max = s.powerMw;
      }
      if (s.t < since) break;
    }
    return Number.isFinite(max) ? { minMw: min, maxMw: max } : null;
  }

  private readAt(ring: SampleRing, k: number): Sample | null {
    return ring.read(k, this.scratch2) ? this.scratch2 : null;
  }

  private describeFaults(ring: SampleRing, from: number, to: number): string {
    const s = this.scratch;
    const seen = new Set<string>();
    for (let k = Math.max(from, ring.head() - ring.capacity); k <= to; k++) {
      if (!ring.read(k, s)) continue;
      if (s.flags & FLAG.COUNTER_BACKWARDS) seen.add("the energy counter went backwards (driver reload?)");
      if (s.flags & FLAG.COUNTER_JUMP)
        seen.add("the energy counter jumped faster than any card draws (driver reload?)");
      if (s.flags & FLAG.READ_FAILED) seen.add(`a read failed: ${this.source.describeError(s.error)}`);
    }
    const what = seen.size > 0 ? [...seen].join("; ") : "the sampler recorded a fault";
    return `inside the window ${what}`;
  }
}
