/**
 * One request through giul-proxy, as one metered window: opened when the proxy starts forwarding,
 * marked `prefill` at the upstream's first body byte of a streamed answer (`decode` after it),
 * closed at the upstream's last byte, or when either side fails or goes away.
 *
 * How the energy reaches the client depends on what the upstream sends:
 * - a JSON body with a Content-Length within maxBodyBytes (and a bodiless answer): buffered, so
 *   that the energy goes in its headers (and, opted in, in `usage.energy`);
 * - server-sent events: passed on chunk by chunk, the record as one comment line before the final
 *   `data: [DONE]` (at the end when there is none), and in trailers;
 * - anything else: passed on chunk by chunk, the energy in trailers.
 * The upstream is paused while the client does not read (backpressure), never buffered.
 */
import type {
  Agent,
  ClientRequest,
  request as httpRequest,
  IncomingMessage,
  ServerResponse,
} from "node:http";
import type { Meter } from "../meter/meter.js";
import type { Energy } from "../rules/energy.js";
import { endToEnd, field, requestHeaders, sendError, without } from "./headers.js";
import { injectedAnswer, readHeldJson } from "./json-body.js";
import type { ResolvedProxyOptions } from "./options.js";
import {
  CARDS_FIELD,
  clientRecord,
  ENERGY_FIELDS,
  energyHeaders,
  type Outcome,
  type ProxyRecord,
  type RequestInfo,
  requestInfo,
  streamEnd,
} from "./record.js";
import { SseTap, type Usage } from "./sse.js";

export interface Upstream {
  readonly request: typeof httpRequest;
  readonly agent: Agent;
  readonly hostname: string;
  readonly port: number;
  /** The Host field sent upstream. */
  readonly host: string;
  /** Prefixed to every request's path ("" for none). */
  readonly basePath: string;
}

export interface ExchangeContext {
  readonly options: ResolvedProxyOptions;
  /** The node has several cards: the trailers also carry each card's part. */
  readonly severalCards: boolean;
  readonly upstream: Upstream;
  /** A new window on the node's card (not yet open). */
  readonly meter: () => Meter;
  /** The record of a window that could not be opened, under the same rules. */
  readonly unmetered: (reason: string, seconds: number, tokens: number | null) => Energy;
  readonly finished: (record: ProxyRecord, meter: Meter | null) => void;
}

type Mode = "buffer" | "sse" | "stream";
type Phase = "opening" | "forwarding" | "ending" | "done";

const CONTENT_LENGTH = new Set(["content-length"]);
const ENERGY_NAMES = new Set<string>([...ENERGY_FIELDS, CARDS_FIELD, "x-energy-request-id"]);
const JSON_TYPE = /^application\/(?:json|[^;\s]*\+json)\s*(?:;|$)/;
const RETRYABLE = new Set(["ECONNRESET", "EPIPE"]);

function flat(pairs: readonly [string, string][]): string[] {
  return pairs.flat();
}

export class Exchange {
  private readonly ctx: ExchangeContext;
  private readonly req: IncomingMessage;
  private readonly res: ServerResponse;
  private readonly id: string;
  private readonly body: Buffer;
  private readonly info: RequestInfo;
  private phase: Phase = "opening";
  private meter: Meter | null = null;
  private meterFailure = "metering did not open a window";
  private ureq: ClientRequest | null = null;
  private ures: IncomingMessage | null = null;
  private mode: Mode = "buffer";
  private tap: SseTap | null = null;
  private headers: string[] = [];
  private chunks: Buffer[] = [];
  private size = 0;
  private marked = false;
  private startedAt = new Date();
  private t0 = process.hrtime.bigint();
  private firstNs: bigint | null = null;
  private lastNs: bigint | null = null;
  private status: number | null = null;
  private usage: Usage | null = null;
  private paused = false;
  private pausedAt = 0n;
  private pausedNs = 0n;
  private idle: NodeJS.Timeout | null = null;
  private stall: NodeJS.Timeout | null = null;
  private connect: NodeJS.Timeout | null = null;
  /** Why the client side ended early (set before the response is destroyed). */
  private clientEnd: { outcome: Outcome; error: string } | null = null;
  /** The proxy cut the response off itself (the upstream failed mid-answer). */
  private failed = false;
  private settle: () => void = () => {};
  /** Resolves once the exchange is over and its record made. */
  readonly settled: Promise<void> = new Promise((resolve) => {
    this.settle = resolve;
  });

  constructor(ctx: ExchangeContext, req: IncomingMessage, res: ServerResponse, id: string, body: Buffer) {
    this.ctx = ctx;
    this.req = req;
    this.res = res;
    this.id = id;
    this.body = body;
    this.info = requestInfo(body);
    res.on("close", () => this.onClientClose());
  }

  /** Opens the window and forwards the request. Never rejects. */
  async run(): Promise<void> {
    try {
      this.meter = await this.ctx.meter().open();
    } catch (error) {
      this.meterFailure = `metering could not open a window: ${String(error)}`;
    }
    this.startedAt = new Date();
    this.t0 = process.hrtime.bigint();
    if (this.clientEnd !== null || this.res.destroyed) {
      this.phase = "ending";
      await this.closeMeter();
      this.done("client_closed", "the client went away before the request was forwarded");
      return;
    }
    this.phase = "forwarding";
    this.send(0);
  }

  private send(attempt: number): void {
    const { upstream, options } = this.ctx;
    const framed =
      this.req.headers["content-length"] !== undefined || this.req.headers["transfer-encoding"] !== undefined;
    const ureq = upstream.request({
      hostname: upstream.hostname,
      port: upstream.port,
      method: this.req.method,
      path: upstream.basePath + (this.req.url as string),
      headers: requestHeaders(
        this.req.rawHeaders,
        upstream.host,
        framed || this.body.length > 0 ? this.body.length : null,
      ),
      agent: upstream.agent,
    });
    this.ureq = ureq;
    ureq.on("socket", (socket) => {
      if (!socket.connecting) return;
      this.connect = setTimeout(() => {
        if (this.ureq === ureq)
          void this.fail(
            "upstream_timeout",
            `connecting to the upstream took over ${options.connectTimeoutMs} ms`,
          );
      }, options.connectTimeoutMs);
      socket.once("connect", () => this.clearConnect());
    });
    ureq.on("response", (ures) => this.onResponse(ureq, ures));
    ureq.on("error", (error: NodeJS.ErrnoException) => {
      if (this.phase !== "forwarding" || this.ureq !== ureq || this.ures !== null) return;
      this.clearConnect();
      if (attempt === 0 && ureq.reusedSocket && RETRYABLE.has(error.code ?? "")) {
        // The upstream closed an idle kept-alive connection as it was reused: nothing reached it.
        this.send(1);
        return;
      }
      void this.fail("upstream_unreachable", `the upstream could not be reached: ${error.message}`);
    });
    this.armIdle();
    ureq.end(this.body);
  }

  private onResponse(ureq: ClientRequest, ures: IncomingMessage): void {
    if (this.phase !== "forwarding" || this.ureq !== ureq) {
      ures.resume();
      return;
    }
    this.clearConnect();
    this.ures = ures;
    const status = ures.statusCode ?? 502;
    this.headers = endToEnd(ures.rawHeaders, ENERGY_NAMES);
    const type = (field(this.headers, "content-type") ?? "").toLowerCase();
    const length = field(this.headers, "content-length");
    this.status = status;
    if (this.bodiless()) this.mode = "buffer";
    else if (type.startsWith("text/event-stream")) this.mode = "sse";
    else if (
      JSON_TYPE.test(type) &&
      // Any framing: Content-Length within the limit, or chunked (held until it passes the limit).
      (length === undefined || (/^\d{1,15}$/.test(length) && Number(length) <= this.ctx.options.maxBodyBytes))
    )
      this.mode = "buffer";
    else this.mode = "stream";
    if (this.mode === "sse") this.tap = new SseTap();
    this.armIdle();
    ures.on("data", (chunk: Buffer) => this.onData(chunk));
    ures.on("end", () => void this.onEnd());
    ures.on("close", () => {
      if (!ures.complete)
        void this.fail(
          "upstream_failed",
          "the upstream closed the connection before the end of its response",
        );
    });
    ures.on("error", () => {});
    if (this.mode !== "buffer") this.writeHead();
  }

  /** The answer has no body (a HEAD, a 204 or 304). */
  private bodiless(): boolean {
    return this.req.method === "HEAD" || this.status === 204 || this.status === 304;
  }

  /** Trailers can be sent: an HTTP/1.1 client and a response with a body (chunked). */
  private canTrail(): boolean {
    return (
      this.req.httpVersion !== "1.0" &&
      this.req.method !== "HEAD" &&
      this.status !== 204 &&
      this.status !== 304
    );
  }

  /** Sends the upstream's status and fields for a streamed body. */
  private writeHead(): void {
    let headers = this.headers;
    const trailers = this.canTrail();
    if (this.mode === "sse" || trailers) headers = without(headers, CONTENT_LENGTH);
    headers.push("x-energy-request-id", this.id);
    if (trailers)
      headers.push(
        "Trailer",
        (this.ctx.severalCards ? [...ENERGY_FIELDS, CARDS_FIELD] : ENERGY_FIELDS).join(", "),
      );
    this.res.sendDate = false;
    this.res.writeHead(this.status as number, (this.ures as IncomingMessage).statusMessage, headers);
  }

  private onData(chunk: Buffer): void {
    if (this.phase !== "forwarding") return;
    if (this.firstNs === null) {
      this.firstNs = process.hrtime.bigint();
      if (this.mode !== "buffer" && this.meter !== null) {
        this.meter.mark("prefill");
        this.marked = true;
      }
    }
    this.idle?.refresh();
    if (this.mode === "buffer") {
      this.size += chunk.length;
      this.chunks.push(chunk);
      if (this.size <= this.ctx.options.maxBodyBytes) return;
      // Longer than it said: pass it on as a stream after all.
      this.mode = "stream";
      this.writeHead();
      const buffered = Buffer.concat(this.chunks);
      this.chunks = [];
      this.write(buffered);
      return;
    }
    const out = this.tap === null ? chunk : this.tap.push(chunk);
    if (out !== null) this.write(out);
  }

  /** Writes to the client; pauses the upstream until the client has read it (backpressure). */
  private write(bytes: Buffer): void {
    if (this.res.write(bytes) || this.paused || this.phase !== "forwarding") return;
    this.paused = true;
    this.pausedAt = process.hrtime.bigint();
    this.ures?.pause();
    this.clearIdle();
    const ms = this.ctx.options.clientStallTimeoutMs;
    this.stall = setTimeout(
      () =>
        this.abandon(
          "client_stalled",
          `the client read nothing for ${ms} ms while the upstream had more to send`,
        ),
      ms,
    );
    this.res.once("drain", () => {
      this.unpause();
      if (this.phase === "forwarding") {
        this.ures?.resume();
        this.armIdle();
      }
    });
  }

  private unpause(): void {
    if (!this.paused) return;
    this.paused = false;
    this.pausedNs += process.hrtime.bigint() - this.pausedAt;
    if (this.stall !== null) clearTimeout(this.stall);
    this.stall = null;
  }

  private async onEnd(): Promise<void> {
    if (this.phase !== "forwarding") return;
    this.phase = "ending";
    this.lastNs = process.hrtime.bigint();
    this.clearTimers();
    await this.closeMeter();
    const res = this.res;
    if (this.mode === "buffer") {
      let body: Buffer = Buffer.concat(this.chunks);
      const encoding = field(this.headers, "content-encoding") ?? "identity";
      const json = JSON_TYPE.test((field(this.headers, "content-type") ?? "").toLowerCase());
      const held = json ? await readHeldJson(body, encoding, this.ctx.options.maxBodyBytes) : null;
      if (held !== null) this.usage = held.usage;
      const energy = this.energy();
      // Held whole, however it was framed: sent with its length.
      let headers = this.bodiless()
        ? this.headers
        : [...without(this.headers, CONTENT_LENGTH), "content-length", String(body.length)];
      const injected =
        this.ctx.options.injectUsage && held !== null
          ? injectedAnswer(held, headers, clientRecord(this.id, energy))
          : null;
      if (injected !== null) ({ body, headers } = injected);
      headers.push("x-energy-request-id", this.id, ...flat(energyHeaders(energy)));
      if (!res.destroyed) {
        res.sendDate = false;
        res.writeHead(this.status as number, (this.ures as IncomingMessage).statusMessage, headers);
        res.end(body);
      }
      this.doneAfterEnd(energy);
      return;
    }
    this.usage = this.tap?.usage ?? null;
    const energy = this.energy();
    if (!res.destroyed) {
      if (this.tap !== null) {
        const inject = this.info.includeUsage || this.ctx.options.injectUsage;
        const o = { inject, add: this.ctx.options.injectUsage };
        res.write(streamEnd(this.tap.end(), clientRecord(this.id, energy), o));
      }
      if (this.canTrail()) res.addTrailers(energyHeaders(energy));
      res.end();
    }
    this.doneAfterEnd(energy);
  }

  /** The upstream's answer ended: complete, unless the client went away meanwhile. */
  private doneAfterEnd(energy: Energy): void {
    const gone =
      this.clientEnd ??
      (this.res.destroyed && !this.res.writableFinished
        ? { outcome: "client_closed" as const, error: "the client went away before the end of the response" }
        : null);
    this.done(gone?.outcome ?? "complete", gone?.error ?? null, energy);
  }

  /** The upstream failed (or timed out): a 502/504 when nothing was sent yet, else a cut-off answer. */
  private async fail(outcome: Outcome, error: string): Promise<void> {
    if (this.phase !== "forwarding") return;
    this.phase = "ending";
    this.lastNs = process.hrtime.bigint();
    this.clearTimers();
    this.ureq?.destroy();
    await this.closeMeter();
    const energy = this.energy();
    if (!this.res.headersSent) {
      const status = outcome === "upstream_timeout" ? 504 : 502;
      this.status = status;
      sendError(this.res, status, outcome, error, [
        ["x-energy-request-id", this.id],
        ...energyHeaders(energy),
      ]);
    } else {
      // The status is sent; all the client can be told is that the body did not end.
      this.failed = true;
      this.res.destroy();
    }
    this.done(outcome, error, energy);
  }

  /** Gives up on the client (it stalled): the response is destroyed, and the close handler follows. */
  private abandon(outcome: Outcome, error: string): void {
    if (this.phase === "done") return;
    this.clientEnd = { outcome, error };
    this.res.destroy();
  }

  private onClientClose(): void {
    if (this.res.writableFinished || this.phase === "done" || this.failed) return;
    this.clientEnd ??= {
      outcome: "client_closed",
      error: "the client closed the connection before the end of the response",
    };
    if (this.phase !== "forwarding") return; // opening: run() sees it; ending: done() reports it
    this.phase = "ending";
    this.lastNs = process.hrtime.bigint();
    this.clearTimers();
    this.ureq?.destroy();
    const end = this.clientEnd;
    void this.closeMeter().then(() => this.done(end.outcome, end.error));
  }

  /** Closes the window (marking `decode` when `prefill` was marked). Never rejects. */
  private async closeMeter(): Promise<void> {
    const meter = this.meter;
    if (meter === null) return;
    try {
      if (this.marked) meter.mark("decode");
      await meter.close();
    } catch (error) {
      this.meterFailure = `closing the window failed: ${String(error)}`;
      this.meter = null;
    }
  }

  private energy(): Energy {
    const tokens = this.usage?.completionTokens ?? null;
    if (this.meter !== null) {
      try {
        return this.meter.result({ tokens });
      } catch (error) {
        this.meterFailure = `reading the window failed: ${String(error)}`;
      }
    }
    const end = this.lastNs ?? process.hrtime.bigint();
    return this.ctx.unmetered(this.meterFailure, Number(end - this.t0) / 1e9, tokens);
  }

  private done(outcome: Outcome, error: string | null, energy: Energy = this.energy()): void {
    if (this.phase === "done") return;
    this.phase = "done";
    this.clearTimers();
    this.unpause();
    const end = this.lastNs ?? process.hrtime.bigint();
    const record: ProxyRecord = {
      request_id: this.id,
      ...energy.toJSON(),
      http_method: this.req.method ?? "",
      path: (this.req.url ?? "").split("?")[0] as string,
      model: this.info.model,
      stream: this.mode === "sse",
      status: this.res.headersSent ? this.status : null,
      outcome,
      error,
      prompt_tokens: this.usage?.promptTokens ?? null,
      completion_tokens: this.usage?.completionTokens ?? null,
      started_at: this.startedAt.toISOString(),
      ttfb_ms: this.firstNs === null ? null : Number(this.firstNs - this.t0) / 1e6,
      duration_ms: Number(end - this.t0) / 1e6,
      client_paused_ms: Number(this.pausedNs) / 1e6,
    };
    try {
      this.ctx.finished(record, this.meter);
    } finally {
      this.settle();
    }
  }

  private armIdle(): void {
    this.clearIdle();
    const ms = this.ctx.options.upstreamTimeoutMs;
    this.idle = setTimeout(
      () => void this.fail("upstream_timeout", `the upstream sent nothing for ${ms} ms`),
      ms,
    );
  }

  private clearIdle(): void {
    if (this.idle !== null) clearTimeout(this.idle);
    this.idle = null;
  }

  private clearConnect(): void {
    if (this.connect !== null) clearTimeout(this.connect);
    this.connect = null;
  }

  private clearTimers(): void {
    this.clearIdle();
    this.clearConnect();
    if (this.stall !== null) clearTimeout(this.stall);
    this.stall = null;
  }
}
