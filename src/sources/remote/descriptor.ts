/**
 * The `remote_agent` backend: a node metered through the giul-agent on it, over HTTP
 * (./agent-client.ts). The agent's kind is told from its /power, then every window goes to the
 * track for that kind:
 * - this package's agent (its /power carries `energy_j`): the agent's cumulative energy read at
 *   each edge ({@link ExactTrack}, ./exact.ts);
 * - a Python giul 0.2 agent (watts only): its /power polled and integrated, with a caveat
 *   ({@link PolledTrack}, ./poll.ts).
 * An agent that cannot be reached is asked again after a backoff (1 s, doubling, up to 30 s).
 *
 * Every request has a timeout (default 500 ms). An unreachable, slow or malformed agent costs the
 * measurement, with the reason, never the request; close() waits at most about one timeout.
 */

import type { BackendDescriptor } from "../../track/descriptor.js";
import type { Edge, EdgeError, IntervalMeasurement, Track } from "../../track/track.js";
import { Backoff } from "../../vocabulary/backoff.js";
import { type Check, fail, OK, ok, type SpanMeasurement } from "../../vocabulary/measurement.js";
import { parsePower } from "../../vocabulary/wire.js";
import {
  agentBase,
  agentCardReader,
  agentUrl,
  DEFAULT_TIMEOUT_MS,
  getJson,
  httpFailure,
} from "./agent-client.js";
import { ExactTrack } from "./exact.js";
import { PolledTrack } from "./poll.js";

export const DEFAULT_POLL_MS = 100;

export interface RemoteTrackOptions {
  /** Timeout of every request (ms; default 500). */
  readonly timeoutMs?: number;
  /** Poll period against an agent that offers only /power (ms; default 100). */
  readonly pollMs?: number;
  /** CLOCK_MONOTONIC ns. Default: process.hrtime.bigint. */
  readonly clock?: () => bigint;
}

/** A track over the giul-agent at `endpoint`, shared by every window on that node. */
export class RemoteTrack implements Track {
  readonly backend = "remote_agent" as const;
  readonly endpoint: string;
  private readonly base: URL;
  private readonly timeoutMs: number;
  private readonly pollMs: number;
  private readonly clock: () => bigint;
  /** The track for the agent's kind, once its /power has told it. */
  private agent: ExactTrack | PolledTrack | null = null;
  private probing: Promise<string | null> | null = null;
  private probeReason: string | null = null;
  /** performance.now() before which a failed probe is not tried again. */
  private retryAt = 0;
  /** Failed probes in a row: 1 s, 2 s, … up to 30 s before the next. */
  private readonly probeBackoff = new Backoff(1_000, 30_000);
  private users = 0;
  /** Whether `agent` is retained on behalf of this track's users. */
  private agentRetained = false;

  constructor(endpoint: string, options: RemoteTrackOptions = {}) {
    this.endpoint = endpoint;
    this.base = agentBase(endpoint);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.pollMs = options.pollMs ?? DEFAULT_POLL_MS;
    this.clock = options.clock ?? process.hrtime.bigint;
  }

  ready(): Promise<Check> {
    if (this.agent !== null) return this.agent.ready();
    if (performance.now() < this.retryAt)
      return Promise.resolve(this.probeReason === null ? OK : fail(this.probeReason));
    if (this.probing === null) {
      this.probing = this.probe().finally(() => {
        this.probing = null;
      });
    }
    return this.probing.then((reason) => {
      if (reason !== null) return fail(reason);
      return this.agent === null ? OK : this.agent.ready();
    });
  }

  /** Tells the agent's kind from its /power. Never rejects. */
  private async probe(): Promise<string | null> {
    const url = agentUrl(this.base, "power");
    const r = await getJson(url, this.timeoutMs, this.clock);
    let reason: string | null;
    if (!r.ok) reason = `the giul-agent at ${url.href} did not answer: ${r.reason}`;
    else {
      reason = httpFailure(r, `the giul-agent at ${url.href}`);
      if (reason === null) {
        const power = parsePower(r.body);
        if (!power.ok) reason = `the giul-agent at ${url.href} answered malformed JSON: ${power.reason}`;
        else if (power.value.exact) this.agent = new ExactTrack(this.base, this.timeoutMs, this.clock);
        else this.agent = new PolledTrack(url, this.base, this.pollMs, this.timeoutMs, this.clock);
        this.syncRetention();
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

  /** The agent's track is retained once while this track has users. */
  private syncRetention(): void {
    if (this.agent === null) return;
    if (this.users > 0 && !this.agentRetained) {
      this.agent.retain(this.pollMs);
      this.agentRetained = true;
    } else if (this.users === 0 && this.agentRetained) {
      this.agent.release();
      this.agentRetained = false;
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
    if (this.agent !== null) return this.agent.edge();
    return { tNs: this.clock() };
  }

  settle(edges: readonly Edge[]): Promise<void> {
    return this.agent === null ? Promise.resolve() : this.agent.settle(edges);
  }

  span(from: Edge, to: Edge, bound = true): SpanMeasurement {
    if (this.agent !== null) return this.agent.span(from, to, bound);
    return fail(this.unreachable());
  }

  interval(from: Edge, to: Edge): IntervalMeasurement {
    if (this.agent !== null) return this.agent.interval(from, to);
    return fail(this.unreachable());
  }

  edgeError(edge: Edge): EdgeError {
    if (this.agent !== null) return this.agent.edgeError(edge);
    return fail(this.unreachable());
  }

  private unreachable(): string {
    return this.probeReason ?? `the giul-agent at ${this.base.href} was not reachable at the window's edges`;
  }
}

/** A remote track per endpoint and timeout (selection caches it per node). */
export function remoteTrack(endpoint: string, options: RemoteTrackOptions = {}): RemoteTrack {
  return new RemoteTrack(endpoint, options);
}

/** `remote_agent`: a node that is not local, through the giul-agent at its powerEndpoint. */
export const remoteAgentBackend: BackendDescriptor = {
  name: "remote_agent",
  canServe: (card) => !card.isLocal && card.powerEndpoint !== null,
  open(card) {
    const endpoint = card.powerEndpoint;
    if (endpoint === null) return fail("the node is not local and has no powerEndpoint");
    return ok({
      track: remoteTrack(endpoint, { timeoutMs: card.timeoutMs }),
      reader: agentCardReader(endpoint, card.timeoutMs),
    });
  },
};
