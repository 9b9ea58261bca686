/**
 * What a ring's sampler does once no window uses it (./ring-track.ts): it keeps its period a while
 * (windows at thousands a second follow each other), then a counter's sampler backs off to a
 * slower period for a minute, and only then stops; an integral of power stops at once, keeping
 * nothing a later window needs. One timer, pushed back at each release rather than made anew for
 * each window.
 */

/** After the last window leaves, the sampler keeps its period this long (ms). */
const LINGER_MS = 5_000;
/**
 * A backed-off sampler stops after this much more with no window (ms): until then the fused
 * counter keeps its lock on the counter's cadence and its reading of the power sensor, which a new
 * sampler needs about five seconds of updates to learn again (48 changes of a 100 ms counter:
 * ./cadence.ts), so that windows a few seconds apart are bounded as tightly as windows in a crowd.
 */
const IDLE_MS = 60_000;
/** The longest period a backed-off sampler reads at (ms). */
const IDLE_PERIOD_MAX_MS = 50;

/**
 * How slowly a counter's sampler reads with no window open (ms; null: no slower than `periodMs`,
 * the windows' period, or not a counter): a sixth of the counter's step (less two periods, the
 * step being estimated from above). Every update is still seen between two reads (reads are
 * dithered up to 1.618 periods apart: native/sampler.cc), and about six reads a step keep each
 * update's instant locked to about a millisecond (./cadence.ts intersects the changes' reads).
 */
export function idlePeriodMs(
  column: "energy" | "integral",
  counterStepNs: number,
  periodMs: number,
): number | null {
  if (column !== "energy" || !(counterStepNs > 0)) return null;
  const ms = Math.min(IDLE_PERIOD_MAX_MS, Math.floor((counterStepNs / 1e6 - 2 * periodMs) / 6));
  return ms > periodMs ? ms : null;
}

/** What the linger asks of its track. */
export interface LingerHost {
  /** Whether a window uses the ring (then the timer that fires does nothing). */
  busy(): boolean;
  /** The period to back off to (idlePeriodMs), or null to stop at once. */
  slower(): number | null;
  setPeriod(periodMs: number): void;
  /** Stop the sampler. */
  shut(): void;
}

export class RingLinger {
  private timer: NodeJS.Timeout | null = null;
  /** The period the sampler backed off to (ms), or null while it has not. */
  private idlePeriod: number | null = null;

  constructor(private readonly host: LingerHost) {}

  /** The last window left the running ring. */
  released(): void {
    if (this.timer !== null && this.idlePeriod === null) this.timer.refresh();
    else this.arm(LINGER_MS);
  }

  /**
   * A window came: true when the sampler had backed off (the caller gives it the windows' period
   * again; the stop timer goes, and the next release arms the linger afresh).
   */
  resumed(): boolean {
    if (this.idlePeriod === null) return false;
    this.idlePeriod = null;
    this.clear();
    return true;
  }

  /** The sampler stopped (or never ran): nothing pending. */
  reset(): void {
    this.idlePeriod = null;
    this.clear();
  }

  private clear(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(ms: number): void {
    this.clear();
    this.timer = setTimeout(() => this.fire(), ms);
    this.timer.unref();
  }

  private fire(): void {
    this.timer = null;
    if (this.host.busy()) return;
    if (this.idlePeriod === null) {
      const slower = this.host.slower();
      if (slower !== null) {
        this.idlePeriod = slower;
        this.host.setPeriod(slower);
        this.arm(IDLE_MS);
        return;
      }
    }
    this.idlePeriod = null;
    this.host.shut();
  }
}
