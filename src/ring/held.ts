/**
 * Whether a card's power readings hold their values, for a track that integrates them (no energy
 * counter: nvml_sampler, smi_sampler). The energy between a held sensor's refreshes is what it
 * does not show: the trapezoid's bound between reads (one change between two reads at most) is no
 * bound there, and nothing else in the readings is. So an integral over readings seen to hold
 * (../edges/read-runs.ts), or not yet known not to, is not a measurement, and says why. Advanced
 * over the ring's new samples when asked (each sample looked at once).
 */
import { ReadRuns } from "../edges/read-runs.js";
import { averagedIntegral } from "../edges/uncertainty.js";
import type { RingSource, Sample, SampleRing } from "../track/ring.js";
import type { RingEdge } from "./edge.js";
import { changeSpreadMj, type IntegralColumns } from "./integral-spread.js";

/** No running bound (HeldReadings.spreadAround). */
const NO_SPREAD = {
  at: Number.NaN,
  ahead: Number.NaN,
  beforeNs: Number.NaN,
  afterNs: Number.NaN,
  lagNs: Number.NaN,
} as const;

/** An integral's running bound around an edge, for giul-agent's /energy (HeldReadings.spreadAround). */
export interface SpreadAround {
  /** The bound at the sample before the edge, and what the changes within the lag after it add (mJ). */
  readonly at: number;
  readonly ahead: number;
  /** How long before and after the edge the reads around it were, and how far the readings may lag (ns). */
  readonly beforeNs: number;
  readonly afterNs: number;
  readonly lagNs: number;
}

/** A fresh sensor's readings lag by at most this many of its median runs (see lagNs). */
const LAG_RUNS = 2;

export class HeldReadings implements IntegralColumns {
  private ring: SampleRing | null = null;
  /** Next sample to look at (IntegralColumns: one past the newest in the columns). */
  next = 0;
  /** The run in progress: its value, first read's stamp and index. */
  private value = Number.NaN;
  private since = Number.NaN;
  private sinceK = -1;
  private runs = new ReadRuns();
  /**
   * The integral's running bound (./integral-spread.ts changeSpreadMj) at each sample, by index
   * modulo the ring's capacity, its sum so far, and the last sample with a power reading.
   */
  private spread = new Float64Array(0);
  private spreadSum = 0;
  /** Each sample's stamp and power, read once (IntegralColumns: the bound's walks read these). */
  ts = new Float64Array(0);
  ps = new Float64Array(0);
  capacity = 0;
  private first = 0;
  private lastT = Number.NaN;
  private lastP = Number.NaN;

  /**
   * Why the ring's readings up to sample `upTo` cannot be integrated into a bound (they are a
   * trailing average, as `source` says, or hold their values, or were not judged when the closing
   * edge settled: its `lagNs` NaN), or null.
   */
  problem(source: RingSource, ring: SampleRing, upTo: number, s: Sample, lagNs = 0): string | null {
    if (source.averagedPower) return averagedIntegral(source.averagedPowerSource);
    this.advance(ring, upTo, s);
    const runs = this.runs;
    const holds = runs.holds(ring.powerQuantumMw?.() ?? 1);
    // A closing edge settled before the sensor was judged fresh (`lagNs` NaN: not judged, or seen
    // to hold then) waited for no lag of the readings; one that holds now says so below.
    if (!runs.known() || (Number.isNaN(lagNs) && !holds)) {
      const seen = runs.known()
        ? `is not known yet at the closing edge (it was not judged fresh then: fewer than ${ReadRuns.needed} changes of its readings seen, or runs of one value as long as a held sensor's)`
        : `is not known yet (${runs.count} of ${ReadRuns.needed} changes of its readings seen)`;
      return (
        `the card has no energy counter, and whether its power sensor follows the card ${seen}: ` +
        `an integral of readings that hold would bound nothing`
      );
    }
    if (!holds) return null;
    return (
      `the card has no energy counter, and its power sensor holds each reading (${runs.summary()}): ` +
      `what it draws between refreshes is not in the readings, so their integral bounds nothing`
    );
  }

  /**
   * How far behind the card the readings up to sample `upTo` may lag (ns), or NaN before the
   * sensor is judged fresh: a sensor taken as fresh still refreshes on its own clock, each reading up to
   * a refresh old and perhaps an average over up to that refresh's length, so up to twice its
   * refresh interval; a run of one value lasts about that interval, or the gap between reads where
   * the sensor refreshes faster. So twice the median run. An integral's bar allows each change of
   * the readings that lag (./integral-spread.ts).
   */
  lagNs(ring: SampleRing, upTo: number, s: Sample): number {
    this.advance(ring, upTo, s);
    // Not judged, or seen to hold (its integral bounds nothing: no edge waits on its lag).
    if (!this.runs.known() || this.runs.holds(ring.powerQuantumMw?.() ?? 1)) return Number.NaN;
    return LAG_RUNS * this.runs.medianNs();
  }

  /**
   * For giul-agent's readings of an integral at a settled edge (mJ): the running bound at the
   * sample before it, and what the changes after that sample add up to a sample read `lagNs` after
   * the edge (they may be the card's before it). A remote client's bar over two readings a, b is
   * b's at + ahead − a's at: every change that may lie inside the window, each at its full weight.
   * With where the reads around the edge were and the readings' lag: what the reads resolve
   * there (../edges/uncertainty.ts tooShortForReads).
   */
  spreadAround(column: "energy" | "integral", e: RingEdge, s: Sample): SpreadAround {
    const ring = e.ring;
    const head = ring.head();
    // A counter's; or an edge settled before the sensor was judged, which waited for no lag.
    if (column !== "integral" || Number.isNaN(e.lagNs)) return NO_SPREAD;
    this.advance(ring, head - 1, s);
    // Before the columns' oldest sample (overwritten, or before they were started over this ring).
    if (e.kA < this.oldest) return NO_SPREAD;
    let k = e.kA;
    // Up to the last change whose earlier read came before the edge plus the lag.
    while (k + 1 < this.next && !((this.ts[k % this.capacity] as number) >= e.t + e.lagNs)) k += 1;
    const at = this.spread[e.kA % ring.capacity] as number;
    const ahead = (this.spread[k % ring.capacity] as number) - at;
    const before = e.t - this.readAround(e.kA, -1);
    return { at, ahead, beforeNs: before, afterNs: this.readAround(e.kA + 1, 1) - e.t, lagNs: e.lagNs };
  }

  /** The stamp of the first readable sample from `k` on, going by `dir` (NaN where none is left). */
  private readAround(k: number, dir: 1 | -1): number {
    for (let i = k; i >= this.oldest && i < this.next; i += dir) {
      const t = this.ts[i % this.capacity] as number;
      if (!Number.isNaN(t) && !Number.isNaN(this.ps[i % this.capacity] as number)) return t;
    }
    return Number.NaN;
  }

  /** The ring's samples up to its newest, each read once, for the bound's walks. */
  columns(ring: SampleRing, s: Sample): IntegralColumns {
    this.advance(ring, ring.head() - 1, s);
    return this;
  }

  /** The oldest sample of the columns (IntegralColumns). */
  get oldest(): number {
    return Math.max(this.first, this.next - this.capacity);
  }

  private advance(ring: SampleRing, upTo: number, s: Sample): void {
    const cap = ring.capacity;
    if (ring !== this.ring) {
      this.ring = ring;
      this.next = 0;
      this.value = Number.NaN;
      this.runs = new ReadRuns();
      this.spread = new Float64Array(cap);
      this.ts = new Float64Array(cap).fill(Number.NaN);
      this.ps = new Float64Array(cap);
      this.capacity = cap;
      this.spreadSum = 0;
      this.lastP = Number.NaN;
      this.first = Math.max(0, ring.head() - cap);
    }
    const head = ring.head();
    const last = Math.min(upTo, head - 1);
    // Each change weighed with the lag judged now (twice the read period before it is judged).
    const lag = LAG_RUNS * (this.runs.known() ? this.runs.medianNs() : ring.periodNs());
    for (let k = Math.max(this.next, head - cap); k <= last; k++) {
      if (!ring.read(k, s)) {
        this.ts[k % cap] = Number.NaN;
        continue;
      }
      this.ts[k % cap] = s.t;
      this.ps[k % cap] = s.powerMw;
      const p = s.powerMw;
      if (!Number.isNaN(p)) {
        if (!Number.isNaN(this.lastP))
          this.spreadSum += changeSpreadMj(p - this.lastP, s.t - this.lastT, lag);
        this.lastT = s.t;
        this.lastP = p;
      }
      this.spread[k % ring.capacity] = this.spreadSum;
      if (p === this.value) continue;
      if (!Number.isNaN(this.value) && !Number.isNaN(p) && this.sinceK >= 0) {
        this.runs.record(k - this.sinceK, s.t - this.since);
      }
      this.value = p;
      this.since = s.t;
      this.sinceK = k;
    }
    this.next = Math.max(this.next, last + 1);
  }
}
