import type { LedgerLayout, NativeSampler } from "../../../binding.js";
import type { EventLog, EventLogEntry } from "../../track/track.js";
import { consistentCount, recheck, stableInSection } from "./seqlock.js";

/**
 * The addon's process-wide event log of one card (the seqlock protocol of binding.d.ts'
 * LedgerLayout): every JavaScript environment appends its windows' events through its own sampler
 * reference, and reads everyone's from the shared buffer without a call per entry.
 */
/** Looks at an entry under the seqlock before giving up (see NativeEventLog.read). */
const READ_TRIES = 4096;

export class NativeEventLog implements EventLog {
  private readonly f64: Float64Array;
  private readonly u32: Uint32Array;
  readonly capacity: number;
  /** The count of entries last read consistently: entries before it are complete. */
  private complete = 0;

  constructor(
    private readonly sampler: NativeSampler,
    private readonly L: LedgerLayout,
  ) {
    this.f64 = new Float64Array(sampler.ledger);
    this.u32 = new Uint32Array(sampler.ledger);
    this.capacity = this.f64[L.hCapacity] ?? 0;
  }

  /** ledgerAppend (binding.d.ts): the changes of weight and count, an open's idle floor, the tags. */
  append(dw: number, dc: number, idleW: number, owner?: number, own?: number, kind?: number): number {
    // The addon takes the tags as numbers or not at all. Called with its arguments named, not
    // spread: a spread call builds an array at each of a window's four appends.
    const k =
      owner === undefined
        ? this.sampler.ledgerAppend(dw, dc, idleW)
        : this.sampler.ledgerAppend(dw, dc, idleW, owner, own, kind);
    // Appended on this thread: complete, whatever another thread's append is doing now.
    if (k >= 0) this.saw(k + 1);
    return k;
  }

  get refId(): number {
    return this.sampler.refId;
  }

  get epochNs(): bigint {
    return this.sampler.epochNs;
  }

  published(): number {
    const published = consistentCount(this.u32, this.f64, this.L.hPublished);
    // NaN: an append is inside its write (preempted there, perhaps): the entries known complete.
    return Number.isNaN(published) ? this.complete : this.saw(published);
  }

  idleW(): number {
    return this.header(this.L.hIdleW);
  }

  openCount(): number {
    return this.header(this.L.hOpen);
  }

  /**
   * Entry k into `out`; false when it is not (or no longer) held. Appends from other threads can
   * keep the seqlock busy for a burst (each holds it ~0.1 µs): up to READ_TRIES looks, tens of µs
   * at worst, so that a busy log is never taken for a lost entry; and an entry known complete is
   * read even while an append is inside its write (./seqlock.ts stableInSection).
   */
  read(k: number, out: EventLogEntry): boolean {
    const L = this.L;
    const f = this.f64;
    const base = L.headerSlots + (k % this.capacity) * L.entrySlots;
    for (let tries = 0; tries < READ_TRIES; tries++) {
      const g = Atomics.load(this.u32, 0);
      const published = f[L.hPublished] ?? 0;
      if (g & 1) {
        // An entry known complete before this append is read all the same (./seqlock.ts).
        if (!stableInSection(k, this.complete, published, this.capacity)) continue;
      } else if (k < 0 || k >= published || k < published - this.capacity) {
        if (recheck(this.u32, g)) this.saw(published);
        return false;
      }
      out.t = f[base + L.eT] ?? Number.NaN;
      out.ringHead = f[base + L.eRingHead] ?? 0;
      out.weightBefore = f[base + L.eWeightBefore] ?? Number.NaN;
      out.weightAfter = f[base + L.eWeightAfter] ?? Number.NaN;
      out.countAfter = f[base + L.eCountAfter] ?? 0;
      out.ref = f[base + L.eRef] ?? Number.NaN;
      out.owner = f[base + L.eOwner] ?? Number.NaN;
      out.own = f[base + L.eOwn] ?? Number.NaN;
      out.kind = f[base + L.eKind] ?? Number.NaN;
      out.idleW = f[base + L.eIdleW] ?? Number.NaN;
      if (recheck(this.u32, g)) {
        if ((g & 1) === 0) this.saw(published);
        return true;
      }
    }
    return false;
  }

  /** A count read consistently: the entries known complete (never going back). */
  private saw(published: number): number {
    if (published > this.complete) this.complete = published;
    return this.complete;
  }

  private header(slot: number): number {
    for (let tries = 0; tries < 64; tries++) {
      const g = Atomics.load(this.u32, 0);
      if (g & 1) continue;
      const value = this.f64[slot] ?? Number.NaN;
      if (recheck(this.u32, g)) return value;
    }
    return this.f64[slot] ?? Number.NaN;
  }
}
