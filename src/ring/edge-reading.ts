/**
 * A settled edge's reading, for giul-agent's /energy (RingTrack.reading): the cumulative value at
 * the edge, with what a remote meter needs to bound a window between two of them as a local one is
 * (its faults, the integral's running bound and reads, the counter's basis and reading).
 */
import { COUNTER_ONLY } from "../edges/fusion.js";
import type { Sample } from "../track/ring.js";
import type { EdgeReading } from "../track/track.js";
import type { RingEdge } from "./edge.js";
import type { HeldReadings } from "./held.js";

/** The reading of `edge` (settled, over the track's current ring), `s` a scratch sample. */
export function edgeReading(
  edge: RingEdge,
  column: "energy" | "integral",
  held: HeldReadings,
  generation: number,
  s: Sample,
): EdgeReading {
  const faultsA = edge.ring.read(edge.kA, s) ? s.faults : null;
  const faultsB = edge.ring.read(edge.kB, s) ? s.faults : null;
  if (faultsA === null || faultsB === null)
    return { ok: false, reason: "the edge outlived the sampler's history" };
  const spread = held.spreadAround(column, edge, s);
  return {
    ok: true,
    tNs: edge.tNs,
    valueMj: edge.value,
    powerMw: edge.powerMw,
    interpErrMj: edge.interpErrMj(),
    bounded: true,
    readNs: edge.readNs,
    kA: edge.kA,
    faultsA,
    faultsB,
    generation,
    spreadMj: spread.at,
    spreadAheadMj: spread.ahead,
    readBeforeNs: spread.beforeNs,
    readAfterNs: spread.afterNs,
    lagNs: spread.lagNs,
    counterOnly: column === "energy" && edge.basis === COUNTER_ONLY,
    counterMj: column === "energy" ? edge.counterA : Number.NaN,
  };
}
