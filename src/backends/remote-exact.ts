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
import { debug } from "../debug.js";
import { type Check, OK, type SpanMeasurement } from "../measurement.js";
import { type EnergyWire, parseEnergy } from "../wire.js";
import { getJson, httpFailure } from "./agent-client.js";
import type { Edge, Track } from "./track.js";
import { counterEdgeErrMj, counterStep, edgePower, msFixed, tooShortForCounter } from "./uncertainty.js";

/** An edge: the agent's reading for it, once its request has answered. */
class RemoteEdge implements Edge {
  readonly tNs: bigint;
  reading: EnergyWire | null = null;
  reason: string | null = null;
  /** ns from the edge to the estimated instant of the agent's reading (client clock). */
  leadNs = 0;
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
      process.nextTick(() => this.flush());
    }
    this.batch.push(e);
    return e;
  }

  private flush(): void {
    const edges = this.batch ?? [];
    this.batch = null;
    const url = new URL("energy", this.base);
    void getJson(url, this.timeoutMs, this.clock).then((r) => {
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
          // The reading happened somewhere in the network part of the round trip: take its middle.
          const netNs = Math.max(0, Number(r.tRecv - r.tSend) - reading.wait_ns);
          e.leadNs = Math.max(0, Number(r.tSend - e.tNs) + netNs / 2);
          e.reading = reading;
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

/** The card energy between two readings, each moved back to its edge, with its error bar. */
function exactSpan(from: RemoteEdge, to: RemoteEdge): SpanMeasurement {
  const a = from.reading;
  const b = to.reading;
  if (a === null) return { ok: false, reason: `opening edge: ${from.reason ?? "not settled"}` };
  if (b === null) return { ok: false, reason: `closing edge: ${to.reason ?? "not settled"}` };
  if (a.energy_series !== b.energy_series) {
    return { ok: false, reason: "the agent's sampler restarted inside the window (a new energy_series)" };
  }
  if (b.faults_after > a.faults_before) {
    return {
      ok: false,
      reason:
        "inside the window the agent's sampler recorded a fault (a counter reset or jump, or a failed read)",
    };
  }
  const agentNs = Number(BigInt(b.monotonic_ns) - BigInt(a.monotonic_ns));
  const step = counterStep(b.counter_step_ns, b.period_ns);
  if (b.energy_source === "counter") {
    const tooShort = tooShortForCounter(agentNs, step, msFixed);
    if (tooShort !== null) return { ok: false, reason: tooShort };
  }
  const rawJ = b.energy_j - a.energy_j;
  const meanW = agentNs > 0 ? Math.max(0, rawJ) / (agentNs / 1e9) : 0;
  const pa = a.power_w ?? meanW;
  const pb = b.power_w ?? meanW;
  // The readings are of the instants the requests reached the agent; move each to its edge.
  const grossJ = rawJ - (pb * to.leadNs) / 1e9 + (pa * from.leadNs) / 1e9;
  let uncertaintyJ = a.interp_err_j + b.interp_err_j + (pa * from.leadNs + pb * to.leadNs) / 1e9;
  let caveat: string | null = null;
  if (b.energy_source === "counter") {
    // As on a local counter: each read is up to one step stale, and a whole number of mJ.
    const edgeMw = edgePower(meanW, a.power_w, b.power_w) * 1000;
    uncertaintyJ += counterEdgeErrMj(edgeMw, step.boundNs, a.read_ns, b.read_ns) / 1000;
  } else {
    caveat =
      "the agent integrates its sampled power (the card has no energy counter)" +
      (b.averaged_power ? "; its power is a 1 s trailing average" : "");
  }
  return {
    ok: true,
    grossJoules: grossJ,
    samples: Math.max(0, b.sample_index - a.sample_index),
    maxGapMs: b.period_ns / 1e6,
    uncertaintyJoules: uncertaintyJ,
    caveat,
  };
}
