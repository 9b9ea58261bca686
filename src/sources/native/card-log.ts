import type { CardLogLayout, NativeCardLog } from "../../../binding.js";
import type { EventLog, EventLogEntry, LogScope } from "../../track/track.js";
import { MAX_PLAUSIBLE_W } from "../../vocabulary/measurement.js";
import { consistentCount, recheck, stableInSection } from "./seqlock.js";

/**
 * The addon's event log of one card (the seqlock protocol of binding.d.ts' CardLogLayout), shared
 * by every process of this user on the host: appended through the addon, read from the mapped
 * segment without a call per entry. Another process may write anything into that memory, so every
 * entry is checked before it is believed: one that no giul could have written is not an entry.
 */
/** Looks at an entry under the seqlock before giving up (see read). */
const READ_TRIES = 4096;
/** Participant slots in the segment's process table (native/card_log.h kParticipants). */
const SLOTS = 64;
const MAX_COUNT = 1e9;

export class NativeCardEventLog implements EventLog {
  private readonly f64: Float64Array;
  private readonly u32: Uint32Array;
  readonly capacity: number;
  readonly scope: LogScope;
  readonly reason: string | null;
  readonly epochNs: bigint;
  readonly slot: number;
  /** The count of entries last read consistently: entries before it are complete. */
  private complete = 0;

  constructor(
    private readonly handle: NativeCardLog,
    private readonly L: CardLogLayout,
    /** Why it is not host-wide, where the caller knows better than the addon. */
    reason: string | null = null,
  ) {
    this.f64 = new Float64Array(handle.buffer);
    this.u32 = new Uint32Array(handle.buffer);
    const capacity = this.f64[L.hCapacity] ?? 0;
    this.capacity = Number.isInteger(capacity) && capacity > 0 && capacity <= 1 << 20 ? capacity : 0;
    this.scope = handle.scope;
    this.reason = reason ?? handle.reason;
    this.epochNs = handle.epochNs;
    this.slot = handle.slot;
  }

  append(deltaWeight: number, deltaCount: number, idleW: number, kind: number): number {
    const k = this.handle.append(deltaWeight, deltaCount, idleW, kind);
    // Appended on this thread: complete, whatever another's append is doing now.
    if (k >= 0) this.saw(k + 1);
    return k;
  }

  reap(): number {
    return this.handle.reap();
  }

  pids(): readonly number[] {
    return this.handle.pids();
  }

  published(): number {
    const published = consistentCount(this.u32, this.f64, this.L.hPublished);
    // NaN: an append is inside its write (preempted there, perhaps): the entries known complete.
    if (Number.isNaN(published)) return this.complete;
    return Number.isInteger(published) && published >= 0 ? this.saw(published) : this.complete;
  }

  /**
   * Entry k into `out`; false when it is not (or no longer) held, or is not an entry giul wrote.
   * Appends elsewhere can keep the seqlock busy for a burst: up to READ_TRIES looks, tens of µs at
   * worst, so that a busy log is never taken for a lost entry; an entry known complete is read even
   * while an append is inside its write (./seqlock.ts stableInSection).
   */
  read(k: number, out: EventLogEntry): boolean {
    const L = this.L;
    const f = this.f64;
    if (this.capacity === 0) return false;
    const base = L.headerSlots + (k % this.capacity) * L.entrySlots;
    for (let tries = 0; tries < READ_TRIES; tries++) {
      const g = Atomics.load(this.u32, 0);
      const published = f[L.hPublished] ?? 0;
      if (g & 1) {
        if (!stableInSection(k, this.complete, published, this.capacity)) continue;
      } else if (k < 0 || k >= published || k < published - this.capacity) {
        if (recheck(this.u32, g) && Number.isInteger(published)) this.saw(published);
        return false;
      }
      out.t = f[base + L.eT] ?? Number.NaN;
      out.weightBefore = f[base + L.eWeightBefore] ?? Number.NaN;
      out.weightAfter = f[base + L.eWeightAfter] ?? Number.NaN;
      out.countAfter = f[base + L.eCountAfter] ?? Number.NaN;
      out.idleAfter = f[base + L.eIdleAfter] ?? Number.NaN;
      out.slot = f[base + L.eSlot] ?? Number.NaN;
      out.kind = f[base + L.eKind] ?? Number.NaN;
      if (recheck(this.u32, g)) {
        if ((g & 1) === 0) this.saw(published);
        return plausible(out);
      }
    }
    return false;
  }

  /** A count read consistently: the entries known complete (never going back). */
  private saw(published: number): number {
    if (published > this.complete) this.complete = published;
    return this.complete;
  }
}

/** Whether an entry is one giul could have written (a hostile or broken writer's is not). */
export function plausible(e: EventLogEntry): boolean {
  return (
    Number.isFinite(e.t) &&
    e.t >= 0 &&
    e.weightBefore >= 0 &&
    e.weightBefore < Number.POSITIVE_INFINITY &&
    e.weightAfter >= 0 &&
    e.weightAfter < Number.POSITIVE_INFINITY &&
    Number.isInteger(e.countAfter) &&
    e.countAfter >= 0 &&
    e.countAfter <= MAX_COUNT &&
    (e.countAfter === 0 ? e.weightAfter === 0 : e.weightAfter > 0) &&
    (e.countAfter === 0 ? Number.isNaN(e.idleAfter) : e.idleAfter >= 0 && e.idleAfter <= MAX_PLAUSIBLE_W) &&
    Number.isInteger(e.slot) &&
    e.slot >= 0 &&
    e.slot < SLOTS &&
    Number.isInteger(e.kind) &&
    e.kind >= 1 &&
    e.kind <= 6
  );
}
