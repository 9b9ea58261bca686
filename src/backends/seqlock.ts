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
