import type { RingSource, Sample, SampleRing } from "./ring.js";
import type { Edge } from "./track.js";
import { interpolationErr } from "./uncertainty.js";

/**
 * An edge over a ring of samples (RingTrack's): taken at once, evaluated once the samples on both
 * sides of it exist, by interpolating the cumulative column between them.
 */

export const PENDING = 0;
export const RESOLVED = 1;
export const FAILED = 2;

export class RingEdge implements Edge {
  readonly tNs: bigint;
  /** ns relative to the ring's epoch. */
  readonly t: number;
  /** ring.head() when taken: the first sample that can lie after the edge is hint - 1. */
  readonly hint: number;
  readonly ring: SampleRing;
  state = PENDING;
  reason: string | null = null;
  kA = 0;
  kB = 0;
  vA = 0;
  vB = 0;
  value = 0;
  powerMw = 0;
  /** Longest read among the two bracketing samples (ns). */
  readNs = 0;
  /** Mean power between the two bracketing samples (mW): the slope of the column there. */
  slopeMw = 0;
  /** Cumulative faults at the samples before and after the edge. */
  faultsA = 0;
  faultsB = 0;

  constructor(tNs: bigint, ring: SampleRing, hint = ring.head()) {
    this.tNs = tNs;
    this.ring = ring;
    this.t = Number(tNs - ring.epochNs);
    this.hint = hint;
  }

  /** Largest error the interpolation can make: the edge's true value lies between vA and vB (mJ). */
  interpErrMj(): number {
    return interpolationErr(this.vA, this.value, this.vB);
  }

  fail(reason: string): void {
    this.state = FAILED;
    this.reason = reason;
  }

  /**
   * Tries to evaluate a pending edge from the samples present now (`s` is scratch space): it stays
   * pending while no sample after it exists, else it resolves or fails.
   */
  resolve(source: RingSource, s: Sample): void {
    const ring = this.ring;
    const head = ring.head();
    const oldest = Math.max(0, head - ring.capacity);
    let k = Math.max(this.hint - 1, oldest);
    if (this.hint - 1 < oldest && this.hint > 0) {
      this.fail("the window outlived the sampler's history");
      return;
    }
    for (; k < head; k++) {
      if (!ring.read(k, s)) continue;
      if (s.t > this.t) break;
    }
    if (k >= head) {
      const failure = ring.failure();
      if (failure !== null) this.fail(failure);
      return; // still pending
    }
    if (k === 0) {
      this.fail("the edge came before the sampler's first sample");
      return;
    }
    const column = source.column;
    const tB = s.t;
    const vB = column === "energy" ? s.energyMj : s.integralMj;
    const errB = s.error;
    const pB = s.powerMw;
    const readB = s.readNs;
    const faultsB = s.faults;
    if (!ring.read(k - 1, s)) {
      this.fail("the window outlived the sampler's history");
      return;
    }
    const vA = column === "energy" ? s.energyMj : s.integralMj;
    if (Number.isNaN(vA) || Number.isNaN(vB)) {
      const code = Number.isNaN(vB) ? errB : s.error;
      const what = column === "energy" ? "energy counter" : "power";
      this.fail(`no ${what} reading at the edge: ${source.describeError(code)}`);
      return;
    }
    this.kA = k - 1;
    this.kB = k;
    this.faultsA = s.faults;
    this.faultsB = faultsB;
    this.vA = vA;
    this.vB = vB;
    this.powerMw = Number.isNaN(pB) ? s.powerMw : pB;
    this.readNs = Math.max(readB, s.readNs);
    const span = tB - s.t;
    this.value = span > 0 ? vA + ((vB - vA) * (this.t - s.t)) / span : vB;
    this.slopeMw = span > 0 ? ((vB - vA) / span) * 1e9 : 0;
    this.state = RESOLVED;
  }
}
