/**
 * Where inside a counter step the energy went: the power readings as a shape, each refresh of the
 * sensor (a new value) taken as the power from its instant to the next, moved earlier by a lag the
 * counter chooses. Real sensors show power late: a held point sample by about half its hold, an
 * average over its window by half the window more (A100/H100: 25 ms of every 100 ms; a 1 s
 * average by half a second). Which lag fits is checked against the counter, step by step: the
 * lag under which the counter's steps keep the steadiest ratio to the readings' energy over the
 * same steps is the one used. Nothing here bounds anything: ./fusion.ts uses the shape only to
 * place its estimate inside a bound the counter gives.
 *
 * Times are ns relative to the ring's epoch, power mW, energy mJ.
 */

/** The lags tried (ns): none, a few ms (a fresh reading), a held or averaged sensor's, a 1 s average's. */
const LAGS_NS = [0, 2.5e6, 5e6, 10e6, 20e6, 30e6, 40e6, 50e6, 65e6, 80e6, 100e6, 150e6, 250e6, 500e6];
/** Steps remembered per lag for its score, and seen before the score is trusted over no lag. */
const STEPS = 32;
const MIN_STEPS = 8;
/** The longest an edge waits for the readings to catch up with it (ns). */
const MAX_WAIT_NS = 150e6;
/** Refreshes remembered (a ring; the oldest are dropped in halves). */
const KEEP = 8192;

export class PowerShape {
  /** Each refresh: its instant, its value, and the readings' energy from the first to it. */
  private at: number[] = [];
  private mw: number[] = [];
  private cum: number[] = [];
  private lastValue = Number.NaN;
  private lastRead = Number.NaN;
  /** ln(counter step / readings' energy) for the last STEPS steps, per lag. */
  private readonly ratios = new Float64Array(LAGS_NS.length * STEPS);
  private steps = 0;
  private lag = 0;

  /** A reading: its instant (ns) and value (mW; NaN: none, the last value goes on). */
  push(t: number, mw: number): void {
    if (Number.isFinite(mw) && mw !== this.lastValue) {
      // The sensor refreshed after the read before: its instant is taken halfway.
      const at = Number.isFinite(this.lastRead) ? (this.lastRead + t) / 2 : t;
      const n = this.at.length;
      const cum =
        n === 0
          ? 0
          : (this.cum[n - 1] as number) +
            ((this.mw[n - 1] as number) * (at - (this.at[n - 1] as number))) / 1e9;
      this.at.push(at);
      this.mw.push(mw);
      this.cum.push(cum);
      this.lastValue = mw;
      if (this.at.length > KEEP) {
        const drop = KEEP / 2;
        this.at = this.at.slice(drop);
        this.mw = this.mw.slice(drop);
        this.cum = this.cum.slice(drop);
      }
    }
    this.lastRead = t;
  }

  /** The readings' energy over (x, y) under the lag in use (mJ; NaN where no reading covers x). */
  energy(x: number, y: number): number {
    return this.energyAt(x, y, this.lag);
  }

  /**
   * Whether the readings reach far enough past `t` to shape the energy up to it: a sensor that
   * shows power late has not shown what was drawn at `t` until its lag later (waited for up to
   * MAX_WAIT_NS; a slower one is extrapolated, its last value going on).
   */
  covers(t: number): boolean {
    return !(this.lastRead < t + Math.min(this.lag, MAX_WAIT_NS));
  }

  /**
   * The readings' power at `t` under the lag in use (mW; NaN before the first refresh), and the
   * gain the last steps agree on under it (counter energy over the readings').
   */
  levelAt(t: number): number {
    const k = this.index(t + this.lag);
    return k < 0 ? Number.NaN : (this.mw[k] as number);
  }

  /** How many refreshes the readings show inside (x, y) under the lag in use. */
  changesBetween(x: number, y: number): number {
    return Math.max(0, this.index(y + this.lag) - this.index(x + this.lag));
  }

  gain(): number {
    const i = LAGS_NS.indexOf(this.lag);
    const n = Math.min(this.steps, STEPS);
    if (n < MIN_STEPS) return 1;
    let mean = 0;
    for (let j = 0; j < n; j++) mean += this.ratios[i * STEPS + j] as number;
    return Math.exp(mean / n);
  }

  /** The lag in use (ns), for diagnosis. */
  lagNs(): number {
    return this.lag;
  }

  /** A closed counter step: `dvMj` drawn between update instants `a` and `b` (ns). */
  check(dvMj: number, a: number, b: number): void {
    if (!(dvMj > 0) || !(b > a)) return;
    const slot = this.steps % STEPS;
    for (let i = 0; i < LAGS_NS.length; i++) {
      const e = this.energyAt(a, b, LAGS_NS[i] as number);
      if (!(e > 0)) return;
      this.ratios[i * STEPS + slot] = Math.log(dvMj / e);
    }
    this.steps += 1;
    if (this.steps < MIN_STEPS) return;
    const n = Math.min(this.steps, STEPS);
    let best = Number.POSITIVE_INFINITY;
    for (let i = 0; i < LAGS_NS.length; i++) {
      let mean = 0;
      for (let j = 0; j < n; j++) mean += this.ratios[i * STEPS + j] as number;
      mean /= n;
      let spread = 0;
      for (let j = 0; j < n; j++) spread += Math.abs((this.ratios[i * STEPS + j] as number) - mean);
      if (spread < best) {
        best = spread;
        this.lag = LAGS_NS[i] as number;
      }
    }
  }

  private energyAt(x: number, y: number, lag: number): number {
    return this.cumulative(y + lag) - this.cumulative(x + lag);
  }

  /** The readings' energy from the first refresh held to `t` (mJ); NaN before it. */
  private cumulative(t: number): number {
    const k = this.index(t);
    if (k < 0) return Number.NaN;
    return (this.cum[k] as number) + ((this.mw[k] as number) * (t - (this.at[k] as number))) / 1e9;
  }

  /** The last refresh at or before `t`, or −1. */
  private index(t: number): number {
    const at = this.at;
    let lo = 0;
    let hi = at.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((at[mid] as number) <= t) lo = mid + 1;
      else hi = mid;
    }
    return lo - 1;
  }
}
