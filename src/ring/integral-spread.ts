/**
 * The bound of an integral of power readings (no energy counter: nvml_sampler, smi_sampler,
 * amdsmi_sampler) over a span [a, b]. Each change of the readings, between reads at t0 and t1, is
 * taken as one change of the card's power (at most one between two reads: the integral's stated
 * limit) at an instant the reads cannot place: at t1 at the latest and, since a reading lags the
 * card by up to `lagNs` (../ring/held.ts lagNs), at t0 − lagNs at the earliest. The integral ramps
 * it from t0 to t1, so it is off by at most the change's height over dt/2 + lagNs of time, and
 * only inside [a, b]. With no lag that is the trapezoid's |ΔP| × dt / 2.
 */

/**
 * A ring's samples as the bound walks them, each read once (../ring/held.ts keeps them): stamps (ns
 * after the ring's epoch; NaN where a sample could not be read) and power (mW; NaN where its read
 * failed), by index modulo `capacity`, from `oldest` to `next` − 1.
 */
export interface IntegralColumns {
  readonly ts: Float64Array;
  readonly ps: Float64Array;
  readonly capacity: number;
  readonly oldest: number;
  readonly next: number;
}

/**
 * One pass over the samples from `kFrom` (the one at or before `a`) until one reads at b + lagNs or
 * later (a closing edge waits for it: ./edge.ts): the bound (mJ) and the largest interval between
 * the samples around and inside the span (ns). Times in ns after the ring's epoch.
 */
export function integralSpread(
  cols: IntegralColumns,
  a: number,
  b: number,
  kFrom: number,
  lagNs: number,
): { maxGap: number; spreadMj: number } {
  let maxGap = 0;
  let spreadMj = 0;
  let prevT = Number.NaN;
  let prevP = Number.NaN;
  const { ts, ps, capacity } = cols;
  for (let k = Math.max(kFrom, cols.oldest); k < cols.next; k++) {
    const t = ts[k % capacity] as number;
    const p = ps[k % capacity] as number;
    // A sample not read, or a failed read (past the closing edge, its fault is in no window's
    // check): the change across it spans the longer interval.
    if (Number.isNaN(t) || Number.isNaN(p)) continue;
    if (!Number.isNaN(prevT)) {
      if (prevT >= b + lagNs) break;
      const dt = t - prevT;
      if (prevT < b && dt > maxGap) maxGap = dt;
      const inside = Math.min(b, t) - Math.max(a, prevT - lagNs);
      if (inside > 0) spreadMj += changeSpreadMj(p - prevP, dt, lagNs, inside);
    }
    prevT = t;
    prevP = p;
  }
  return { maxGap, spreadMj };
}

/**
 * What one change of the readings, `dpMw` between two reads `dtNs` apart, may put off the integral
 * (mJ): its height over dt/2 + lag of time, or over `insideNs` where less of it lies in the span.
 */
export function changeSpreadMj(
  dpMw: number,
  dtNs: number,
  lagNs: number,
  insideNs = Number.POSITIVE_INFINITY,
): number {
  return (Math.abs(dpMw) * Math.min(dtNs / 2 + lagNs, insideNs)) / 1e9;
}
