/**
 * One /energy reading (../vocabulary/wire.ts EnergyWire) from a card's track at a settled edge:
 * what giul-agent answers, and what a test scores a remote window on.
 */

import type { Edge, TrackReadings } from "../track/track.js";
import { fail, ok, type Result } from "../vocabulary/measurement.js";
import type { EnergyWire } from "../vocabulary/wire.js";

/**
 * /energy reports the least and most power over this long before each reading: a client can move
 * a reading that reached the agent up to this late back to its edge with a bound.
 */
const POWER_RANGE_NS = 2_000_000_000;

/** Who answers: the agent, its card, and the series its readings belong to. */
export interface EnergyWireSource {
  readonly agent: string;
  readonly gpu: number;
  readonly backend: string;
  readonly series: string;
  /** Added to every monotonic_ns reported (tests: an agent on another clock). */
  readonly clockOffsetNs: bigint;
}

/**
 * The reading of `edge` (settled) on `readings`, `waitNs` after the request arrived, for a request
 * that asked for its edge `edgeAgeNs` before its arrival (null: read at the arrival).
 */
export function energyWire(
  readings: TrackReadings,
  edge: Edge,
  source: EnergyWireSource,
  waitNs: number,
  edgeAgeNs: number | null,
): Result<EnergyWire> {
  const r = readings.reading(edge);
  const info = readings.ringInfo();
  if (!r.ok) return fail(r.reason);
  if (info === null || info.generation !== r.generation) return fail("the sampler restarted");
  const range = readings.powerRange(r.tNs - BigInt(POWER_RANGE_NS));
  const finiteOrNull = (x: number, scale = 1) => (Number.isFinite(x) ? x / scale : null);
  return ok({
    agent: source.agent,
    gpu: source.gpu,
    backend: source.backend,
    energy_source: info.column === "energy" ? "counter" : "integral",
    energy_series: `${source.series}-${r.generation}`,
    monotonic_ns: String(r.tNs + source.clockOffsetNs),
    energy_j: r.valueMj / 1000,
    power_w: finiteOrNull(r.powerMw, 1000),
    interp_err_j: r.interpErrMj / 1000,
    read_ns: r.readNs,
    sample_index: r.kA,
    faults_before: r.faultsA,
    faults_after: r.faultsB,
    counter_step_ns: info.counterStepNs,
    period_ns: info.periodNs,
    averaged_power: info.averagedPower,
    integral_unbounded: readings.integralProblem(),
    integral_spread_j: finiteOrNull(r.spreadMj, 1000),
    integral_spread_ahead_j: finiteOrNull(r.spreadAheadMj, 1000),
    integral_read_before_ns: finiteOrNull(r.readBeforeNs),
    integral_read_after_ns: finiteOrNull(r.readAfterNs),
    integral_lag_ns: finiteOrNull(r.lagNs),
    wait_ns: waitNs,
    power_min_w: range === null ? null : range.minMw / 1000,
    power_max_w: range === null ? null : range.maxMw / 1000,
    power_range_ns: POWER_RANGE_NS,
    edge_bounded: r.bounded,
    edge_counter_only: r.counterOnly,
    counter_mj: finiteOrNull(r.counterMj),
    edge_age_ns: edgeAgeNs,
  });
}
