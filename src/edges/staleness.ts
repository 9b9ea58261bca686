/**
 * How stale a read of the energy counter can be when it updates about as often as it is read, or
 * less often (where ./cadence.ts finds no lattice: long sampler periods). A counter that updates
 * every S ns shows at each read its value as of at most S before. S is bounded from the changes
 * themselves: two updates at least S apart lie between the read before one change and the read
 * that shows the next, so S is less than that span, and the least such span over a run bounds it.
 * A value then read standing still for longer than S can be has stalled: the counter stopped
 * counting while the card went on drawing.
 *
 * S is the card's, not the run's: a reset of the counter's value keeps it. A new sampler reads
 * quickly for its first ticks (native/sampler.h kLearningPeriodMs) so that S is bounded at once.
 *
 * Times are ns relative to the ring's epoch.
 */

/** Steps seen before the bound on S is used (each alone bounds it; two guard against a slip). */
const MIN_STEPS = 2;
/** The bound used is this much over the least span (a counter's updates may wander a little). */
const MARGIN = 1.1;

export class CounterStaleness {
  private least = Number.POSITIVE_INFINITY;
  private steps = 0;

  /**
   * A change first read by `hi`, where the read at `prevLo` still showed the value before the
   * previous change: the previous update and this one both lie between the two.
   */
  step(prevLo: number, hi: number): void {
    if (!Number.isFinite(prevLo)) return;
    const span = hi - prevLo;
    if (span > 0 && span < this.least) this.least = span;
    this.steps += 1;
  }

  /** How far before a read its value can date from (ns); +∞ while the run has not shown it. */
  bound(): number {
    return this.steps >= MIN_STEPS ? MARGIN * this.least : Number.POSITIVE_INFINITY;
  }

  /**
   * Why a value read first by `firstHi` and still at `seenLo` has stalled, or null: it stood
   * still for longer than the counter ever goes between updates.
   */
  stalled(firstHi: number, seenLo: number): string | null {
    const most = this.bound();
    const still = seenLo - firstHi;
    if (!(still > most)) return null;
    return (
      `the energy counter stood still for at least ${(still / 1e6).toFixed(0)} ms, where it updates ` +
      `at least every ${(most / 1e6).toFixed(0)} ms: a stalled counter`
    );
  }
}
