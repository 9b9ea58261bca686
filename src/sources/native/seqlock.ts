/**
 * The closing check of a seqlock read over memory the addon shares with JavaScript (the ring, the
 * event log): word 0 of `u32` is the generation, odd while a writer writes. A plain acquire load
 * would let the payload loads before it be performed after it on weakly ordered CPUs (ARM64),
 * accepting a torn read; a compare-exchange of the word with itself is a full barrier there, and
 * leaves the value unchanged.
 */
export function recheck(u32: Uint32Array, g: number): boolean {
  return Atomics.compareExchange(u32, 0, g, g) === g;
}

/**
 * Whether slot k may be read while a writer is inside a write section (the generation odd and
 * unchanged across the read). A section writes one slot, the next one (k = `complete`, the count
 * last read consistently, or later), and the header: so slot k is untouched by it when it was
 * complete before and is not the slot being overwritten, the oldest. Which one that is depends on
 * whether the section has bumped the header's count yet (`countNow`, read in the section): the
 * oldest two are left alone.
 *
 * A writer preempted inside its section keeps the generation odd for as long as the scheduler
 * keeps it off the core (milliseconds on a loaded host). Before, a reader gave up after its tries
 * and took a sample still held for one lost: an edge then failed with "the window outlived the
 * sampler's history" (test/meter.sequential.test.ts, under load).
 *
 * Reading the payload under an odd generation is sound because the writer opens its section with
 * a release store (native/ring.cc, native/ledger_log.cc): the acquire load that saw the odd value
 * synchronizes with it, so every slot completed before is visible.
 */
export function stableInSection(k: number, complete: number, countNow: number, capacity: number): boolean {
  return k >= 0 && k < complete && k > countNow - capacity;
}

/**
 * A count in the header (slot `slot` of `f64`: the ring's head, the log's published entries) read
 * consistently, or NaN while a writer is inside a write for all of a few looks (then what the
 * reader last knew complete is the count to use: the header's may already count the slot being
 * written).
 */
export function consistentCount(u32: Uint32Array, f64: Float64Array, slot: number): number {
  for (let tries = 0; tries < 64; tries++) {
    const g = Atomics.load(u32, 0);
    if (g & 1) continue;
    const count = f64[slot] ?? 0;
    if (recheck(u32, g)) return count;
  }
  return Number.NaN;
}
