import { COUNTER_ONLY, CounterFusion, type FusionReport } from "../edges/fusion.js";
import {
  averagedPowerCaveat,
  counterStep,
  fusedSpan,
  msRounded,
  tooShortForCounter,
  tooShortForReads,
} from "../edges/uncertainty.js";
import { emptySample, powerRangeOf, type RingSource, type Sample, type SampleRing } from "../track/ring.js";
import type {
  Edge,
  EdgeError,
  EdgeReading,
  Finished,
  IntervalMeasurement,
  LatestSample,
  RingInfo,
  Track,
  TrackReadings,
} from "../track/track.js";
import { debug } from "../vocabulary/debug.js";
import { type BackendName, type Check, OK, type SpanMeasurement } from "../vocabulary/measurement.js";
import { RingDigest } from "./digest.js";
import {
  describeFaults,
  type EdgeContext,
  fail as failEdge,
  PENDING,
  pastHint,
  RESOLVED,
  RingEdge,
  resolveEdge,
} from "./edge.js";
import { edgeReading } from "./edge-reading.js";
import { HeldReadings } from "./held.js";
import { integralSpread } from "./integral-spread.js";
import { idlePeriodMs, RingLinger } from "./linger.js";
import { RingWaits } from "./waits.js";

/**
 * The window arithmetic shared by every sampling backend (native threads', the smi samplers', a
 * polled agent's): edges from the samples around them (./edge.ts: the counter fused with power,
 * ./fusion.ts, or an integral of power interpolated), spans as the difference of a cumulative
 * quantity with the faults between, bounded by ./uncertainty.ts; waits and stalls: ./waits.ts.
 */

export class RingTrack implements Track, TrackReadings {
  readonly backend: BackendName;
  /** A ring's samples can be read one by one (giul-agent serves them): this track offers readings. */
  readonly readings: TrackReadings = this;
  private readonly source: RingSource;
  private ring: SampleRing | null = null;
  private openReason: string | null = null;
  private users = 0;
  private periodMs = Number.POSITIVE_INFINITY;
  /** What the sampler does once no window uses it (./linger.ts). */
  private readonly linger = new RingLinger({
    busy: () => this.users > 0 || this.ring === null,
    slower: () =>
      this.ring === null ? null : idlePeriodMs(this.source.column, this.ring.counterStepNs(), this.periodMs),
    setPeriod: (ms) => this.source.setPeriod(ms),
    shut: () => this.shut(),
  });
  /** When the fused counter digests new samples between edges (./digest.ts). */
  private readonly digest = new RingDigest({
    busy: () => this.users > 0,
    digest: () => {
      const ring = this.ring;
      if (ring !== null) this.fusionOf(ring)?.update();
    },
  });
  /** The running ring's source rings a doorbell after each sample asked for (see RingSource). */
  private doorbell = false;
  private readonly waits: RingWaits<RingEdge>;
  private readonly scratch: Sample = emptySample();
  /** Whether an integral's power readings hold their values (./held.ts). */
  private readonly held = new HeldReadings();
  private readonly scratch2: Sample = { ...this.scratch };

  private readonly clock: () => bigint;
  /** The fused counter reading of each ring (see fusionOf). */
  private readonly fusions = new WeakMap<SampleRing, CounterFusion>();
  /** The edge context of the last ring an edge was resolved over (see edgeContext). */
  private context: (EdgeContext & { readonly ring: SampleRing }) | null = null;
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
        if (e.state === PENDING) this.resolve(e);
        return e.state === PENDING;
      },
      // With its sample, a fused edge may wait for the counter's update, an integral's for its lag.
      awaitingSample: (e) => e.kB < 0,
      fail: (e, reason) => failEdge(e, reason),
      awaitingCounter: (e) => e.kB >= 0 && (this.fusionOf(e.ring)?.awaitsUpdate(e.t, e.kA) ?? false),
      counterProgress: () => (this.ring === null ? -1 : (this.fusionOf(this.ring)?.changes() ?? -1)),
      wake: (read, counterOnly) => {
        if (!this.doorbell || this.ring === null) return false;
        this.source.wake?.(read, counterOnly);
        return true;
      },
    });
  }

  retain(periodMs: number): void {
    this.users += 1;
    this.digest.retained();
    // A linger timer still set finds the track in use when it fires, and leaves it running.
    if (this.ring === null) {
      this.periodMs = periodMs;
      const opened = this.source.open(periodMs);
      if (!opened.ok) this.openReason = opened.reason;
      else {
        this.ring = opened.value;
        this.openReason = null;
        this.generation += 1;
        this.doorbell = this.source.doorbell?.(() => this.onSample()) ?? false;
        if (this.source.column === "energy") this.digest.start();
      }
    } else if (this.linger.resumed()) {
      // Back from idle: the windows' period again, the next edge's read at once (the doorbell).
      this.periodMs = Math.min(this.periodMs, periodMs);
      this.source.setPeriod(this.periodMs);
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
    this.linger.released();
  }

  private shut(): void {
    this.linger.reset();
    if (this.users > 0 || this.ring === null) return;
    this.ring = null;
    this.doorbell = false;
    this.periodMs = Number.POSITIVE_INFINITY;
    this.digest.stop();
    this.source.close();
  }

  /** The doorbell rang. Nothing thrown here may reach the addon's callback (an uncaught error). */
  private onSample(): void {
    try {
      this.waits.onSample();
    } catch (error) {
      debug("the doorbell's look at the waits failed: %s", String(error));
    }
  }

  ready(withinMs?: number): Promise<Check> {
    return this.waits.ready(withinMs);
  }

  readyNow(): Check | null {
    return this.waits.readyNow();
  }

  /** The longest a window waits now for the sample after an edge (ms; see ./waits.ts). */
  waitBoundMs(): number {
    return this.waits.boundMs();
  }

  /**
   * An edge at an instant of the card's event log: this environment's own, just appended (its
   * samples looked for from the newest, a read asked for right after it), or another's, older
   * (found by bisection). Resolved by settle(), like every edge.
   */
  loggedEdge(tNs: bigint, own: boolean): Edge {
    const ring = this.ring;
    if (ring === null) return { tNs };
    const t = Number(tNs - ring.epochNs);
    if (!own) return new RingEdge(tNs, ring, pastHint(ring, t, this.scratch2), t);
    // Every edge of ours sits on a read: the sampler reads right after it.
    this.source.read?.();
    return new RingEdge(tNs, ring, undefined, t);
  }

  edge(): Edge {
    const tNs = this.clock();
    const ring = this.ring;
    if (ring === null) return { tNs };
    // Now: the first sample that can lie after it is the newest (the hint RingEdge takes itself).
    const e = new RingEdge(tNs, ring);
    this.resolve(e);
    return e;
  }

  /**
   * An edge at an instant already past (giul-agent reads a client's edge this way): its samples
   * found by bisection over the ring (pastHint), not from the newest as edge() does.
   */
  edgeAt(tNs: bigint): Edge {
    const ring = this.ring;
    if (ring === null) return { tNs };
    const t = Number(tNs - ring.epochNs);
    const e = new RingEdge(tNs, ring, pastHint(ring, t, this.scratch2), t);
    this.resolve(e);
    return e;
  }

  /**
   * Evaluates what the samples present now allow, at once: true when none of `edges` is still
   * waiting for a sample. (settle() waits for the rest; this never waits.)
   */
  settled(edges: readonly Edge[]): boolean {
    let all = true;
    for (const edge of edges) {
      if (!(edge instanceof RingEdge) || edge.state !== PENDING) continue;
      this.resolve(edge);
      if (edge.state === PENDING) all = false;
    }
    return all;
  }

  settle(edges: readonly Edge[]): Promise<void> {
    return new Promise((done) => this.settleThen(edges, { finished: done }));
  }

  settleThen(edges: readonly Edge[], done: Finished): void {
    let count = 0;
    for (const edge of edges) {
      if (!(edge instanceof RingEdge) || edge.state !== PENDING) continue;
      this.resolve(edge);
      if (edge.state === PENDING) count += 1;
    }
    if (count === 0) {
      queueMicrotask(() => done.finished());
      return;
    }
    // Those still pending, kept until they settle: the list as given where all are (a close's own
    // edge, most often), else one of their exact size (grown by push, it would take room for 17).
    let pending = edges as readonly RingEdge[];
    if (count < edges.length) {
      const some: RingEdge[] = new Array(count);
      let i = 0;
      for (const edge of edges) if (edge instanceof RingEdge && edge.state === PENDING) some[i++] = edge;
      pending = some;
    }
    this.waits.settleThen(pending, done);
  }

  span(edgeFrom: Edge, edgeTo: Edge, bound = true): SpanMeasurement {
    // Settled, one run of the sampler, no fault in between (faults through the cumulative column).
    const checked = this.checkPair(edgeFrom, edgeTo);
    if (!checked.ok) return checked;
    const from = edgeFrom as RingEdge;
    const to = edgeTo as RingEdge;
    const ring = from.ring;
    const s = this.scratch;
    const energy = this.source.column === "energy";

    // Without power to place energy inside the counter's steps, a window shorter than a step is
    // 0 or one step, not its energy.
    if (energy && (from.basis === COUNTER_ONLY || to.basis === COUNTER_ONLY)) {
      const step = counterStep(ring.counterStepNs(), ring.periodNs());
      // Also where the counter did not update between the edges (a step not yet known longer).
      const tooShort = tooShortForCounter(to.t - from.t, step, msRounded, from.counterA === to.counterA);
      if (tooShort !== null) return { ok: false, reason: tooShort };
    }

    const samples = Math.max(0, to.kA - from.kB + 1);
    const grossMj = to.value - from.value;
    let uncertaintyMj = from.errMj + to.errMj;
    let caveat: string | null = null;
    let maxGap: number;
    const fusion = this.fusionOf(ring);
    if (fusion !== null) {
      maxGap = fusion.samples().maxGap(from.kA, to.kB);
      // The edges' difference, and where the power readings bound the span on their own (short
      // spans), the tighter of the two. The value is the difference either way.
      if (bound)
        uncertaintyMj = fusedSpan(grossMj, uncertaintyMj, fusion.between(from.t, to.t, from.kA)).errMj;
      if (this.source.averagedPower) caveat = averagedPowerCaveat(this.source.averagedPowerSource);
    } else {
      const walked = integralSpread(this.held.columns(ring, s), from.t, to.t, from.kA, to.lagNs);
      const tooShort = tooShortForReads(to.t - from.t, walked.maxGap, to.lagNs);
      if (tooShort !== null) return { ok: false, reason: tooShort };
      maxGap = walked.maxGap;
      uncertaintyMj += walked.spreadMj;
    }
    const note = this.source.note ?? null;
    if (note !== null) caveat = caveat === null ? note : `${caveat}; ${note}`;
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
    const cols = this.source.column === "integral" ? this.held.columns(a.ring, this.scratch) : null;
    const spreadMj = cols ? integralSpread(cols, a.t, b.t, a.kA, b.lagNs).spreadMj : 0;
    return { ok: true, grossJoules: (b.value - a.value) / 1000, spreadJoules: spreadMj / 1000 };
  }

  /**
   * How far the column's value at a settled edge can be from the truth (for the per-card ledger),
   * either way: the fused reading's bound on a counter (./fusion.ts), the interpolation between
   * the samples around it on an integral. Nothing is one-sided: a fused value does not lag.
   */
  edgeError(edge: Edge): EdgeError {
    if (!(edge instanceof RingEdge)) {
      return { ok: false, reason: this.openReason ?? "the sampler was not running at the edge" };
    }
    if (edge.state !== RESOLVED) return { ok: false, reason: edge.reason ?? "not settled" };
    return { ok: true, errJoules: edge.errMj / 1000, lagJoules: 0 };
  }

  /** The checks every pair of edges passes before it is measured: settled, one run, no fault. */
  private checkPair(from: Edge, to: Edge): Check {
    if (!(from instanceof RingEdge) || !(to instanceof RingEdge)) {
      return { ok: false, reason: this.openReason ?? "the sampler was not running at the window's edges" };
    }
    if (from.state !== RESOLVED)
      return { ok: false, reason: `opening edge: ${from.reason ?? "not settled"}` };
    // A closing edge that failed after a fault inside the window: the fault is the reason.
    const faulted = from.ring === to.ring && to.kB >= 0 && to.faultsB > from.faultsA;
    if (to.state !== RESOLVED && !faulted) {
      return { ok: false, reason: `closing edge: ${to.reason ?? "not settled"}` };
    }
    if (from.ring !== to.ring) return { ok: false, reason: "the sampler restarted inside the window" };
    // Faults between the samples around the two edges, through the cumulative column (read when
    // each edge was resolved: a sample never changes once written).
    if (from.kA < from.ring.head() - from.ring.capacity) {
      return { ok: false, reason: "the window outlived the sampler's history" };
    }
    if (faulted) {
      const found =
        this.fusionOf(from.ring)
          ?.samples()
          .faultsBetween(from.kA + 1, to.kB) ?? [];
      const describe = (c: number) => this.source.describeError(c);
      return {
        ok: false,
        reason: describeFaults(from.ring, from.kA + 1, to.kB, this.scratch, describe, found),
      };
    }
    const unbounded = this.unbounded(from.ring, to.kB, to.lagNs);
    if (unbounded !== null) return { ok: false, reason: unbounded };
    return OK;
  }

  integralProblem(): string | null {
    return this.ring === null ? null : this.unbounded(this.ring, this.ring.head() - 1);
  }

  /** Readings that do not follow the card between reads bound nothing when integrated (./held.ts). */
  private unbounded(ring: SampleRing, upTo: number, lagNs = 0): string | null {
    if (this.source.column !== "integral") return null;
    return this.held.problem(this.source, ring, upTo, this.scratch, lagNs);
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

  /** What the running ring's fused counter has seen of the card (diagnosis); null without one. */
  fusionReport(): FusionReport | null {
    return this.ring === null ? null : (this.fusionOf(this.ring)?.report() ?? null);
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
    return edgeReading(edge, this.source.column, this.held, this.generation, this.scratch2);
  }

  powerRange(sinceNs: bigint): { readonly minMw: number; readonly maxMw: number } | null {
    return this.ring === null ? null : powerRangeOf(this.ring, sinceNs, this.scratch2);
  }

  /** Tries to evaluate a pending edge from the samples present now. */
  private resolve(e: RingEdge): void {
    resolveEdge(e, this.edgeContext(e.ring), this.scratch);
  }

  /** The fused reading of a ring's counter (one per ring, so per run of the sampler). */
  private fusionOf(ring: SampleRing): CounterFusion | null {
    if (this.source.column !== "energy") return null;
    let fusion = this.fusions.get(ring);
    if (fusion === undefined) {
      fusion = new CounterFusion(
        ring,
        this.source.averagedPower ? "averaged" : "instant",
        this.digest.digested,
      );
      this.fusions.set(ring, fusion);
    }
    return fusion;
  }

  /** What resolving an edge over `ring` needs: made once per ring, not per edge. */
  private edgeContext(ring: SampleRing): EdgeContext {
    const last = this.context;
    if (last !== null && last.ring === ring) return last;
    const made = {
      ring,
      column: this.source.column,
      fusion: this.fusionOf(ring),
      describeError: (code: number) => this.source.describeError(code),
      lagNs: (upTo: number) =>
        this.source.averagedPower ? Number.NaN : this.held.lagNs(ring, upTo, this.scratch2),
    };
    this.context = made;
    return made;
  }
}
