/**
 * The remote track against a Python giul 0.2 agent (its /power has no energy fields): `/power` is
 * polled every `pollMs`, and at each edge, into a JsRing, and the windows are RingTrack's over the
 * integral of the polled watts, with a caveat saying so.
 */

import { JsRing } from "../../ring/js-ring.js";
import { RingTrack } from "../../ring/ring-track.js";
import type { RingSource, SampleRing } from "../../track/ring.js";
import type { Edge, EdgeError, IntervalMeasurement, Track } from "../../track/track.js";
import { type Check, fail, ok, type Result, type SpanMeasurement } from "../../vocabulary/measurement.js";
import { parsePower } from "../../vocabulary/wire.js";
import { getJson, httpFailure } from "./agent-client.js";

/** Error codes of the polled ring's samples (Sample.error). */
const POLL_ERROR = Object.freeze({ TIMEOUT: 1, UNREACHABLE: 2, HTTP: 3, MALFORMED: 4, NO_WATTS: 5 });

/** Polls the agent's /power every `pollMs` (and at each edge) into a JsRing of its watts. */
class PollSource implements RingSource {
  readonly column = "integral" as const;
  /** nvidia-smi's power.draw, which the Python agent reports, is a 1 s average on recent cards. */
  readonly averagedPower = true;
  readonly averagedPowerSource = "the agent's /power watts (nvidia-smi's power.draw)";
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

const POLL_CAVEAT = (pollMs: number) =>
  `integral of watts polled from a giul 0.2 agent's /power every ${pollMs} ms (it offers no energy ` +
  "reading): coarser than a counter, and its watts may be a 1 s average";

/** RingTrack over a polled agent: each edge also asks the agent now, and each figure says how it was had. */
export class PolledTrack implements Track {
  readonly backend = "remote_agent" as const;
  private readonly source: PollSource;
  private readonly ring: RingTrack;

  /** `url` is the agent's /power; `base` names the agent in reasons. */
  constructor(
    url: URL,
    private readonly base: URL,
    private readonly pollMs: number,
    timeoutMs: number,
    clock: () => bigint,
  ) {
    this.source = new PollSource(url, pollMs, timeoutMs, clock);
    this.ring = new RingTrack("remote_agent", this.source, clock);
  }

  ready(): Promise<Check> {
    return this.ring.ready();
  }

  /** The agent is polled every pollMs whatever period a window asks for. */
  retain(_periodMs: number): void {
    this.ring.retain(this.pollMs);
  }

  release(): void {
    this.ring.release();
  }

  edge(): Edge {
    const e = this.ring.edge();
    this.source.kick();
    return e;
  }

  settle(edges: readonly Edge[]): Promise<void> {
    return this.ring.settle(edges);
  }

  interval(from: Edge, to: Edge): IntervalMeasurement {
    return this.ring.interval(from, to);
  }

  edgeError(edge: Edge): EdgeError {
    return this.ring.edgeError(edge);
  }

  span(from: Edge, to: Edge, bound = true): SpanMeasurement {
    const m = this.ring.span(from, to, bound);
    if (!m.ok) return { ok: false, reason: `giul 0.2 agent at ${this.base.href}: ${m.reason}` };
    return { ...m, caveat: POLL_CAVEAT(this.pollMs) };
  }
}
