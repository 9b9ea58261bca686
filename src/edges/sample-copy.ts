/**
 * The fused counter's own copy of what edges need of each sample (./fusion.ts fills it as it
 * digests the ring): its stamp, counter, power, error code, faults and read duration, by
 * k % capacity. Edges find and read their samples here rather than through the ring's sequence
 * lock, one sample at a time.
 */
import type { Sample } from "../track/ring.js";

/** Fields kept per sample besides its stamp. */
const FIELDS = 5;
/**
 * Slots per block of the gaps' maxima: a span's longest gap reads whole blocks' maxima and walks
 * only its two ends, so that a window of seconds costs what one of milliseconds does.
 */
const BLOCK = 64;

/** Discontinuities remembered for windows' reasons. */
const NOTES = 32;

export class SampleCopy {
  /** Each sample's stamp (ns), NaN where it could not be read. */
  private readonly times: Float64Array;
  private readonly fields: Float64Array;
  /**
   * Each sample's gap: its stamp minus that of the readable sample before it (ns), NaN where it is
   * unreadable or the first readable one copied.
   */
  private readonly gaps: Float64Array;
  /** The largest gap of each block of BLOCK slots (slot / BLOCK), written in the ring's current pass. */
  private readonly blockMax: Float64Array;
  /** The newest readable sample's stamp (NaN before the first). */
  private lastT = Number.NaN;
  /**
   * The first k of this run of copies: a copy that skipped samples (the fused counter fell a whole
   * ring behind) leaves the slots before it holding older samples, which are not these.
   */
  private from = 0;
  /** Samples copied so far (the next k to write). */
  written = 0;
  /** Faults found by the fused counter so far, and what they were (addFault). */
  private faultsAdded = 0;
  private readonly notes: { readonly k: number; readonly why: string }[] = [];

  constructor(private readonly capacity: number) {
    this.times = new Float64Array(capacity).fill(Number.NaN);
    this.fields = new Float64Array(capacity * FIELDS);
    this.gaps = new Float64Array(capacity).fill(Number.NaN);
    this.blockMax = new Float64Array(Math.ceil(capacity / BLOCK));
  }

  /** The oldest k still held. */
  private oldest(): number {
    return Math.max(this.written - this.capacity, this.from);
  }

  /** Copies sample k (the next one), or marks it unreadable (`s` null). */
  write(k: number, s: Sample | null): void {
    if (k !== this.written) {
      this.from = k;
      this.lastT = Number.NaN;
    }
    const slot = k % this.capacity;
    this.written = k + 1;
    const gap = s === null ? Number.NaN : s.t - this.lastT;
    this.gaps[slot] = gap;
    const block = (slot / BLOCK) | 0;
    // A block's first slot (or the run's first copy) begins its maximum afresh.
    if (slot % BLOCK === 0 || k === this.from) this.blockMax[block] = gap > 0 ? gap : 0;
    else if (gap > (this.blockMax[block] as number)) this.blockMax[block] = gap;
    if (s === null) {
      this.times[slot] = Number.NaN;
      return;
    }
    this.lastT = s.t;
    this.times[slot] = s.t;
    const at = slot * FIELDS;
    const v = this.fields;
    v[at] = s.energyMj;
    v[at + 1] = s.powerMw;
    v[at + 2] = s.error;
    v[at + 3] = s.faults + this.faultsAdded;
    v[at + 4] = s.readNs;
  }

  /**
   * A discontinuity the fused counter found at sample `from` (`why`): one fault more on every copy
   * from it on, those written later included, so that a window across it is not measured (the
   * ring's own faults are the sampler's: backwards, jumps, failed reads).
   */
  addFault(from: number, why: string): void {
    this.faultsAdded += 1;
    for (let k = Math.max(from, this.oldest()); k < this.written; k++) {
      const at = (k % this.capacity) * FIELDS + 3;
      this.fields[at] = (this.fields[at] as number) + 1;
    }
    this.notes.push({ k: from, why });
    if (this.notes.length > NOTES) this.notes.shift();
  }

  /** Why the copies among kFrom..kTo count faults the ring does not (see addFault). */
  faultsBetween(kFrom: number, kTo: number): string[] {
    return this.notes.filter((d) => d.k >= kFrom && d.k <= kTo).map((d) => d.why);
  }

  /**
   * Sample k into `out` (stamp, counter, power, error code, faults, read duration; the other
   * fields are not written): false when it could not be read or is no longer held, `out` then as
   * it was.
   */
  read(k: number, out: Sample): boolean {
    if (k < 0 || k >= this.written || k < this.oldest()) return false;
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
    for (let k = Math.max(kFrom, this.oldest()); k < this.written; k++) {
      if ((this.times[k % this.capacity] as number) > t) return k;
    }
    return -1;
  }

  /**
   * The longest interval between two readable samples among kFrom..kTo (ns), 0 where there are
   * fewer than two. Whole blocks by their maxima, the ends slot by slot: O(BLOCK + span / BLOCK).
   */
  maxGap(kFrom: number, kTo: number): number {
    const cap = this.capacity;
    const last = Math.min(kTo, this.written - 1);
    let k = Math.max(kFrom, this.oldest());
    // Walked by slot as well as by index, the slot found once (indices arrive as doubles, and a
    // remainder of doubles at every sample is a call into the C library).
    let slot = k % cap;
    // The first readable sample of the span: its own gap reaches before the span.
    while (k <= last && Number.isNaN(this.times[slot] as number)) {
      k++;
      slot = slot + 1 === cap ? 0 : slot + 1;
    }
    k += 1;
    slot = slot + 1 === cap ? 0 : slot + 1;
    let gap = 0;
    while (k <= last) {
      const size = Math.min(BLOCK, cap - slot);
      if ((slot & (BLOCK - 1)) === 0 && k + size - 1 <= last) {
        const m = this.blockMax[slot / BLOCK] as number;
        if (m > gap) gap = m;
        k += size;
        slot = slot + size === cap ? 0 : slot + size;
      } else {
        const g = this.gaps[slot] as number;
        if (g > gap) gap = g;
        k++;
        slot = slot + 1 === cap ? 0 : slot + 1;
      }
    }
    return gap;
  }
}
