/**
 * A card's whole energy (idle included) from an instant on, as windows measure it: between edges
 * of its track, interpolated within the counter's steps and bounded, summed over consecutive spans
 * so that no span outlives the ring. What giul-probe --watch and --idle report, instead of raw
 * counter readings, whose steps (100 ms on many cards) would put them a step off.
 */
import type { Edge, Track } from "../track/track.js";
import type { Failure } from "../vocabulary/measurement.js";

export type RunningTotal =
  | {
      readonly ok: true;
      readonly joules: number;
      readonly uncertaintyJoules: number;
      /** From the first edge to the newest (s). */
      readonly seconds: number;
    }
  | Failure;

/** How long one span may grow before it is folded into the total and a new one begins (ns). */
const REBASE_NS = 60_000_000_000n;

/**
 * How long after a sampler starts a running total should begin (ms): an edge in the energy
 * counter's first step is bounded only to what the card drew before the first read (up to one
 * update interval of it), until a few steps have shown how often the counter updates.
 */
export const SETTLE_MS = 500;

export class RunningEnergy {
  /** The edge the current span starts at, and what the spans before it summed to. */
  private base: Edge;
  private readonly startNs: bigint;
  private joules = 0;
  private bound = 0;
  private failure: string | null = null;

  constructor(private readonly track: Track) {
    this.base = track.edge();
    this.startNs = this.base.tNs;
  }

  /**
   * The total up to now, once its edge has settled: the spans before plus one span from their
   * end to now (one edge bound each, not one per call), or why there is none. Not concurrent.
   */
  async advance(): Promise<RunningTotal> {
    const to = this.track.edge();
    await this.track.settle([this.base, to]);
    if (this.failure !== null) return { ok: false, reason: this.failure };
    const span = this.track.span(this.base, to);
    if (!span.ok) {
      this.failure = span.reason;
      return span;
    }
    const joules = this.joules + span.grossJoules;
    const bound = this.bound + span.uncertaintyJoules;
    if (to.tNs - this.base.tNs >= REBASE_NS) {
      // Folded in before the span's first samples leave the ring.
      this.joules = joules;
      this.bound = bound;
      this.base = to;
    }
    return { ok: true, joules, uncertaintyJoules: bound, seconds: Number(to.tNs - this.startNs) / 1e9 };
  }
}
