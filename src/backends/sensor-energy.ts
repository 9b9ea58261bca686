/**
 * The sensor's energy between two instants, bounded under a reading of the sensor (power-model.ts
 * energyBounds), with the part between the first and the last reading inside the interval memoized
 * until the next sample: edges between the same two reads (a thousand windows closing together)
 * share it, and only the two partial intervals at the ends are computed for each.
 */
import { energyBounds, type PowerReadings, type SensorModel } from "./power-model.js";

/** Entries of the memo: a direct-mapped table keyed by (first reading, count, model). */
const MEMO = 512;

export class SensorEnergyMemo {
  private readonly memoKey = new Float64Array(MEMO).fill(-1);
  private readonly memoLo = new Float64Array(MEMO);
  private readonly memoHi = new Float64Array(MEMO);
  /** The readings' head each entry was computed at: an entry holds only until the next reading. */
  private readonly memoHead = new Float64Array(MEMO).fill(-1);

  constructor(private readonly power: PowerReadings) {}

  /** Bounds on the sensor's energy over (x, y) under `model` into `out` (mJ, before any gain). */
  energy(x: number, y: number, model: SensorModel, out: { lo: number; hi: number }): void {
    const p = this.power;
    let i = p.indexAtOrBefore(x);
    if (i < 0 || p.atOf(i) < x) i += 1;
    const j = p.indexAtOrBefore(y);
    if (i < Math.max(0, p.head - p.capacity) || j < i + 1) {
      energyBounds(p, x, y, model, out);
      return;
    }
    const key = (i * 4 + model) * 1e6 + (j - i);
    const slot = ((i * 31 + (j - i) * 7 + model) >>> 0) % MEMO;
    let lo: number;
    let hi: number;
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
    energyBounds(p, x, p.atOf(i), model, out);
    lo += out.lo;
    hi += out.hi;
    energyBounds(p, p.atOf(j), y, model, out);
    out.lo += lo;
    out.hi += hi;
  }
}
