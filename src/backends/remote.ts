/**
 * The `remote_agent` backend: a node metered through the giul-agent on it, over HTTP.
 *
 * Against this package's agent (its /power carries `energy_j`), each window edge asks `GET
 * /energy`: the agent's cumulative energy at the instant the request arrived, interpolated between
 * its own sampler's readings. A window's energy is the agent-side difference of two readings, so
 * the network adds no integration error; what it adds is the uncertainty of where, inside the
 * request's round trip, the reading happened: ± power × (time from the edge to the middle of the
 * network round trip), counted per edge. Edges taken in the same tick share one request.
 *
 * Against a Python giul 0.2 agent (its /power has no energy fields) it polls `/power` every
 * `pollMs` into a {@link JsRing} and uses the shared window arithmetic over the integral of the
 * polled watts, with a caveat saying so.
 *
 * Every request has a timeout (default 500 ms). An unreachable, slow or malformed agent costs the
 * measurement, with the reason, never the request; close() waits at most about one timeout.
 */
import http, { type ClientRequest } from "node:http";
import https from "node:https";
import { Backoff } from "../backoff.js";
import { debug } from "../debug.js";
import {
  type CardState,
  type Check,
  fail,
  OK,
  ok,
  type ProcessRead,
  type Result,
  type SpanMeasurement,
} from "../measurement.js";
import { type EnergyWire, type PythonPower, parseEnergy, parsePower } from "../wire.js";
import type { CardReader } from "./card.js";
import { JsRing } from "./js-ring.js";
import type { RingSource, SampleRing } from "./ring.js";
import { RingTrack } from "./ring-track.js";
import type { Edge, Track } from "./track.js";
import { counterEdgeErrMj, counterStep, edgePower, msFixed, tooShortForCounter } from "./uncertainty.js";

export const DEFAULT_TIMEOUT_MS = 500;
export const DEFAULT_POLL_MS = 100;
const MAX_BODY = 1 << 20;

const keepAlive = {
  http: new http.Agent({ keepAlive: true, maxSockets: 64 }),
  https: new https.Agent({ keepAlive: true, maxSockets: 64 }),
};

type HttpResult =
  | {
      readonly ok: true;
      readonly status: number;
      /** The parsed JSON body, or undefined when it is not JSON. */
      readonly body: unknown;
      /** CLOCK_MONOTONIC ns just before the request was handed to the socket layer. */
      readonly tSend: bigint;
      /** … and when the whole answer had arrived. */
      readonly tRecv: bigint;
    }
  | { readonly ok: false; readonly reason: string; readonly timedOut: boolean };

function describeError(error: NodeJS.ErrnoException, url: URL): string {
  switch (error.code) {
    case "ECONNREFUSED":
      return `connection refused (nothing listens at ${url.host})`;
    case "ECONNRESET":
      return "the connection was reset";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `cannot resolve ${url.hostname}`;
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return `${url.host} is unreachable`;
    default:
      return error.message;
  }
}

/**
 * GET `url` with a total deadline of `timeoutMs` (connection, queueing and body included). One
 * retry when a reused keep-alive socket turns out closed. Never rejects.
 */
export function getJson(
  url: URL,
  timeoutMs: number,
  clock: () => bigint = process.hrtime.bigint,
  options: { readonly unref?: boolean } = {},
): Promise<HttpResult> {
  return new Promise((resolve) => {
    let settled = false;
    let current: ClientRequest | null = null;
    const finish = (result: HttpResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const timer = setTimeout(() => {
      finish({ ok: false, reason: `no answer within ${timeoutMs} ms`, timedOut: true });
      current?.destroy();
    }, timeoutMs);
    if (options.unref) timer.unref();
    const https_ = url.protocol === "https:";
    const attempt = (retries: number) => {
      const tSend = clock();
      let req: ClientRequest;
      try {
        req = (https_ ? https : http).get(
          url,
          { agent: https_ ? keepAlive.https : keepAlive.http, headers: { accept: "application/json" } },
          (res) => {
            const chunks: Buffer[] = [];
            let size = 0;
            res.on("data", (chunk: Buffer) => {
              size += chunk.length;
              if (size > MAX_BODY) {
                finish({ ok: false, reason: `the answer is larger than ${MAX_BODY} bytes`, timedOut: false });
                req.destroy();
              } else chunks.push(chunk);
            });
            res.on("end", () => {
              const tRecv = clock();
              let body: unknown;
              try {
                body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
              } catch {
                body = undefined;
              }
              finish({ ok: true, status: res.statusCode ?? 0, body, tSend, tRecv });
            });
            res.on("error", (error: NodeJS.ErrnoException) =>
              finish({ ok: false, reason: describeError(error, url), timedOut: false }),
            );
          },
        );
      } catch (error) {
        // An URL or option http refuses at once (a protocol it does not speak): a value, not a throw.
        finish({
          ok: false,
          reason: error instanceof Error ? error.message : String(error),
          timedOut: false,
        });
        return;
      }
      current = req;
      if (options.unref) req.on("socket", (socket) => socket.unref());
      req.on("error", (error: NodeJS.ErrnoException) => {
        if (settled) return;
        if (retries > 0 && req.reusedSocket && error.code === "ECONNRESET") {
          attempt(retries - 1);
          return;
        }
        finish({ ok: false, reason: describeError(error, url), timedOut: false });
      });
    };
    attempt(1);
  });
}

/** The agent's base URL from a node's powerEndpoint ("http://h:9402" or "http://h:9402/power"). */
export function agentBase(endpoint: string): URL {
  const url = new URL(endpoint);
  url.search = "";
  url.hash = "";
  if (url.pathname.endsWith("/power")) url.pathname = url.pathname.slice(0, -"power".length);
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  return url;
}

function httpFailure(result: Extract<HttpResult, { ok: true }>, what: string): string | null {
  if (result.status === 200) return null;
  const body = result.body as { error?: unknown } | undefined;
  const detail = typeof body?.error === "string" ? `: ${body.error}` : "";
  return `${what} answered HTTP ${result.status}${detail}`;
}

/**
 * One read of an agent's /power (either agent), for probeNode and contention: memory,
 * utilization and resident processes, or why they cannot be had. Never rejects.
 */
export async function fetchAgentPower(
  endpoint: string,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<Result<PythonPower>> {
  let url: URL;
  try {
    url = new URL("power", agentBase(endpoint));
  } catch {
    return fail(`not a URL: ${endpoint}`);
  }
  const r = await getJson(url, timeoutMs);
  if (!r.ok) return fail(`the giul-agent at ${url.href} did not answer: ${r.reason}`);
  const failed = httpFailure(r, `the giul-agent at ${url.href}`);
  if (failed !== null) return fail(failed);
  const power = parsePower(r.body);
  if (!power.ok) return fail(`the giul-agent at ${url.href} answered malformed JSON: ${power.reason}`);
  return power;
}

// ---------------------------------------------------------------------------------------------
// Exact mode: readings of the agent's cumulative energy at each edge.

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

// ---------------------------------------------------------------------------------------------
// Poll mode: a Python agent's /power, integrated.

const POLL_ERROR = Object.freeze({ TIMEOUT: 1, UNREACHABLE: 2, HTTP: 3, MALFORMED: 4, NO_WATTS: 5 });

class PollSource implements RingSource {
  readonly column = "integral" as const;
  /** nvidia-smi's power.draw, which the Python agent reports, is a 1 s average on recent cards. */
  readonly averagedPower = true;
  private ring: JsRing | null = null;
  private timer: NodeJS.Timeout | null = null;
  private inFlight = 0;
  private lastT = -1n;
  lastReason: string | null = null;

  constructor(
    private readonly url: URL,
    private readonly pollMs: number,
    private readonly timeoutMs: number,
    private readonly clock: () => bigint,
  ) {}

  open(): Result<SampleRing> {
    this.ring = new JsRing({ epochNs: this.clock(), periodNs: this.pollMs * 1e6 });
    this.lastT = -1n;
    this.poll();
    this.loop();
    return ok(this.ring);
  }

  setPeriod(): void {
    // The poll period is fixed: the agent is asked no faster than pollMs whatever a window wants.
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.ring = null;
  }

  describeError(code: number): string {
    switch (code) {
      case POLL_ERROR.TIMEOUT:
      case POLL_ERROR.UNREACHABLE:
      case POLL_ERROR.HTTP:
      case POLL_ERROR.MALFORMED:
        return `the agent's /power failed: ${this.lastReason ?? "no detail"}`;
      case POLL_ERROR.NO_WATTS:
        return "the agent reported watts null (it cannot read the card)";
      default:
        return `error ${code}`;
    }
  }

  private loop(): void {
    this.timer = setTimeout(() => {
      if (this.ring === null) return;
      if (this.inFlight === 0) this.poll();
      this.loop();
    }, this.pollMs);
    this.timer.unref();
  }

  /** Asks now (an edge was taken): the edge's next sample comes within a round trip. */
  kick(): void {
    if (this.ring !== null && this.inFlight < 2) this.poll();
  }

  private poll(): void {
    const ring = this.ring;
    if (ring === null) return;
    this.inFlight += 1;
    void getJson(this.url, this.timeoutMs, this.clock, { unref: true }).then((r) => {
      this.inFlight -= 1;
      if (this.ring !== ring) return;
      let t: bigint;
      let powerMw = Number.NaN;
      let error = 0;
      let readNs = 0;
      if (!r.ok) {
        t = this.clock();
        error = r.timedOut ? POLL_ERROR.TIMEOUT : POLL_ERROR.UNREACHABLE;
        this.lastReason = r.reason;
      } else {
        t = r.tSend + (r.tRecv - r.tSend) / 2n;
        readNs = Number(r.tRecv - r.tSend);
        const failed = httpFailure(r, "it");
        const power = failed === null ? parsePower(r.body) : fail(failed);
        if (!power.ok) {
          error = failed === null ? POLL_ERROR.MALFORMED : POLL_ERROR.HTTP;
          this.lastReason = failed ?? `malformed answer: ${power.reason}`;
        } else if (power.value.watts === null) error = POLL_ERROR.NO_WATTS;
        else powerMw = power.value.watts * 1000;
      }
      // Two polls can overlap (a kick during a slow one): keep time moving forward.
      if (t <= this.lastT) {
        if (error === 0) return;
        t = this.lastT + 1n;
      }
      this.lastT = t;
      // A good poll after failed ones ends their gap: JsRing marks it so that an edge inside it fails.
      ring.push(t, Number.NaN, powerMw, error, readNs);
    });
  }
}

// ---------------------------------------------------------------------------------------------

export interface RemoteTrackOptions {
  /** Timeout of every request (ms; default 500). */
  readonly timeoutMs?: number;
  /** Poll period against an agent that offers only /power (ms; default 100). */
  readonly pollMs?: number;
  /** CLOCK_MONOTONIC ns; tests pass their own. */
  readonly clock?: () => bigint;
}

const POLL_CAVEAT = (pollMs: number) =>
  `integral of watts polled from a giul 0.2 agent's /power every ${pollMs} ms (it offers no energy ` +
  "reading): coarser than a counter, and its watts may be a 1 s average";

/** A track over the giul-agent at `endpoint`, shared by every window on that node. */
export class RemoteTrack implements Track {
  readonly backend = "remote_agent" as const;
  readonly endpoint: string;
  private readonly base: URL;
  private readonly timeoutMs: number;
  private readonly pollMs: number;
  private readonly clock: () => bigint;
  private mode: "unknown" | "exact" | "poll" = "unknown";
  private probing: Promise<string | null> | null = null;
  private probeReason: string | null = null;
  /** performance.now() before which a failed probe is not tried again. */
  private retryAt = 0;
  /** Failed probes in a row: 1 s, 2 s, … up to 30 s before the next. */
  private readonly probeBackoff = new Backoff(1_000, 30_000);
  private users = 0;
  private polled: RingTrack | null = null;
  private pollSource: PollSource | null = null;
  private innerRetained = false;
  private batch: RemoteEdge[] | null = null;

  constructor(endpoint: string, options: RemoteTrackOptions = {}) {
    this.endpoint = endpoint;
    this.base = agentBase(endpoint);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.pollMs = options.pollMs ?? DEFAULT_POLL_MS;
    this.clock = options.clock ?? process.hrtime.bigint;
  }

  /** "exact" (the agent's cumulative readings), "poll" (a Python agent's watts) or not yet known. */
  get agentMode(): "unknown" | "exact" | "poll" {
    return this.mode;
  }

  ready(): Promise<Check> {
    if (this.mode === "exact") return Promise.resolve(OK);
    if (this.mode === "poll") return (this.polled as RingTrack).ready();
    if (performance.now() < this.retryAt)
      return Promise.resolve(this.probeReason === null ? OK : fail(this.probeReason));
    if (this.probing === null) {
      this.probing = this.probe().finally(() => {
        this.probing = null;
      });
    }
    return this.probing.then((reason) => {
      if (reason !== null) return fail(reason);
      return this.mode === "poll" ? (this.polled as RingTrack).ready() : OK;
    });
  }

  /** Tells the agent's kind from its /power. Never rejects. */
  private async probe(): Promise<string | null> {
    const url = new URL("power", this.base);
    const r = await getJson(url, this.timeoutMs, this.clock);
    let reason: string | null;
    if (!r.ok) reason = `the giul-agent at ${url.href} did not answer: ${r.reason}`;
    else {
      reason = httpFailure(r, `the giul-agent at ${url.href}`);
      if (reason === null) {
        const power = parsePower(r.body);
        if (!power.ok) reason = `the giul-agent at ${url.href} answered malformed JSON: ${power.reason}`;
        else if (power.value.exact) this.mode = "exact";
        else this.startPolling(url);
      }
    }
    if (reason !== null) {
      this.retryAt = performance.now() + this.probeBackoff.fail();
      this.probeReason = reason;
    } else {
      this.probeBackoff.reset();
      this.probeReason = null;
    }
    return reason;
  }

  private startPolling(url: URL): void {
    this.pollSource = new PollSource(url, this.pollMs, this.timeoutMs, this.clock);
    this.polled = new RingTrack("remote_agent", this.pollSource, this.clock);
    this.mode = "poll";
    this.syncRetention();
  }

  private syncRetention(): void {
    if (this.polled === null) return;
    if (this.users > 0 && !this.innerRetained) {
      this.polled.retain(this.pollMs);
      this.innerRetained = true;
    } else if (this.users === 0 && this.innerRetained) {
      this.polled.release();
      this.innerRetained = false;
    }
  }

  retain(_periodMs: number): void {
    this.users += 1;
    this.syncRetention();
  }

  release(): void {
    this.users = Math.max(0, this.users - 1);
    this.syncRetention();
  }

  edge(): Edge {
    if (this.mode === "poll" && this.polled !== null) {
      const e = this.polled.edge();
      this.pollSource?.kick();
      return e;
    }
    const tNs = this.clock();
    if (this.mode !== "exact") return { tNs };
    const e = new RemoteEdge(tNs);
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

  settle(edges: readonly Edge[]): Promise<void> {
    const waits: Promise<void>[] = [];
    let inner = false;
    for (const e of edges) {
      if (e instanceof RemoteEdge) waits.push(e.done);
      else inner = true;
    }
    if (inner && this.polled !== null) waits.push(this.polled.settle(edges));
    return waits.length === 0 ? Promise.resolve() : Promise.all(waits).then(() => undefined);
  }

  span(from: Edge, to: Edge): SpanMeasurement {
    if (from instanceof RemoteEdge && to instanceof RemoteEdge) return exactSpan(from, to);
    if (from instanceof RemoteEdge || to instanceof RemoteEdge) {
      return { ok: false, reason: "the agent changed kind inside the window" };
    }
    if (this.mode === "poll" && this.polled !== null) {
      const m = this.polled.span(from, to);
      if (!m.ok) return { ok: false, reason: `giul 0.2 agent at ${this.base.href}: ${m.reason}` };
      return { ...m, caveat: POLL_CAVEAT(this.pollMs) };
    }
    return {
      ok: false,
      reason:
        this.probeReason ?? `the giul-agent at ${this.base.href} was not reachable at the window's edges`,
    };
  }
}

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

/** A remote track per endpoint and timeout (select.ts caches it per node). */
export function remoteTrack(endpoint: string, options: RemoteTrackOptions = {}): RemoteTrack {
  return new RemoteTrack(endpoint, options);
}

/**
 * Contention and probeNode through the agent: its /power's compute_apps and memory fields (either
 * agent's). A process list it cannot give (null) is a failed read, never an empty card.
 */
export function agentCardReader(endpoint: string, timeoutMs = DEFAULT_TIMEOUT_MS): CardReader {
  const read = async () => ({ tNs: process.hrtime.bigint(), r: await fetchAgentPower(endpoint, timeoutMs) });
  return {
    async readProcesses(): Promise<ProcessRead> {
      const { tNs, r } = await read();
      if (!r.ok) return { ok: false, tNs, reason: r.reason };
      if (r.value.computeApps === null) {
        return {
          ok: false,
          tNs,
          reason: "the giul-agent cannot read the card's processes (compute_apps null)",
        };
      }
      return { ok: true, tNs, processes: r.value.computeApps };
    },
    async readState(): Promise<Result<CardState>> {
      const { r } = await read();
      if (!r.ok) return r;
      const p = r.value;
      if (p.computeApps === null)
        return fail("the giul-agent cannot read the card's processes (compute_apps null)");
      return ok({
        memoryFreeMib: p.memoryFreeMib,
        memoryUsedMib: p.memoryUsedMib,
        memoryTotalMib: p.memoryTotalMib,
        utilizationPct: p.utilizationPct,
        computeApps: p.computeApps,
      });
    },
  };
}
