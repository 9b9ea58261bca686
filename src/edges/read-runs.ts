/**
 * Whether a card's power sensor holds its readings, judged from its runs of one value. A real
 * sensor's readings differ from one refresh to the next (noise of a watt or more, at mW
 * resolution), so a sensor that refreshes at every read shows runs of one reading, and two reads
 * alike only by chance; one that holds each value longer than a read period (real cards: 10–100 ms;
 * A100/H100 an average over 25 ms of every 100 ms) shows runs of two reads or more, and lags the
 * power by up to its hold, which its readings do not show. So a sensor read at mW is fresh only
 * while at most one in FRESH_SHARE of its last RUNS runs that ended in a change spans two reads or
 * more (a hold of 1.2 read periods makes one in five). A coarse sensor's (whole watts: AMD) repeats
 * may be its resolution: it is fresh while the median of those runs spans one read. Judged from
 * MIN_RUNS runs on (before, fresh while none spanned two reads). The one test of freshness for both
 * tracks: the fused counter's (./power-model.ts: may the readings bound an edge, where the counter
 * agrees?) and the integral's (../ring/held.ts: may they be integrated into a bound, once known?).
 */
import { medianOf } from "./cadence.js";

/** Runs judged from. */
const RUNS = 32;
/** Ended runs needed before the sensor is judged. */
const MIN_RUNS = 3;
/** At most one run in this many spanning two reads or more: the sensor refreshes at every read. */
const FRESH_SHARE = 16;
/** Readings this coarse (mW) or coarser repeat by their resolution. */
const COARSE_MW = 1000;

export class ReadRuns {
  private readonly reads = new Float64Array(RUNS);
  private readonly ns = new Float64Array(RUNS);
  private readonly scratch = new Float64Array(RUNS);
  /** Runs recorded so far, and how many of the last RUNS spanned two reads or more. */
  count = 0;
  private repeated = 0;
  /** medianReads() as of `count` runs: asked at every edge of a coarse sensor, it changes only with a run. */
  private medianAt = -1;
  private medianValue = Number.NaN;
  private medianNsAt = -1;
  private medianNsValue = Number.NaN;

  /** A run of one value that ended in a change: how many reads showed it, and over how long (ns). */
  record(reads: number, ns: number): void {
    const slot = this.count % RUNS;
    if (this.count >= RUNS && (this.reads[slot] as number) >= 2) this.repeated -= 1;
    if (reads >= 2) this.repeated += 1;
    this.reads[slot] = reads;
    this.ns[slot] = ns;
    this.count += 1;
  }

  /** Enough runs recorded to judge the sensor. */
  known(): boolean {
    return this.count >= MIN_RUNS;
  }

  /**
   * Whether the readings refresh at every read, given their resolution (mW): before MIN_RUNS runs,
   * while none has spanned two reads (nothing says the sensor holds: a reading that never changes
   * is right whichever it does); then as judged above, one repeat allowed however few the runs.
   */
  fresh(quantumMw: number): boolean {
    if (!this.known()) return this.repeated === 0;
    if (quantumMw >= COARSE_MW) return this.medianReads() < 2;
    return this.repeated <= Math.max(1, Math.min(this.count, RUNS) / FRESH_SHARE);
  }

  /** Known, and seen to hold its readings. */
  holds(quantumMw: number): boolean {
    return this.known() && !this.fresh(quantumMw);
  }

  /** What the runs showed, for a reason: "about 8 ms; 7 of its last 32 values seen by two reads or more". */
  summary(): string {
    const n = Math.min(this.count, RUNS);
    return `about ${(this.medianNs() / 1e6).toFixed(0)} ms; ${this.repeated} of its last ${n} values seen by two reads or more`;
  }

  /** The median run, in reads and in ns (NaN before any). */
  medianReads(): number {
    if (this.medianAt !== this.count) {
      this.medianValue = this.median(this.reads);
      this.medianAt = this.count;
    }
    return this.medianValue;
  }

  medianNs(): number {
    if (this.medianNsAt !== this.count) {
      this.medianNsValue = this.median(this.ns);
      this.medianNsAt = this.count;
    }
    return this.medianNsValue;
  }

  /** The runs needed before the sensor is judged. */
  static readonly needed = MIN_RUNS;

  private median(values: Float64Array): number {
    const n = Math.min(this.count, RUNS);
    if (n === 0) return Number.NaN;
    this.scratch.set(values.subarray(0, n));
    return medianOf(this.scratch, n);
  }
}
