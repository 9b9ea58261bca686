import type { CounterFusion } from "../edges/fusion.js";
import { interpolationErr } from "../edges/uncertainty.js";
import { FLAG, type Sample, type SampleRing } from "../track/ring.js";
import type { Edge } from "../track/track.js";
import { SlabPool, type Unboxed, unboxedAccessors } from "../vocabulary/unboxed.js";

/**
 * An edge over a ring of samples: captured at once (its instant and the ring's head), evaluated
 * once the samples around it can bound it, and then never changed — the per-card ledger and the
 * window's span read the same value. On an energy counter the value is the fused reading of
 * ./fusion.ts (counter and power); on an integral of power, the integral interpolated between the
 * two samples around the edge.
 */

export const PENDING = 0;
export const RESOLVED = 1;
export const FAILED = 2;

/**
 * Its fractional numbers and sample indices are kept unboxed in a slab (../unboxed.ts), in the
 * order of its accessors' names below.
 */
export class RingEdge implements Edge, Unboxed {
  readonly tNs: bigint;
  /** ns relative to the ring's epoch. */
  declare readonly t: number;
  /** ring.head() when taken: the first sample that can lie after the edge is hint - 1. */
  declare readonly hint: number;
  readonly ring: SampleRing;
  state = PENDING;
  reason: string | null = null;
  /** The samples just before and after the edge, once the one after exists (-1 before). */
  declare kA: number;
  declare kB: number;
  /** The cumulative value at the edge (mJ), and how far off it can be either way (mJ). */
  declare value: number;
  declare errMj: number;
  /** The fused reading's basis (fusion.ts Basis); -1 on an integral. */
  basis = -1;
  /** The counter's value at the sample before the edge (NaN on an integral). */
  declare counterA: number;
  declare powerMw: number;
  /** Longest read among the two bracketing samples (ns). */
  declare readNs: number;
  /** Cumulative faults at the samples before and after the edge (0 until located). */
  declare faultsA: number;
  declare faultsB: number;
  /**
   * On an integral: how far its readings may lag the card (ns; ./held.ts), as judged once the
   * sample after the edge came; NaN before, or where not known yet. The edge settles once a
   * sample reads that long after it (a change of the readings until then may be the card's
   * before the edge: ./integral-spread.ts).
   */
  declare lagNs: number;
  readonly slab: Float64Array;
  readonly at: number;

  /** `t`, where the caller has it (an instant of the event log): tNs − ring.epochNs as a number. */
  constructor(tNs: bigint, ring: SampleRing, hint = ring.head(), t = Number(tNs - ring.epochNs)) {
    this.tNs = tNs;
    this.ring = ring;
    // Its numbers in a slab (../unboxed.ts), in the accessors' order (below): the sample indices
    // too, which outgrow small integers after weeks of sampling and would be boxed then. A fresh
    // slab's slots are zero (value, errMj, powerMw, readNs start so).
    const at = EDGE_SLOTS.take();
    const slab = EDGE_SLOTS.slab;
    slab[at] = t;
    slab[at + 3] = Number.NaN;
    slab[at + 6] = hint;
    slab[at + 7] = -1;
    slab[at + 8] = -1;
    slab[at + 11] = Number.NaN;
    this.slab = slab;
    this.at = at;
  }

  /** Largest error of the edge's value either way (mJ). */
  interpErrMj(): number {
    return this.errMj;
  }
}
unboxedAccessors(
  RingEdge.prototype,
  ["t", "value", "errMj", "counterA", "powerMw", "readNs", "hint", "kA", "kB", "faultsA", "faultsB", "lagNs"],
  ["value", "errMj", "counterA", "powerMw", "readNs", "kA", "kB", "faultsA", "faultsB", "lagNs"],
);
/** The slabs of every RingEdge's numbers (../unboxed.ts). */
const EDGE_SLOTS = new SlabPool(12);

/** What resolving an edge needs from its track. */
export interface EdgeContext {
  readonly column: "energy" | "integral";
  readonly fusion: CounterFusion | null;
  describeError(code: number): string;
  /** On an integral: how far the readings up to sample `upTo` may lag the card (ns; NaN: not known). */
  lagNs(upTo: number): number;
}

/** Tries to evaluate a pending edge from the samples present now. */
export function resolveEdge(e: RingEdge, ctx: EdgeContext, s: Sample): void {
  const ring = e.ring;
  if (e.kB < 0 && !locate(e, ctx, s)) return;
  if (e.state !== PENDING) return;
  if (ctx.column === "integral" || ctx.fusion === null) {
    if (Number.isNaN(e.lagNs)) e.lagNs = ctx.lagNs(e.kB);
    if (!(e.lagNs > 0) || newestT(ring, s) >= e.t + e.lagNs) e.state = RESOLVED;
    else {
      const failure = ring.failure();
      if (failure !== null) fail(e, failure);
    }
    return;
  }
  // Written into the edge (value, errMj, basis) when it can be bounded.
  const fused = ctx.fusion.at(e.t, e.kA, e);
  if (fused === true) e.state = RESOLVED;
  else if (fused !== false) fail(e, fused);
  else {
    const failure = ring.failure();
    if (failure !== null) fail(e, failure);
  }
}

/** Finds the samples around the edge; false while the one after it is not written yet. */
function locate(e: RingEdge, ctx: EdgeContext, s: Sample): boolean {
  const ring = e.ring;
  const head = ring.head();
  const oldest = Math.max(0, head - ring.capacity);
  let k = Math.max(e.hint - 1, oldest);
  if (e.hint - 1 < oldest && e.hint > 0) {
    fail(e, "the window outlived the sampler's history");
    return false;
  }
  let found = false;
  const fusion = ctx.fusion;
  if (fusion !== null) {
    // The fused counter keeps every sample as an edge needs it: find the one after the edge there.
    const samples = fusion.samples();
    const after = samples.firstAfter(e.t, k);
    found = after >= 0 && samples.read(after, s);
    if (found) k = after;
  } else {
    for (; k < head; k++) {
      if (!ring.read(k, s)) continue;
      if (s.t > e.t) break;
    }
    found = k < head;
  }
  if (!found) {
    const failure = ring.failure();
    if (failure !== null) fail(e, failure);
    return false; // still pending
  }
  if (k === 0) {
    fail(e, "the edge came before the sampler's first sample");
    return false;
  }
  const column = ctx.column;
  const tB = s.t;
  const vB = column === "energy" ? s.energyMj : s.integralMj;
  const errB = s.error;
  const pB = s.powerMw;
  const readB = s.readNs;
  const faultsB = s.faults;
  if (!(fusion !== null ? fusion.samples().read(k - 1, s) : ring.read(k - 1, s))) {
    fail(e, "the window outlived the sampler's history");
    return false;
  }
  const vA = column === "energy" ? s.energyMj : s.integralMj;
  if (Number.isNaN(vA) || Number.isNaN(vB)) {
    const code = Number.isNaN(vB) ? errB : s.error;
    fail(
      e,
      `no ${column === "energy" ? "energy counter" : "power"} reading at the edge: ${ctx.describeError(code)}`,
    );
    return false;
  }
  e.kA = k - 1;
  e.kB = k;
  e.faultsA = s.faults;
  e.faultsB = faultsB;
  e.counterA = column === "energy" ? vA : Number.NaN;
  e.powerMw = Number.isNaN(pB) ? s.powerMw : pB;
  e.readNs = Math.max(readB, s.readNs);
  const span = tB - s.t;
  e.value = span > 0 ? vA + ((vB - vA) * (e.t - s.t)) / span : vB;
  e.errMj = interpolationErr(vA, e.value, vB);
  return true;
}

export function fail(e: RingEdge, reason: string): void {
  e.state = FAILED;
  e.reason = reason;
}

/**
 * What went wrong between samples `from` and `to`, from their flags and what the fused counter
 * found there (`found`): a window's reason.
 */
export function describeFaults(
  ring: SampleRing,
  from: number,
  to: number,
  s: Sample,
  describeError: (code: number) => string,
  found: readonly string[] = [],
): string {
  const seen = new Set<string>();
  for (let k = Math.max(from, ring.head() - ring.capacity); k <= to; k++) {
    if (!ring.read(k, s)) continue;
    if (s.flags & FLAG.COUNTER_BACKWARDS) seen.add("the energy counter went backwards (driver reload?)");
    if (s.flags & FLAG.COUNTER_JUMP)
      seen.add("the energy counter jumped faster than any card draws (driver reload?)");
    if (s.flags & FLAG.READ_FAILED) seen.add(`a read failed: ${describeError(s.error)}`);
  }
  for (const why of found) seen.add(why);
  const what = seen.size > 0 ? [...seen].join("; ") : "the sampler recorded a fault";
  return `inside the window ${what}`;
}

/** The stamp of the ring's newest sample (ns after its epoch), −∞ where it cannot be read. */
function newestT(ring: SampleRing, s: Sample): number {
  return ring.read(ring.head() - 1, s) ? s.t : Number.NEGATIVE_INFINITY;
}

/**
 * The hint of an edge at `t` (ns after the ring's epoch), perhaps long past: what ring.head() was
 * when `t` was now, one past the first sample after it (RingEdge.hint), found by bisection over
 * the samples held. A sample that cannot be read (being overwritten: the oldest) counts as before.
 */
export function pastHint(ring: SampleRing, t: number, s: Sample): number {
  const head = ring.head();
  let lo = Math.max(0, head - ring.capacity);
  let hi = head;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ring.read(mid, s) && s.t > t) hi = mid;
    else lo = mid + 1;
  }
  return lo + 1;
}
