/**
 * How stale a read of the energy counter can be: a counter that updates at least every S ns shows
 * at each read its value as of at most S before. S is bounded from the steps themselves, and only
 * from steps whose reads place both updates well (each read interval at most a quarter of the
 * time between them: a new sampler reads every 2 ms for its first 250 ms, native/sampler.h, so at any
 * period S is bounded at once): such a step's updates lie at most its outer span apart, and S is
 * 1.1 × the longest such span over the last 64 of them. Real counters wander off any grid and
 * change cadence, so S is a checked assumption, never a fact: a value read standing still for
 * longer than S says S was wrong or the counter stalled, and which of the two is judged from what
 * was read where the counter goes on (./fusion.ts). Either way S then covers what was seen, so
 * nothing learned here keeps a card from being measured.
 *
 * Times are ns relative to the ring's epoch.
 */

/** Well-placed steps seen before S is used. */
const MIN_STEPS = 2;
/** The bound used is this much over the longest span (a little wander beyond what was seen). */
const MARGIN = 1.1;
/** Steps remembered: S follows a cadence that gets faster within this many steps. */
const KEEP = 64;

export class CounterStaleness {
  private readonly spanNs = new Float64Array(KEEP);
  /** The same steps' update intervals, each from the middle of one update's reads to the next's. */
  private readonly midNs = new Float64Array(KEEP);
  private steps = 0;
  /** The longest of the spans kept (recomputed as they change, not at every read). */
  private longest = 0;
  /** The longest stand that went on without a fault, or was a fault where reads could not judge it. */
  private stood = 0;

  /**
   * A step: the previous update lies in (prevLo, prevHi], this one in (lo, hi]. Counted when each
   * read interval is at most a quarter of the time between them (the step's inner span): a read
   * that came late (a starved thread) would only loosen S.
   */
  step(prevLo: number, prevHi: number, lo: number, hi: number): void {
    if (!Number.isFinite(prevLo)) return;
    if (!this.placed(prevLo, prevHi, lo, hi)) return;
    const slot = this.steps % KEEP;
    const dropped = this.spanNs[slot] as number;
    const span = hi - prevLo;
    this.spanNs[slot] = span;
    this.midNs[slot] = (lo + hi - prevLo - prevHi) / 2;
    this.steps += 1;
    if (span >= this.longest) this.longest = span;
    else if (dropped >= this.longest) {
      // The longest left the window: the longest of those kept.
      let most = 0;
      const n = Math.min(this.steps, KEEP);
      for (let i = 0; i < n; i++) most = Math.max(most, this.spanNs[i] as number);
      this.longest = most;
    }
  }

  /** Whether the reads place a step's two updates well (see step). */
  placed(prevLo: number, prevHi: number, lo: number, hi: number): boolean {
    const inner = lo - prevHi;
    return inner > 0 && 4 * (prevHi - prevLo) <= inner && 4 * (hi - lo) <= inner;
  }

  /** How far before a read its value can date from (ns); +∞ while too few steps were placed. */
  bound(): number {
    if (this.steps < MIN_STEPS) return Number.POSITIVE_INFINITY;
    return MARGIN * Math.max(this.longest, this.stood);
  }

  /**
   * How often the counter updates, for diagnosis: least, median and most of the last 64 well-placed
   * steps' intervals (ns; each to within its reads, at most a quarter of it), and how many there
   * were; null before any.
   */
  intervals(): { least: number; median: number; most: number; count: number } | null {
    const n = Math.min(this.steps, KEEP);
    if (n === 0) return null;
    const sorted = Array.from(this.midNs.subarray(0, n)).sort((a, b) => a - b);
    return {
      least: sorted[0] as number,
      median: sorted[n >> 1] as number,
      most: sorted[n - 1] as number,
      count: this.steps,
    };
  }

  /** Whether a value read first by `firstHi` and still at `seenLo` stood still for longer than S. */
  standsLong(firstHi: number, seenLo: number): boolean {
    return seenLo - firstHi > this.bound();
  }

  /** A stand of `stillNs` was seen and judged: S covers it from now on. */
  widen(stillNs: number): void {
    if (stillNs > this.stood) this.stood = stillNs;
  }

  /** Why a value stood still from `firstHi` to `seenLo`, where S said it could not. */
  describe(firstHi: number, seenLo: number): string {
    return (
      `the energy counter stood still for at least ${((seenLo - firstHi) / 1e6).toFixed(0)} ms, where it ` +
      `had updated at least every ${(this.bound() / 1e6).toFixed(0)} ms, and the reads around it were too ` +
      "far apart to tell a stall from a change of cadence: a stalled counter"
    );
  }
}
