/**
 * Exponential backoff: the delay before the next try after `n` failures in a row is
 * `min(maxMs, baseMs × 2^n)`. It keeps no clock, so each user waits on its own (Date.now,
 * performance.now, a timer). Imports nothing of ours.
 */
export class Backoff {
  private count = 0;

  constructor(
    /** The delay after the first failure (ms). */
    readonly baseMs: number,
    /** The longest delay (ms). */
    readonly maxMs: number,
  ) {}

  /** Failures in a row so far. */
  get failures(): number {
    return this.count;
  }

  /** The delay the next failure will get (ms), without counting one. */
  nextDelayMs(): number {
    return Math.min(this.maxMs, this.baseMs * 2 ** Math.min(this.count, 30));
  }

  /** Counts a failure and returns the delay before the next try (ms). */
  fail(): number {
    const delay = this.nextDelayMs();
    this.count += 1;
    return delay;
  }

  /** A success (or a healthy run): the next failure starts again from `baseMs`. */
  reset(): void {
    this.count = 0;
  }
}
