/**
 * The remote track against this package's giul-agent (its /power carries `energy_j`): each window
 * edge asks `GET /energy`, the agent's cumulative energy at the instant the request arrived,
 * interpolated between its own sampler's readings. A window's energy is the agent-side difference
 * of two readings, so the network adds no integration error; what it adds is the uncertainty of
 * where, inside the request's round trip, the reading happened: ± power × (time from the edge to
 * the middle of the network round trip), counted per edge. The agent's own bounds (interpolation,
 * the counter's step and staleness) are ./uncertainty.ts's, as for a local card. Edges taken in
 * the same tick share one request.
 */

import {
  averagedIntegral,
  averagedPowerCaveat,
  COUNTER_READ_QUANTUM_MJ,
  counterEdgeErrMj,
  counterLagMj,
  counterStep,
  edgePower,
  msFixed,
  tooShortForCounter,
  tooShortForReads,
} from "../../edges/uncertainty.js";
import type { Edge, EdgeError, IntervalMeasurement, Track } from "../../track/track.js";
import { debug } from "../../vocabulary/debug.js";
import { type Check, type Failure, fail, OK, type SpanMeasurement } from "../../vocabulary/measurement.js";
import { EDGE_AGE_HEADER, EDGE_AGE_MAX_NS, type EnergyWire, parseEnergy } from "../../vocabulary/wire.js";
import { agentUrl, getJson, httpFailure } from "./agent-client.js";

/** Requests to /energy out at once before the next edges wait for one to come back. */
const MAX_IN_FLIGHT = 2;
/** … but never longer than this (ms): a slow request cannot hold the next edges back for its timeout. */
const BATCH_WAIT_MS = 20;

/** An edge: the agent's reading for it, once its request has answered (exported for tests). */
export class RemoteEdge implements Edge {
  readonly tNs: bigint;
  reading: EnergyWire | null = null;
  reason: string | null = null;
  /** ns from the edge to the estimated instant of the agent's reading (client clock). */
  leadNs = 0;
  /** How far the reading's true instant can be from that estimate: half the network time (ns). */
  netHalfNs = 0;
  readonly done: Promise<void>;
  resolveDone!: () => void;

  constructor(tNs: bigint) {
    this.tNs = tNs;
    this.done = new Promise((resolve) => {
      this.resolveDone = resolve;
    });
  }
}

/** A track over the agent at `base` that reads its cumulative energy at each edge. */
export class ExactTrack implements Track {
  readonly backend = "remote_agent" as const;
  private batch: RemoteEdge[] | null = null;
  private batchTimer: NodeJS.Timeout | null = null;
  private inFlight = 0;

  constructor(
    private readonly base: URL,
    private readonly timeoutMs: number,
    private readonly clock: () => bigint,
  ) {}

  ready(): Promise<Check> {
    return Promise.resolve(OK);
  }

  /** The agent keeps its own sampler running: nothing to start or stop here. */
  retain(_periodMs: number): void {}

  release(): void {}

  edge(): Edge {
    const e = new RemoteEdge(this.clock());
    if (this.batch === null) {
      this.batch = [];
      // Edges taken in the same tick share one request; while MAX_IN_FLIGHT requests are out, the
      // edges after them wait for one to come back (or BATCH_WAIT_MS), so that thousands of
      // windows a second cost the agent tens of requests, not thousands.
      if (this.inFlight < MAX_IN_FLIGHT) process.nextTick(() => this.flush());
      else {
        this.batchTimer = setTimeout(() => this.flush(), BATCH_WAIT_MS);
        this.batchTimer.unref();
      }
    }
    this.batch.push(e);
    return e;
  }

  private flush(): void {
    const edges = this.batch;
    if (edges === null) return;
    this.batch = null;
    if (this.batchTimer !== null) {
      clearTimeout(this.batchTimer);
      this.batchTimer = null;
    }
    const url = agentUrl(this.base, "energy");
    // The agent reads the batch's newest edge, however long this loop held the request back: the
    // edges are taken in time order, and each older one is placed from it (placeEdge).
    const newest = edges[edges.length - 1] as RemoteEdge;
    const headers = (tSend: bigint) => ({ [EDGE_AGE_HEADER]: String(edgeAgeNs(newest.tNs, tSend)) });
    this.inFlight += 1;
    void getJson(url, this.timeoutMs, this.clock, { headers }).then((r) => {
      this.inFlight -= 1;
      if (this.batch !== null && this.inFlight < MAX_IN_FLIGHT) this.flush();
      let reason: string | null = null;
      let reading: EnergyWire | null = null;
      if (!r.ok) reason = `the giul-agent did not answer: ${r.reason}`;
      else {
        reason = httpFailure(r, "the giul-agent");
        if (reason === null) {
          const parsed = parseEnergy(r.body);
          if (!parsed.ok) reason = `the giul-agent answered malformed JSON: ${parsed.reason}`;
          else reading = parsed.value;
        }
      }
      for (const e of edges) {
        if (reading !== null && r.ok) {
          placeEdge(e, reading, newest.tNs, r.tSend, r.tRecv);
          debug(
            "remote edge: lead %d ns, rtt %d ns, wait %d ns, agent t %s, E %d J, P %s W, batch %d",
            e.leadNs,
            Number(r.tRecv - r.tSend),
            reading.wait_ns,
            reading.monotonic_ns,
            reading.energy_j,
            String(reading.power_w),
            edges.length,
          );
        } else e.reason = reason ?? "no reading";
        e.resolveDone();
      }
    });
  }

  /** Waits for this track's edges (one taken before the agent's kind was known has no request). */
  settle(edges: readonly Edge[]): Promise<void> {
    const waits: Promise<void>[] = [];
    for (const e of edges) if (e instanceof RemoteEdge) waits.push(e.done);
    return waits.length === 0 ? Promise.resolve() : Promise.all(waits).then(() => undefined);
  }

  interval(from: Edge, to: Edge): IntervalMeasurement {
    if (from instanceof RemoteEdge && to instanceof RemoteEdge) {
      const checked = checkReadings(from, to);
      if (!checked.ok) return checked;
      return { ok: true, grossJoules: movedDifference(from, to, checked.a, checked.b, 0), spreadJoules: 0 };
    }
    return this.span(from, to) as Failure;
  }

  /**
   * How far the agent's reading, moved back to the edge, can be from the card's energy at the edge:
   * the agent's bound at its reading (an agent that fuses its counter with power includes the
   * counter's staleness in it), the move (± power × lead); an older agent's counter adds the
   * whole-mJ read and a counter's lag.
   */
  edgeError(edge: Edge): EdgeError {
    if (!(edge instanceof RemoteEdge))
      return fail(`the giul-agent at ${this.base.href} was not reachable at the edge`);
    const r = edge.reading;
    if (r === null) return fail(edge.reason ?? "not settled");
    if (r.power_w === null) return fail("the agent had no power reading at the edge");
    const lead = leadErrJ(r, edge, r.power_w);
    if (typeof lead === "string") return fail(lead);
    if (r.energy_source !== "counter" || r.edge_bounded)
      return { ok: true, errJoules: r.interp_err_j + lead, lagJoules: 0 };
    const step = counterStep(r.counter_step_ns, r.period_ns);
    return {
      ok: true,
      errJoules: r.interp_err_j + lead + COUNTER_READ_QUANTUM_MJ / 1000,
      lagJoules: counterLagMj(r.power_w * 1000, step.boundNs, r.read_ns) / 1000,
    };
  }

  span(from: Edge, to: Edge): SpanMeasurement {
    if (from instanceof RemoteEdge && to instanceof RemoteEdge) return exactSpan(from, to);
    if (from instanceof RemoteEdge || to instanceof RemoteEdge) {
      return { ok: false, reason: "the agent changed kind inside the window" };
    }
    return {
      ok: false,
      reason: `the giul-agent at ${this.base.href} was not reachable at the window's edges`,
    };
  }
}

/** The age sent for an edge at `tNs` in a request sent at `tSend`: 0..EDGE_AGE_MAX_NS. */
function edgeAgeNs(tNs: bigint, tSend: bigint): number {
  return Math.min(EDGE_AGE_MAX_NS, Math.max(0, Number(tSend - tNs)));
}

/**
 * Places edge `e` against the agent's reading (exported for tests): how long before the reading
 * the edge was (leadNs, the reading being moved back by it at the power the agent read), and how
 * unsure that is (netHalfNs). An agent that read the batch's newest edge, `newestNs`, as the
 * request asked (edge_age_ns) read it late by the request's time on the network alone; an older
 * agent read at the request's arrival, late by all the time since the edge. Either way the
 * network part is somewhere in the round trip less the agent's wait: its middle, ± half.
 */
export function placeEdge(
  e: RemoteEdge,
  reading: EnergyWire,
  newestNs: bigint,
  tSend: bigint,
  tRecv: bigint,
): void {
  const netNs = Math.max(0, Number(tRecv - tSend) - reading.wait_ns);
  const askedAge = edgeAgeNs(newestNs, tSend);
  // The reading's instant on this clock, less the network part: the arrival less the age asked
  // (the newest edge), or the arrival itself.
  const honoured = reading.edge_age_ns !== null && reading.edge_age_ns === askedAge;
  const readAt = honoured ? tSend - BigInt(askedAge) : tSend;
  e.leadNs = Math.max(0, Number(readAt - e.tNs) + netNs / 2);
  e.netHalfNs = netNs / 2;
  e.reading = reading;
}

/** Both edges have readings of one run of the agent's sampler, with no fault in between. */
function checkReadings(
  from: RemoteEdge,
  to: RemoteEdge,
): { readonly ok: true; readonly a: EnergyWire; readonly b: EnergyWire } | Failure {
  const a = from.reading;
  const b = to.reading;
  if (a === null) return fail(`opening edge: ${from.reason ?? "not settled"}`);
  if (b === null) return fail(`closing edge: ${to.reason ?? "not settled"}`);
  if (a.energy_series !== b.energy_series) {
    return fail("the agent's sampler restarted inside the window (a new energy_series)");
  }
  if (b.faults_after > a.faults_before) {
    return fail(
      "inside the window the agent's sampler recorded a fault (a counter reset or jump, or a failed read)",
    );
  }
  return { ok: true, a, b };
}

/**
 * The card's energy between two edges: the agent-side difference of the readings, each moved from
 * the instant its request reached the agent back to its edge at the power it read (or `meanW`).
 */
function movedDifference(
  from: RemoteEdge,
  to: RemoteEdge,
  a: EnergyWire,
  b: EnergyWire,
  meanW: number,
): number {
  const pa = a.power_w ?? meanW;
  const pb = b.power_w ?? meanW;
  return b.energy_j - a.energy_j - (pb * to.leadNs) / 1e9 + (pa * from.leadNs) / 1e9;
}

/**
 * How far moving a reading back to its edge at power `p` can be off (J): the energy between the
 * edge and the reading lies between the least and the most power the agent saw there times the
 * lead, and the reading's instant is known to within half the network time. An agent that reports
 * no power range (older than that field) is charged its power over the lead and that half. A
 * reading later than the range the agent reports cannot be moved with a bound: why, as a string.
 */
function leadErrJ(r: EnergyWire, e: RemoteEdge, p: number): number | string {
  if (r.power_min_w === null || r.power_max_w === null) return (p * (e.leadNs + e.netHalfNs)) / 1e9;
  if (e.leadNs + e.netHalfNs > r.power_range_ns) {
    return (
      `the reading reached the agent ${msFixed(e.leadNs)} ms after the edge, beyond the ` +
      `${msFixed(r.power_range_ns)} ms of power it reports: it cannot be moved back to the edge with a bound`
    );
  }
  const swing = Math.max(r.power_max_w - p, p - r.power_min_w, 0);
  return (swing * e.leadNs + r.power_max_w * e.netHalfNs) / 1e9;
}

/**
 * The card energy between two readings, each moved back to its edge, with its error bar (exported
 * for test/remote-lead.test.ts, which scores it on synthetic readings).
 */
export function exactSpan(from: RemoteEdge, to: RemoteEdge): SpanMeasurement {
  const checked = checkReadings(from, to);
  if (!checked.ok) return checked;
  const { a, b } = checked;
  const agentNs = Number(BigInt(b.monotonic_ns) - BigInt(a.monotonic_ns));
  const step = counterStep(b.counter_step_ns, b.period_ns);
  // Shorter than a step, a counter's difference is 0 or one step, unless the agent places energy
  // inside the steps by power (a fused counter with instantaneous power that bounds the edges).
  const fused = a.edge_bounded && b.edge_bounded;
  const counterOnly = !fused || b.averaged_power || a.edge_counter_only || b.edge_counter_only;
  if (b.energy_source === "counter" && counterOnly) {
    const noUpdate = a.counter_mj !== null && a.counter_mj === b.counter_mj;
    const tooShort = tooShortForCounter(agentNs, step, msFixed, noUpdate);
    if (tooShort !== null) return { ok: false, reason: tooShort };
  }
  // As for a local card: an integral of readings that hold, or of a trailing average, bounds
  // nothing (an agent older than integral_unbounded says only the latter).
  if (b.energy_source === "integral") {
    const why =
      b.integral_unbounded ??
      a.integral_unbounded ??
      (b.averaged_power ? averagedIntegral("the agent's nvmlDeviceGetPowerUsage") : null);
    if (why !== null) return { ok: false, reason: `the agent's card: ${why}` };
  }
  const rawJ = b.energy_j - a.energy_j;
  const meanW = agentNs > 0 ? Math.max(0, rawJ) / (agentNs / 1e9) : 0;
  const pa = a.power_w ?? meanW;
  const pb = b.power_w ?? meanW;
  // The readings are of the instants the requests reached the agent; move each to its edge.
  const grossJ = movedDifference(from, to, a, b, meanW);
  const leadA = leadErrJ(a, from, pa);
  if (typeof leadA === "string") return fail(`opening edge: ${leadA}`);
  const leadB = leadErrJ(b, to, pb);
  if (typeof leadB === "string") return fail(`closing edge: ${leadB}`);
  let uncertaintyJ = a.interp_err_j + b.interp_err_j + leadA + leadB;
  let caveat: string | null = null;
  if (b.energy_source === "counter" && fused) {
    if (b.averaged_power) caveat = averagedPowerCaveat("the agent's nvmlDeviceGetPowerUsage");
  } else if (b.energy_source === "counter") {
    // An older agent: each read is up to one step stale, and a whole number of mJ.
    const edgeMw = edgePower(meanW, a.power_w, b.power_w) * 1000;
    uncertaintyJ += counterEdgeErrMj(edgeMw, step.boundNs, a.read_ns, b.read_ns) / 1000;
  }
  const samples = Math.max(0, b.sample_index - a.sample_index);
  let maxGapNs = b.period_ns;
  if (b.energy_source === "integral") {
    // What the power did between the agent's reads: its running bound over the window, on a
    // window no shorter than the reads resolve (as a local integral's).
    const spreadJ = integralSpreadJ(a, b);
    const gapNs = readsGapNs(a, b, agentNs);
    if (spreadJ === null || gapNs === null) return fail(NO_SPREAD);
    maxGapNs = gapNs;
    const tooShort = tooShortForReads(agentNs, maxGapNs, b.integral_lag_ns as number);
    if (tooShort !== null) return fail(tooShort);
    uncertaintyJ += spreadJ;
    caveat = "the agent integrates its sampled power (the card has no energy counter)";
  }
  return {
    ok: true,
    grossJoules: grossJ,
    samples,
    maxGapMs: maxGapNs / 1e6,
    uncertaintyJoules: uncertaintyJ,
    caveat,
  };
}

/**
 * The longest interval between an integrating agent's reads around and inside the window between
 * its readings a and b, `agentNs` apart, as far as they tell (ns), or null where either lacks where
 * its reads were: the intervals around the two readings, and the mean of those between, from the
 * read after a to the read before b (exact where there is one).
 */
function readsGapNs(a: EnergyWire, b: EnergyWire, agentNs: number): number | null {
  const { integral_read_before_ns: beforeA, integral_read_after_ns: afterA } = a;
  const { integral_read_before_ns: beforeB, integral_read_after_ns: afterB } = b;
  if (
    beforeA === null ||
    afterA === null ||
    beforeB === null ||
    afterB === null ||
    b.integral_lag_ns === null
  ) {
    return null;
  }
  let gapNs = Math.max(beforeA + afterA, beforeB + afterB);
  const between = b.sample_index - a.sample_index - 1;
  if (between >= 1) gapNs = Math.max(gapNs, (agentNs - afterA - beforeB) / between);
  return gapNs;
}

/** Why an integrating agent's readings without their running bound measure nothing. */
const NO_SPREAD =
  "the agent's card: its integral came without its bound of what the power did between reads " +
  "(integral_spread_j, integral_read_before_ns: an agent older than those fields, or an edge read before its sensor was judged)";

/**
 * An integrating agent's bound over the window between readings a and b (J): b's running bound
 * and what may still lie before its edge, less a's (see EnergyWire.integral_spread_j); null where
 * either reading lacks it.
 */
function integralSpreadJ(a: EnergyWire, b: EnergyWire): number | null {
  if (a.integral_spread_j === null || b.integral_spread_j === null || b.integral_spread_ahead_j === null) {
    return null;
  }
  return Math.max(0, b.integral_spread_j + b.integral_spread_ahead_j - a.integral_spread_j);
}
