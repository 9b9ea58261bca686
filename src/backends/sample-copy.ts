/**
 * The fused counter's own copy of what edges need of each sample (./fusion.ts fills it as it
 * digests the ring): its stamp, counter, power, error code, faults and read duration, by
 * k % capacity. Edges find and read their samples here rather than through the ring's sequence
 * lock, one sample at a time.
 */
import type { Sample } from "./ring.js";

/** Fields kept per sample besides its stamp. */
const FIELDS = 5;

export class SampleCopy {
  /** Each sample's stamp (ns), NaN where it could not be read. */
  private readonly times: Float64Array;
  private readonly fields: Float64Array;
  /** Samples copied so far (the next k to write). */
  written = 0;

  constructor(private readonly capacity: number) {
    this.times = new Float64Array(capacity).fill(Number.NaN);
    this.fields = new Float64Array(capacity * FIELDS);
  }

  /** Copies sample k (the next one), or marks it unreadable (`s` null). */
  write(k: number, s: Sample | null): void {
    const slot = k % this.capacity;
    this.written = k + 1;
    if (s === null) {
      this.times[slot] = Number.NaN;
      return;
    }
    this.times[slot] = s.t;
    const at = slot * FIELDS;
    const v = this.fields;
    v[at] = s.energyMj;
    v[at + 1] = s.powerMw;
    v[at + 2] = s.error;
    v[at + 3] = s.faults;
    v[at + 4] = s.readNs;
  }

  /**
   * Sample k into `out` (stamp, counter, power, error code, faults, read duration; the other
   * fields are not written): false when it could not be read or is no longer held, `out` then as
   * it was.
   */
  read(k: number, out: Sample): boolean {
    if (k < 0 || k >= this.written || k < this.written - this.capacity) return false;
    const slot = k % this.capacity;
    const t = this.times[slot] as number;
    if (Number.isNaN(t)) return false;
    const at = slot * FIELDS;
    const v = this.fields;
    out.t = t;
    out.energyMj = v[at] as number;
    out.powerMw = v[at + 1] as number;
    out.error = v[at + 2] as number;
    out.faults = v[at + 3] as number;
    out.readNs = v[at + 4] as number;
    return true;
  }

  /** The first sample from `kFrom` on stamped after `t`, −1 when none is copied yet. */
  firstAfter(t: number, kFrom: number): number {
    for (let k = Math.max(kFrom, this.written - this.capacity); k < this.written; k++) {
      if ((this.times[k % this.capacity] as number) > t) return k;
    }
    return -1;
  }

  /** The longest interval between two readable samples among kFrom..kTo (ns). */
  maxGap(kFrom: number, kTo: number): number {
    let gap = 0;
    let prev = Number.NaN;
    for (let k = Math.max(kFrom, this.written - this.capacity); k <= kTo && k < this.written; k++) {
      const t = this.times[k % this.capacity] as number;
      if (Number.isNaN(t)) continue;
      if (t - prev > gap) gap = t - prev;
      prev = t;
    }
    return gap;
  }
}
