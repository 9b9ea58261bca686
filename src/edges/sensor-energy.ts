/**
 * The sensor's energy between two instants, bounded under a reading of the sensor (power-model.ts
 * energyBounds), without walking every reading in between:
 *
 * - under CONTINUOUS an interval's bound depends only on its two readings, so it is final once the
 *   second is written: running sums of the intervals' bounds give any stretch of whole intervals
 *   as one difference;
 * - under the held readings an interval's bound can still change as later readings come in, so
 *   the stretch between the first and the last reading inside the span is memoized until the next
 *   reading: edges between the same two reads (a thousand windows closing together) share it.
 *
 * Only the two partial intervals at the ends are computed for each span. The result is
 * energyBounds' own, summed in another order.
 */
import {
  addIntervalBound as addPart,
  CONTINUOUS,
  energyBounds,
  type PowerReadings,
  type SensorModel,
} from "./power-model.js";

/** Entries of the memo: a direct-mapped table keyed by (first reading, count, model). */
const MEMO = 512;
/** Anchors whose update window's energy is kept (a power of two). */
const ANCHOR_WINDOWS = 16;

export class SensorEnergyMemo {
  private readonly memoKey = new Float64Array(MEMO).fill(-1);
  private readonly memoLo = new Float64Array(MEMO);
  private readonly memoHi = new Float64Array(MEMO);
  /** The readings' head each entry was computed at: an entry holds only until the next reading. */
  private readonly memoHead = new Float64Array(MEMO).fill(-1);
  /**
   * Running sums under CONTINUOUS, by reading k % capacity: the bounds of every whole interval
   * before reading k, and how many of them were not finite (a failed read: such a stretch is
   * computed directly). Written up to reading `summed` − 1.
   */
  private readonly sumLo: Float64Array;
  private readonly sumHi: Float64Array;
  private readonly sumBad: Float64Array;
  private summed = 0;
  private readonly partScratch = { lo: 0, hi: 0 };
  /** anchorWindow's entries: anchor, model, readings' head, window lo and hi, energy lo and hi. */
  private readonly windows = new Float64Array(ANCHOR_WINDOWS * 7).fill(Number.NaN);

  constructor(private readonly power: PowerReadings) {
    this.sumLo = new Float64Array(power.capacity);
    this.sumHi = new Float64Array(power.capacity);
    this.sumBad = new Float64Array(power.capacity);
  }

  /** Bounds on the sensor's energy over (x, y) under `model` into `out` (mJ, before any gain). */
  energy(x: number, y: number, model: SensorModel, out: { lo: number; hi: number }): void {
    const p = this.power;
    if (!(y > x)) {
      out.lo = 0;
      out.hi = 0;
      return;
    }
    const first = Math.max(0, p.head - p.capacity);
    let i = p.indexAtOrBefore(x);
    if (i < 0 || p.atOf(i) < x) i += 1;
    const j = p.indexAtOrBefore(y);
    if (i < first) {
      energyBounds(p, x, y, model, out);
      return;
    }
    if (j < i) {
      // No reading inside (x, y): one piece of interval i − 1 (an anchor's update window, an edge
      // just after a read).
      if (i - 1 < first || i > p.head - 1) energyBounds(p, x, y, model, out);
      else {
        out.lo = 0;
        out.hi = 0;
        addPart(p, i - 1, x, y, model, out);
      }
      return;
    }
    let lo = 0;
    let hi = 0;
    if (j === i) {
      // One reading inside: only the two partial intervals below.
    } else if (model === CONTINUOUS && this.sums(i, j, out)) {
      lo = out.lo;
      hi = out.hi;
    } else {
      const key = (i * 4 + model) * 1e6 + (j - i);
      const slot = ((i * 31 + (j - i) * 7 + model) >>> 0) % MEMO;
      if (this.memoKey[slot] === key && this.memoHead[slot] === p.head) {
        lo = this.memoLo[slot] as number;
        hi = this.memoHi[slot] as number;
      } else {
        energyBounds(p, p.atOf(i), p.atOf(j), model, out);
        lo = out.lo;
        hi = out.hi;
        this.memoKey[slot] = key;
        this.memoHead[slot] = p.head;
        this.memoLo[slot] = lo;
        this.memoHi[slot] = hi;
      }
    }
    // The partial intervals at the two ends: (x, at(i)) inside interval i − 1, (at(j), y) inside
    // interval j. Outside the readings held, the energy is unknown: 0 below, +∞ above.
    out.lo = lo;
    out.hi = hi;
    const ai = p.atOf(i);
    if (ai > x) {
      if (i - 1 < first) out.hi = Number.POSITIVE_INFINITY;
      else addPart(p, i - 1, x, ai, model, out);
    }
    const aj = p.atOf(j);
    if (y > aj) {
      if (j + 1 > p.head - 1) out.hi = Number.POSITIVE_INFINITY;
      else addPart(p, j, aj, y, model, out);
    }
  }

  /**
   * The sensor's energy over anchor j's update window (lo, hi) into `out`: the same for every
   * edge near the anchor (./fusion.ts), so kept per anchor until the window, the model or (under a
   * held sensor, whose bounds move as readings come in) the readings change.
   */
  anchorWindow(j: number, lo: number, hi: number, model: SensorModel, out: { lo: number; hi: number }): void {
    const c = this.windows;
    const at = (j & (ANCHOR_WINDOWS - 1)) * 7;
    // Under a continuous sensor the bound is final once a reading lies past the window.
    const p = this.power;
    const final = model === CONTINUOUS && p.head > 0 && p.atOf(p.head - 1) > hi;
    const head = final ? -1 : p.head;
    if (c[at] === j && c[at + 1] === model && c[at + 2] === head && c[at + 3] === lo && c[at + 4] === hi) {
      out.lo = c[at + 5] as number;
      out.hi = c[at + 6] as number;
      return;
    }
    this.energy(lo, hi, model, out);
    c[at] = j;
    c[at + 1] = model;
    c[at + 2] = head;
    c[at + 3] = lo;
    c[at + 4] = hi;
    c[at + 5] = out.lo;
    c[at + 6] = out.hi;
  }

  /** Brings the running sums up to reading k; false when k is past the readings written. */
  private sum(k: number): boolean {
    const p = this.power;
    if (k >= p.head) return false;
    const cap = p.capacity;
    if (this.summed < p.head - cap) this.summed = p.head - cap; // fell behind: restart the sums
    for (; this.summed <= k; this.summed++) {
      const m = this.summed;
      const slot = m % cap;
      // The first reading held (or ever) starts the sums afresh.
      if (m === 0 || m - 1 < p.head - cap) {
        this.sumLo[slot] = 0;
        this.sumHi[slot] = 0;
        this.sumBad[slot] = 0;
        continue;
      }
      const prev = slot === 0 ? cap - 1 : slot - 1;
      const part = this.partScratch;
      part.lo = 0;
      part.hi = 0;
      addPart(p, m - 1, p.atOf(m - 1), p.atOf(m), CONTINUOUS, part);
      const bad = Number.isFinite(part.lo) && Number.isFinite(part.hi) ? 0 : 1;
      this.sumLo[slot] = (this.sumLo[prev] as number) + (bad ? 0 : part.lo);
      this.sumHi[slot] = (this.sumHi[prev] as number) + (bad ? 0 : part.hi);
      this.sumBad[slot] = (this.sumBad[prev] as number) + bad;
    }
    return true;
  }

  /**
   * The bounds of the whole intervals from reading i to reading j under CONTINUOUS, from the
   * running sums, into `out`; false where j is not written yet or a failed read lies between.
   * Each slot found once (a remainder of doubles is a call into the C library).
   */
  private sums(i: number, j: number, out: { lo: number; hi: number }): boolean {
    if (!this.sum(j)) return false;
    const cap = this.power.capacity;
    const a = i % cap;
    const b = j % cap;
    if (this.sumBad[a] !== this.sumBad[b]) return false;
    out.lo = (this.sumLo[b] as number) - (this.sumLo[a] as number);
    out.hi = (this.sumHi[b] as number) - (this.sumHi[a] as number);
    return true;
  }
}
