/**
 * Whether a card's power readings hold their values, for a track that integrates them (no energy
 * counter: nvml_sampler, smi_sampler). A real sensor's readings differ from one refresh to the
 * next (noise of a watt or more, at mW resolution), so a sensor that refreshes at every read shows
 * runs of one reading; one that holds each value for tens of ms (A100/H100: an average over 25 ms
 * of every 100 ms) shows runs of several. The energy between a held sensor's refreshes is what it
 * does not show: the trapezoid's bound between reads (one change between two reads at most) is no
 * bound there, and nothing else in the readings is. So an integral over readings seen to hold is
 * not a measurement, and says why.
 *
 * Judged from the runs of identical readings that ended with a change (a value still standing
 * says nothing yet): held when the median of the last RUNS of them spans READS_HELD reads or more,
 * and not known (so not trusted) before MIN_RUNS of them.
 * Advanced over the ring's new samples when asked (each sample looked at once).
 */
import { medianOf } from "../edges/cadence.js";
import { averagedIntegral } from "../edges/uncertainty.js";
import type { RingSource, Sample, SampleRing } from "../track/ring.js";

/** Runs judged from. */
const RUNS = 32;
/** Ended runs needed before the readings are trusted to follow the card. */
const MIN_RUNS = 3;
/** A median run of this many reads or more: the readings hold. */
const READS_HELD = 2;

export class HeldReadings {
  private ring: SampleRing | null = null;
  /** Next sample to look at. */
  private next = 0;
  /** The run in progress: its value, first read's stamp and index. */
  private value = Number.NaN;
  private since = Number.NaN;
  private sinceK = -1;
  private readonly runReads = new Float64Array(RUNS);
  private readonly runNs = new Float64Array(RUNS);
  private runs = 0;
  private readonly scratch = new Float64Array(RUNS);

  /**
   * Why the ring's readings up to sample `upTo` cannot be integrated into a bound (they are a
   * trailing average, as `source` says, or hold their values), or null.
   */
  problem(source: RingSource, ring: SampleRing, upTo: number, s: Sample): string | null {
    if (source.averagedPower) return averagedIntegral(source.averagedPowerSource);
    this.advance(ring, upTo, s);
    const n = Math.min(this.runs, RUNS);
    if (n < MIN_RUNS) {
      return (
        `the card has no energy counter, and whether its power sensor follows the card is not known yet ` +
        `(${n} of ${MIN_RUNS} changes of its readings seen): an integral of readings that hold would bound nothing`
      );
    }
    const reads = median(this.runReads, n, this.scratch);
    if (reads < READS_HELD) return null;
    const ms = median(this.runNs, n, this.scratch) / 1e6;
    return (
      `the card has no energy counter, and its power sensor holds each reading (about ${ms.toFixed(0)} ms, ` +
      `${reads.toFixed(0)} reads): what it draws between refreshes is not in the readings, so their integral bounds nothing`
    );
  }

  private advance(ring: SampleRing, upTo: number, s: Sample): void {
    if (ring !== this.ring) {
      this.ring = ring;
      this.next = 0;
      this.value = Number.NaN;
      this.runs = 0;
    }
    const head = ring.head();
    const last = Math.min(upTo, head - 1);
    for (let k = Math.max(this.next, head - ring.capacity); k <= last; k++) {
      if (!ring.read(k, s)) continue;
      const p = s.powerMw;
      if (p === this.value) continue;
      if (!Number.isNaN(this.value) && !Number.isNaN(p) && this.sinceK >= 0) {
        const slot = this.runs % RUNS;
        this.runReads[slot] = k - this.sinceK;
        this.runNs[slot] = s.t - this.since;
        this.runs += 1;
      }
      this.value = p;
      this.since = s.t;
      this.sinceK = k;
    }
    this.next = Math.max(this.next, last + 1);
  }
}

/** The median of the first n of `values`, selected in `scratch` (values keep their order). */
function median(values: Float64Array, n: number, scratch: Float64Array): number {
  scratch.set(values.subarray(0, n));
  return medianOf(scratch, n);
}
