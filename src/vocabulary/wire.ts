/**
 * giul-agent's wire format, shared by the agent (which writes it) and the remote_agent backend
 * (which reads it).
 *
 * `GET /power` carries every field of the Python giul 0.2 agent, same names and units, then the
 * extras of this agent (a Python client ignores them):
 *
 * | field | unit | Python 0.2 |
 * |---|---|---|
 * | watts, name, memory_used_mib, memory_total_mib, memory_free_mib, utilization_pct, compute_apps [{ pid, used_mib, name }] | W, MiB, % | yes |
 * | agent ("giul-node/<version>"), gpu, backend, energy_source ("counter" \| "integral"), energy_series, energy_j, monotonic_ns (string) | J, ns | no |
 *
 * `energy_j` is the cumulative energy of the agent's own sampler at its newest sample and
 * `monotonic_ns` the agent's CLOCK_MONOTONIC at that sample: the difference of two readings of one
 * `energy_series` is the card's energy between them. Its presence is how a client tells this agent
 * from a Python one.
 *
 * `GET /energy` is what a remote meter asks at each window edge: the cumulative energy at the
 * instant the request arrived, interpolated between the samples around it (the agent waits for the
 * sample after it: on the native sampler a read it asks for, well under a period), with what the
 * meter needs to bound its error. See
 * {@link EnergyWire}. An unreadable card answers 503 with `{ error }`.
 *
 * Unreadable values are `null`, never 0.
 */
import { fail, ok, type Result } from "./measurement.js";

/** One resident compute process, as the Python agent lists it. */
export interface ComputeAppWire {
  pid: number;
  used_mib: number | null;
  name: string | null;
}

/** GET /power. */
export interface PowerWire {
  watts: number | null;
  name: string | null;
  memory_used_mib: number | null;
  memory_total_mib: number | null;
  memory_free_mib: number | null;
  utilization_pct: number | null;
  compute_apps: ComputeAppWire[] | null;
  // ---- giul for Node.js extras ----
  agent: string;
  gpu: number;
  backend: string;
  energy_source: "counter" | "integral" | null;
  energy_series: string | null;
  energy_j: number | null;
  monotonic_ns: string | null;
}

/** GET /energy: one edge's reading. */
export interface EnergyWire {
  agent: string;
  gpu: number;
  backend: string;
  /** "counter": the card's energy counter; "integral": the agent's integral of power samples. */
  energy_source: "counter" | "integral";
  /** Readings of one series subtract; a new series starts when the agent's sampler restarts. */
  energy_series: string;
  /** Agent CLOCK_MONOTONIC ns when the request arrived (the instant of the reading), as a string. */
  monotonic_ns: string;
  /** Cumulative energy at monotonic_ns (J). */
  energy_j: number;
  /** Power at the reading (W), or null. */
  power_w: number | null;
  /** Largest error of the interpolation between the two samples around the reading (J). */
  interp_err_j: number;
  /** Longest read among those two samples (ns). */
  read_ns: number;
  /** Index of the sample before the reading (samples in a window: the difference). */
  sample_index: number;
  /** Faulty samples counted up to the sample before / after the reading. */
  faults_before: number;
  faults_after: number;
  /** Smallest interval seen between counter changes (ns; 0 when unknown) and the period (ns). */
  counter_step_ns: number;
  period_ns: number;
  /** Power is a ~1 s trailing average (integral source on Ampere and newer). */
  averaged_power: boolean;
  /**
   * Why the agent's integral (energy_source "integral") bounds nothing now: its card's power
   * readings hold their values or are a trailing average. Null where it does, or on a counter;
   * absent from agents older than this field (then null).
   */
  integral_unbounded: string | null;
  /**
   * On an integral: the agent's running bound of it at the sample before the reading, and what the
   * changes of power read after that sample, within the readings' lag of the reading, add (J): a
   * client's bar between readings a and b adds b's spread and ahead less a's spread (each change of
   * the readings between two reads at its height over half the interval plus the lag). Null on a
   * counter, on an edge read before the sensor was judged, and from agents older than these fields.
   */
  integral_spread_j: number | null;
  integral_spread_ahead_j: number | null;
  /**
   * On an integral: how long before and after the reading the agent's two reads around it were, and
   * how far its readings may lag the card (ns). A window shorter than the reads resolve (the longest
   * interval between reads around and inside it, plus the lag) is too short to measure. Null where
   * the spread is.
   */
  integral_read_before_ns: number | null;
  integral_read_after_ns: number | null;
  integral_lag_ns: number | null;
  /** ns from the request's arrival to the response (the wait for the next sample). */
  wait_ns: number;
  /**
   * Least and most power the agent's sampler saw over the `power_range_ns` before the reading (W),
   * or null: what bounds the energy between a client's edge and the reading, however late the
   * request arrived. Absent from agents older than this field (then null).
   */
  power_min_w: number | null;
  power_max_w: number | null;
  power_range_ns: number;
  /**
   * interp_err_j bounds energy_j at the reading either way, the counter's staleness included (the
   * agent fuses its counter with power): a client adds no staleness of its own. Absent from agents
   * older than this field (then false: interp_err_j is the interpolation alone).
   */
  edge_bounded: boolean;
  /**
   * On a counter, the agent placed the reading inside the counter's step by the counter alone (its
   * power readings bound nothing there): a window shorter than the step, or with no update of the
   * counter between its readings (`counter_mj`, the counter's reading at the sample before each),
   * is too short to measure, as a local one is. Absent from agents older than these fields (then
   * false and null).
   */
  edge_counter_only: boolean;
  counter_mj: number | null;
  /**
   * How far before the request's arrival the reading was taken (ns): the client's
   * `x-giul-edge-age-ns` header (its edge's age when it sent the request), echoed. The reading is
   * then of the client's edge, late only by the request's time on the network, however long the
   * client's event loop held the request back. Null where the agent read at the arrival: no header
   * was sent, or the agent is older than this field.
   */
  edge_age_ns: number | null;
}

/**
 * The request header by which a client asks /energy to read its edge, not the instant the request
 * arrives: the edge's age in ns when the request was sent (a whole number, 0..EDGE_AGE_MAX_NS).
 */
export const EDGE_AGE_HEADER = "x-giul-edge-age-ns";
/** The oldest edge /energy reads (ns): an older one is refused (400), naming the header. */
export const EDGE_AGE_MAX_NS = 10_000_000_000;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const finiteOrNull = (v: unknown): v is number | null =>
  v === null || (typeof v === "number" && Number.isFinite(v));
const finite = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/** The Python fields of /power, checked; what is wrong, or the value. */
export function parsePower(body: unknown): Result<PythonPower> {
  if (!isObject(body)) return fail("the body is not a JSON object");
  // watts is what metering needs; the rest came with 0.2 (a 0.1 agent lacks some): absent is null.
  if (!("watts" in body)) return fail("the field watts is missing");
  for (const key of ["watts", "memory_used_mib", "memory_total_mib", "memory_free_mib", "utilization_pct"]) {
    if (key in body && !finiteOrNull(body[key])) return fail(`${key} is not a number or null`);
  }
  const name = body.name ?? null;
  if (name !== null && typeof name !== "string") return fail("name is not a string or null");
  const apps = body.compute_apps;
  let computeApps: ComputeAppWire[] | null = null;
  if (apps !== null && apps !== undefined) {
    if (!Array.isArray(apps)) return fail("compute_apps is not a list");
    computeApps = [];
    for (const app of apps) {
      if (!isObject(app) || !finite(app.pid)) return fail("compute_apps holds an entry without a pid");
      const used = app.used_mib ?? null;
      const appName = app.name ?? null;
      if (!finiteOrNull(used)) return fail("compute_apps holds a used_mib that is not a number");
      if (appName !== null && typeof appName !== "string")
        return fail("compute_apps holds a name that is not a string");
      computeApps.push({ pid: app.pid, used_mib: used, name: appName });
    }
  }
  return ok({
    watts: body.watts as number | null,
    name: (name as string | null) ?? null,
    memoryUsedMib: (body.memory_used_mib ?? null) as number | null,
    memoryTotalMib: (body.memory_total_mib ?? null) as number | null,
    memoryFreeMib: (body.memory_free_mib ?? null) as number | null,
    utilizationPct: (body.utilization_pct ?? null) as number | null,
    computeApps: computeApps?.map((a) => ({ pid: a.pid, usedMib: a.used_mib, name: a.name })) ?? null,
    exact: "energy_j" in body && typeof body.agent === "string" && body.agent.startsWith("giul-node/"),
  });
}

/** /power as a client sees it (camelCase), from either agent. */
export interface PythonPower {
  readonly watts: number | null;
  readonly name: string | null;
  readonly memoryUsedMib: number | null;
  readonly memoryTotalMib: number | null;
  readonly memoryFreeMib: number | null;
  readonly utilizationPct: number | null;
  readonly computeApps: readonly { pid: number; usedMib: number | null; name: string | null }[] | null;
  /** The agent serves /energy (giul for Node.js): windows are exact differences of its readings. */
  readonly exact: boolean;
}

/** A reading of /energy, checked. */
export function parseEnergy(body: unknown): Result<EnergyWire> {
  if (!isObject(body)) return fail("the body is not a JSON object");
  const b = body;
  if (b.energy_source !== "counter" && b.energy_source !== "integral")
    return fail("energy_source is missing");
  if (typeof b.energy_series !== "string") return fail("energy_series is missing");
  if (typeof b.monotonic_ns !== "string" || !/^\d+$/.test(b.monotonic_ns))
    return fail("monotonic_ns is missing");
  for (const key of [
    "energy_j",
    "interp_err_j",
    "read_ns",
    "sample_index",
    "faults_before",
    "faults_after",
    "counter_step_ns",
    "period_ns",
    "wait_ns",
  ]) {
    if (!finite(b[key])) return fail(`${key} is not a number`);
  }
  if (!finiteOrNull(b.power_w)) return fail("power_w is not a number or null");
  // Absent from older agents; present, a number or null.
  if ("edge_counter_only" in b && typeof b.edge_counter_only !== "boolean")
    return fail("edge_counter_only is not a boolean");
  for (const key of [
    "counter_mj",
    "integral_spread_j",
    "integral_spread_ahead_j",
    "integral_read_before_ns",
    "integral_read_after_ns",
    "integral_lag_ns",
  ]) {
    if (key in b && !finiteOrNull(b[key])) return fail(`${key} is not a number or null`);
  }
  return ok({
    agent: typeof b.agent === "string" ? b.agent : "",
    gpu: finite(b.gpu) ? b.gpu : 0,
    backend: typeof b.backend === "string" ? b.backend : "",
    energy_source: b.energy_source,
    energy_series: b.energy_series,
    monotonic_ns: b.monotonic_ns,
    energy_j: b.energy_j as number,
    power_w: b.power_w as number | null,
    interp_err_j: b.interp_err_j as number,
    read_ns: b.read_ns as number,
    sample_index: b.sample_index as number,
    faults_before: b.faults_before as number,
    faults_after: b.faults_after as number,
    counter_step_ns: b.counter_step_ns as number,
    period_ns: b.period_ns as number,
    averaged_power: b.averaged_power === true,
    integral_unbounded: typeof b.integral_unbounded === "string" ? b.integral_unbounded : null,
    integral_spread_j: finite(b.integral_spread_j) ? b.integral_spread_j : null,
    integral_spread_ahead_j: finite(b.integral_spread_ahead_j) ? b.integral_spread_ahead_j : null,
    integral_read_before_ns: finite(b.integral_read_before_ns) ? b.integral_read_before_ns : null,
    integral_read_after_ns: finite(b.integral_read_after_ns) ? b.integral_read_after_ns : null,
    integral_lag_ns: finite(b.integral_lag_ns) ? b.integral_lag_ns : null,
    wait_ns: b.wait_ns as number,
    power_min_w: finite(b.power_min_w) ? b.power_min_w : null,
    power_max_w: finite(b.power_max_w) ? b.power_max_w : null,
    power_range_ns: finite(b.power_range_ns) ? b.power_range_ns : 0,
    edge_bounded: b.edge_bounded === true,
    edge_counter_only: b.edge_counter_only === true,
    counter_mj: finite(b.counter_mj) ? b.counter_mj : null,
    edge_age_ns: finite(b.edge_age_ns) && b.edge_age_ns >= 0 ? b.edge_age_ns : null,
  });
}
