import type { LatestSample } from "../track/track.js";

/**
 * A card's energy as a counter that never goes back (`hw.energy`), from the newest samples of its
 * sampler read now and then (at each metrics collection): the sum of the increases of the track's
 * cumulative column between one reading and the next.
 *
 * - Within one run of the sampler, an increase is counted unless the sampler recorded a fault in
 *   between (a failed read, the counter going back or jumping): then the reading is a new base.
 * - Across runs (the sampler stopped when no window was open, and started again), the card's own
 *   energy counter kept counting, so its increase is counted; an integral of power starts again
 *   at each run, so nothing is counted across runs: what the card drew while no sampler ran is
 *   not in the total.
 * - No increase faster than any card draws (5 kW, the sampler's own bound) is counted.
 *
 * So the total can fall short of the card's energy, never exceed it, and never decrease.
 */

/** The sampler's bound on a plausible counter rate: 5 kW, in mJ per ns. */
const MAX_MJ_PER_NS = (5000 * 1000) / 1e9;

interface Seen {
  readonly source: object;
  readonly generation: number;
  readonly column: "energy" | "integral";
  readonly mj: number;
  readonly faults: number;
  readonly tNs: bigint;
}

export class EnergyTotal {
  private joules = 0;
  private last: Seen | null = null;

  /** The running total (J), or null before the first reading. */
  get totalJ(): number | null {
    return this.last === null ? null : this.joules;
  }

  /**
   * Takes in the newest sample of a track (`source` identifies the track: a new track of the card
   * is a new run) whose cumulative column is `column`; returns the running total (J), or null
   * before the first usable reading.
   */
  observe(sample: LatestSample | null, column: "energy" | "integral", source: object): number | null {
    if (sample === null || !Number.isFinite(sample.cumulativeMj)) return this.totalJ;
    const last = this.last;
    this.last = {
      source,
      generation: sample.generation,
      column,
      mj: sample.cumulativeMj,
      faults: sample.faults,
      tNs: sample.tNs,
    };
    if (last === null) return this.joules;
    const delta = sample.cumulativeMj - last.mj;
    const dtNs = Number(sample.tNs - last.tNs);
    if (!(delta > 0) || !(dtNs > 0) || delta > MAX_MJ_PER_NS * dtNs) return this.joules;
    const sameRun = source === last.source && sample.generation === last.generation;
    if (sameRun ? sample.faults !== last.faults : column !== "energy" || last.column !== "energy") {
      return this.joules;
    }
    this.joules += delta / 1000;
    return this.joules;
  }
}

/**
 * Power from the newest sample (W), when it is fresh (younger than 1 s or 5 periods) and read;
 * else null: a stale figure is not presented as current.
 */
export function freshPowerW(sample: LatestSample | null, periodNs: number, nowNs: bigint): number | null {
  if (sample === null || !Number.isFinite(sample.powerMw)) return null;
  const ageNs = Number(nowNs - sample.tNs);
  return ageNs < Math.max(1e9, 5 * periodNs) ? sample.powerMw / 1000 : null;
}
