/**
 * When the energy counter updates. A change of the counter between two reads says that an update
 * happened in between, and no sooner: the instant is known only to within the read interval. Real
 * counters update on a regular cadence (an update every S ns, at φ + jS), so many such intervals
 * together pin the lattice: each observed change lies on it, and intersecting them narrows each
 * update's instant far below one read interval — provided the reads fall at varied offsets from
 * the lattice, which the sampling thread's dithered schedule ensures (native/sampler.cc).
 *
 * The period S is fitted now and then over the last FIT changes: the periods for which every one
 * of them contains a lattice point (a slow drift of the card's clock is a slightly different S).
 * An update's instant is then the intersection, over the changes around it, of each change moved
 * by its number of periods. The lattice is assumed only where it is consistent: when no period
 * fits (an irregular cadence), when an intersection comes out empty, or when the counter changes
 * about as often as it is read, each update keeps its own read interval as its bound.
 *
 * Times are ns relative to the ring's epoch.
 */

/** An update happened in (lo, hi]. */
export interface Instant {
  readonly lo: number;
  readonly hi: number;
}

/** Changes used to fit the period, and changes on each side of an update that narrow it. */
const FIT = 64;
const SIDE = 32;
/** Fewest changes that must agree on one lattice before it is trusted. */
export const MIN_LOCK = 48;
/** The period is fitted again after this many new changes. */
const REFIT = 16;
/**
 * Margin kept around a locked instant, as a share of the median read interval: the lattice is
 * taken to hold to within it (an update a little off the lattice, by less than the changes could
 * show, stays inside the bound).
 */
const MARGIN_SHARE = 0.02;
const MARGIN_MIN_NS = 250e3;
const SEARCH_STEPS = 48;
/**
 * No lattice is looked for while the median read interval exceeds this share of the period (the
 * share at which ./staleness.ts stops counting a step as well read).
 */
export const COARSE = 0.25;

/** The changes of one run of the counter (no reset or fault between them), in time order. */
export class CounterCadence {
  private lo: number[] = [];
  private hi: number[] = [];
  /** Each change's lattice index (periods from the first change). */
  private m: number[] = [];
  /** The fitted period range (ns), NaN when none fits; the median width of a change. */
  private sLo = Number.NaN;
  private sHi = Number.NaN;
  private width = Number.NaN;
  private fitted = 0;
  /** A fit found no lattice: the cadence is irregular, and stays so for this run of the counter. */
  private irregular = false;
  /** Scratch for medians (no array made per change). */
  private readonly scratch = new Float64Array(FIT);
  private cacheLo: number[] = [];
  private cacheHi: number[] = [];
  private cacheKey: number[] = [];
  private version = 0;

  /**
   * For diagnosis: the fitted period range (ns), null when none fits yet or the cadence is
   * irregular; whether it is; the median width of a change's read interval, and of a locked
   * instant over the last changes (ns).
   */
  report(): {
    periodNs: [number, number] | null;
    irregular: boolean;
    readIntervalNs: number;
    lockedNs: number;
    changes: number;
  } {
    const widths = this.scratch;
    const w = { lo: 0, hi: 0 };
    let count = 0;
    for (let i = Math.max(0, this.lo.length - FIT); i < this.lo.length; i++) {
      this.instantInto(i, w);
      widths[count++] = w.hi - w.lo;
    }
    return {
      periodNs: Number.isFinite(this.sLo) ? [this.sLo, this.sHi] : null,
      irregular: this.irregular,
      readIntervalNs: this.width,
      lockedNs: medianOf(widths, count),
      changes: this.lo.length,
    };
  }

  /** Changes held. */
  get length(): number {
    return this.lo.length;
  }

  /** Appends the next change (in time order). */
  push(lo: number, hi: number): void {
    const n = this.lo.length;
    let m = 0;
    if (n > 0) {
      const mid = (lo + hi) / 2;
      const prevMid = ((this.lo[n - 1] as number) + (this.hi[n - 1] as number)) / 2;
      const s = Number.isFinite(this.sLo) ? (this.sLo + this.sHi) / 2 : this.medianDiff();
      const steps = s > 0 ? Math.max(1, Math.round((mid - prevMid) / s)) : 1;
      m = (this.m[n - 1] as number) + steps;
    }
    this.lo.push(lo);
    this.hi.push(hi);
    this.m.push(m);
    this.cacheKey.push(-1);
    this.cacheLo.push(Number.NaN);
    this.cacheHi.push(Number.NaN);
    if (this.lo.length >= MIN_LOCK && this.lo.length - this.fitted >= REFIT) this.fitPeriod();
  }

  /** Change i's update instant, narrowed by the lattice where one is consistent. */
  instant(i: number): Instant {
    const out = { lo: 0, hi: 0 };
    this.instantInto(i, out);
    return out;
  }

  /** {@link instant} into `out` (the edge's path allocates nothing). */
  instantInto(i: number, out: { lo: number; hi: number }): void {
    const ownLo = this.lo[i] as number;
    const ownHi = this.hi[i] as number;
    out.lo = ownLo;
    out.hi = ownHi;
    if (!Number.isFinite(this.sLo)) return;
    const to = Math.min(this.lo.length - 1, i + SIDE);
    const key = this.version * 64 + (to - i);
    if (this.cacheKey[i] === key) {
      out.lo = this.cacheLo[i] as number;
      out.hi = this.cacheHi[i] as number;
      return;
    }
    const from = Math.max(0, i - SIDE);
    const mi = this.m[i] as number;
    let lower = Number.NEGATIVE_INFINITY;
    let upper = Number.POSITIVE_INFINITY;
    for (let j = from; j <= to; j++) {
      const d = (this.m[j] as number) - mi;
      const a = this.lo[j] as number;
      const b = this.hi[j] as number;
      // Safe over every period in the fitted range: each change's constraint at its loosest.
      const l = Math.min(a - d * this.sLo, a - d * this.sHi);
      const u = Math.max(b - d * this.sLo, b - d * this.sHi);
      if (l > lower) lower = l;
      if (u < upper) upper = u;
    }
    if (lower <= upper) {
      const margin = Math.max(MARGIN_MIN_NS, MARGIN_SHARE * this.width);
      const lo = Math.max(ownLo, lower - margin);
      const hi = Math.min(ownHi, upper + margin);
      if (lo <= hi) {
        out.lo = lo;
        out.hi = hi;
      }
    }
    this.cacheKey[i] = key;
    this.cacheLo[i] = out.lo;
    this.cacheHi[i] = out.hi;
  }

  /** Drops the oldest changes (the first `n`); indices shift down by n. */
  drop(n: number): void {
    this.lo = this.lo.slice(n);
    this.hi = this.hi.slice(n);
    this.m = this.m.slice(n);
    this.cacheLo = this.cacheLo.slice(n);
    this.cacheHi = this.cacheHi.slice(n);
    this.cacheKey = this.cacheKey.slice(n);
    this.fitted = Math.max(0, this.fitted - n);
  }

  /** The median interval between the last FIT changes' midpoints (every push asks it until a fit). */
  private medianDiff(): number {
    const n = this.lo.length;
    const diffs = this.scratch;
    let count = 0;
    for (let j = Math.max(1, n - FIT); j < n; j++) {
      diffs[count++] =
        ((this.lo[j] as number) + (this.hi[j] as number)) / 2 -
        ((this.lo[j - 1] as number) + (this.hi[j - 1] as number)) / 2;
    }
    return medianOf(diffs, count);
  }

  /** Fits the period over the last FIT changes (see the module's comment). */
  private fitPeriod(): void {
    if (this.irregular) return;
    const n = this.lo.length;
    this.fitted = n;
    this.version += 1;
    const from = Math.max(0, n - FIT);
    const s0 = this.medianDiff();
    const widths = this.scratch;
    let count = 0;
    for (let j = from; j < n; j++) widths[count++] = (this.hi[j] as number) - (this.lo[j] as number);
    this.width = medianOf(widths, count);
    this.sLo = Number.NaN;
    this.sHi = Number.NaN;
    // Reads too far apart for the updates (COARSE) place no lattice: the changes could not even be
    // numbered reliably (a whole period between two changes is within their reads' reach); and
    // each change must be close to a whole number of periods from the one before.
    if (!(s0 > 0) || this.width > COARSE * s0) return;
    for (let j = from + 1; j < n; j++) {
      const mid = ((this.lo[j] as number) + (this.hi[j] as number)) / 2;
      const prev = ((this.lo[j - 1] as number) + (this.hi[j - 1] as number)) / 2;
      const steps = (mid - prev) / s0;
      const whole = (this.m[j] as number) - (this.m[j - 1] as number);
      if (Math.abs(steps - whole) > 0.35) {
        this.irregular = true;
        return;
      }
    }
    // For a period S the last change's update lies in (max_j(lo_j − d_j S), min_j(hi_j − d_j S)]:
    // the gap between the two is concave in S, so the periods that keep it open form one interval.
    const ref = this.m[n - 1] as number;
    const gap = (s: number): number => {
      let lower = Number.NEGATIVE_INFINITY;
      let upper = Number.POSITIVE_INFINITY;
      for (let j = from; j < n; j++) {
        const d = (this.m[j] as number) - ref;
        const l = (this.lo[j] as number) - d * s;
        const u = (this.hi[j] as number) - d * s;
        if (l > lower) lower = l;
        if (u < upper) upper = u;
      }
      return upper - lower;
    };
    const a = s0 * 0.9;
    const b = s0 * 1.1;
    const best = argmax(gap, a, b);
    if (!(gap(best) >= 0)) {
      this.irregular = true; // no lattice fits: an irregular cadence
      return;
    }
    let lo = a;
    let hi = best;
    for (let k = 0; k < SEARCH_STEPS; k++) {
      const mid = (lo + hi) / 2;
      if (gap(mid) >= 0) hi = mid;
      else lo = mid;
    }
    const sLo = hi;
    lo = best;
    hi = b;
    for (let k = 0; k < SEARCH_STEPS; k++) {
      const mid = (lo + hi) / 2;
      if (gap(mid) >= 0) lo = mid;
      else hi = mid;
    }
    this.sLo = sLo;
    this.sHi = lo;
  }
}

/** The argument of the largest value of a concave function on [a, b] (golden-section search). */
function argmax(f: (x: number) => number, a: number, b: number): number {
  const r = 0.6180339887498949;
  let x1 = b - r * (b - a);
  let x2 = a + r * (b - a);
  let f1 = f(x1);
  let f2 = f(x2);
  for (let n = 0; n < SEARCH_STEPS; n++) {
    if (f1 < f2) {
      a = x1;
      x1 = x2;
      f1 = f2;
      x2 = a + r * (b - a);
      f2 = f(x2);
    } else {
      b = x2;
      x2 = x1;
      f2 = f1;
      x1 = b - r * (b - a);
      f1 = f(x1);
    }
  }
  return (a + b) / 2;
}

/**
 * The middle value (the element at n >> 1 once sorted) of the first `n` of
 * `xs`, found in place by selection rather than a sort; `xs` is reordered.
 */
export function medianOf(xs: Float64Array, n: number): number {
  if (n === 0) return Number.NaN;
  const k = n >> 1;
  let lo = 0;
  let hi = n - 1;
  while (lo < hi) {
    const pivot = xs[(lo + hi) >> 1] as number;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while ((xs[i] as number) < pivot) i++;
      while ((xs[j] as number) > pivot) j--;
      if (i <= j) {
        const t = xs[i] as number;
        xs[i] = xs[j] as number;
        xs[j] = t;
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return xs[k] as number;
  }
  return xs[k] as number;
}
