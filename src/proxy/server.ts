/**
 * giul-proxy: a transparent HTTP reverse proxy in front of an OpenAI-compatible inference server
 * (vLLM, SGLang, TGI, llama.cpp) on the same host, metering each request as a window with shared
 * attribution (./exchange.ts), and an admin listener serving /metrics.
 *
 * Hardened as giul-agent is: loopback by default (a warning on every interface), bounded header
 * and body sizes, header/body/keep-alive timeouts against slow clients, an upstream inactivity
 * timeout, a stall timeout for clients that stop reading, and a cap on connections. No input can
 * crash it: every failure is an HTTP status or a cut-off response, logged with its outcome.
 */

import { randomUUID } from "node:crypto";
import {
  Agent,
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { answerClientErrors } from "../agent/connections.js";
import { EnergyTotal, freshPowerW } from "../edges/energy-total.js";
import { nodeHwId } from "../exporters/names.js";
import { Meter, type MeterOptions } from "../meter/meter.js";
import { type Energy, unmeasured } from "../rules/energy.js";
import { nodesOfCards, type ResolvedNode, resolveNode } from "../rules/node.js";
import { type CardIdentity, cardInUse } from "../select/in-use.js";
import { forcedBackend, nodeAtCard, type Selection, select } from "../select/index.js";
import type { Track } from "../track/track.js";
import { whileAlive } from "../vocabulary/alive.js";
import { debug } from "../vocabulary/debug.js";
import { GiulError } from "../vocabulary/errors.js";
import type { BackendName } from "../vocabulary/measurement.js";
import { Exchange, type ExchangeContext, type Upstream } from "./exchange.js";
import { sendError } from "./headers.js";
import { type CardGauges, ProxyMetrics } from "./metrics.js";
import { type ProxyOptions, resolveProxyOptions } from "./options.js";
import type { ProxyRecord } from "./record.js";

export type { ProxyOptions } from "./options.js";
export type { Outcome, ProxyRecord } from "./record.js";

export interface MeteringProxy {
  readonly server: Server;
  /** The admin listener (/metrics, /healthz), or null when there is none. */
  readonly admin: Server | null;
  /** http://host:port of the proxy. */
  readonly url: string;
  /** http://host:port of the admin listener, or null. */
  readonly adminUrl: string | null;
  readonly upstream: string;
  /** The backend metering the card. */
  readonly backend: BackendName;
  /** Why the card cannot be measured, when it cannot (requests are then estimated or unknown). */
  readonly reason: string | null;
  readonly metrics: ProxyMetrics;
  /** Requests being forwarded now. */
  inFlight(): number;
  /** Stops accepting, lets requests in flight finish for up to `drainMs` (default 10 s), then closes. */
  close(drainMs?: number): Promise<void>;
}

const EVERY_INTERFACE = new Set(["0.0.0.0", "::", "", "[::]"]);
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once("error", onError);
    server.listen({ port, host }, () => {
      server.off("error", onError);
      resolve(server.address() as AddressInfo);
    });
  });
}

function urlOf(address: AddressInfo): string {
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

/** Malformed requests, oversized heads and slow ones get a status and a closed connection. */
function guard(server: Server): void {
  answerClientErrors(server);
  server.on("connection", (socket: Socket) => {
    socket.on("error", () => socket.destroy());
  });
}

/** The request's body, up to `max` bytes: "too_large" past it, null when the client went away. */
function readBody(req: IncomingMessage, max: number): Promise<Buffer | "too_large" | null> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.removeAllListeners("data");
        req.pause();
        resolve("too_large");
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("close", () => {
      if (!req.complete) resolve(null);
    });
    req.on("error", () => resolve(null));
  });
}

/** Starts the proxy and its admin listener; resolves once both listen. Throws GiulError for bad options. */
export async function startProxy(options: ProxyOptions): Promise<MeteringProxy> {
  const o = resolveProxyOptions(options);
  const node = resolveNode(o.node);
  const meterOptions: MeterOptions = { joulesPer1kHint: o.joulesPer1kHint, periodMs: o.periodMs };
  Meter.forNode(node, meterOptions); // checks the options (and GIUL_BACKEND) now, not per request

  // The card's sampler runs for the proxy's life: windows open at once, and /metrics reads it.
  // Card probes do not hold the event loop open; the proxy does wait for them before it listens.
  // Every card of the node (tensor parallel: several), each with its own sampler.
  const cards = await Promise.all(nodesOfCards(node).map((card) => proxyCard(card, o.periodMs)));
  const tracks = cards.map((c) => c.track);
  const several = cards.length > 1;
  const backends = new Set(cards.map((c) => c.selection.backend));
  const backend = backends.size === 1 ? (cards[0] as ProxyCard).selection.backend : "mixed";
  const reasons = cards.flatMap((c) =>
    c.reason === null ? [] : [several ? `GPU ${c.index >= 0 ? c.index : c.uuid}: ${c.reason}` : c.reason],
  );
  const reason = reasons.length === 0 ? null : reasons.join("; ");
  const metrics = new ProxyMetrics(() => ({ hwId: nodeHwId(node), name: node.name }), cards.length);
  const https = o.upstream.protocol === "https:";
  const agentOptions = {
    keepAlive: true,
    maxSockets: o.maxUpstreamSockets,
    maxFreeSockets: 256,
    timeout: 4_000,
    scheduling: "lifo" as const,
  };
  const upstream: Upstream = {
    request: https ? (httpsRequest as unknown as typeof httpRequest) : httpRequest,
    agent: https ? new HttpsAgent(agentOptions) : new Agent(agentOptions),
    hostname: o.upstream.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: Number(o.upstream.port || (https ? 443 : 80)),
    host: o.upstream.host,
    basePath: o.upstream.pathname.replace(/\/+$/, ""),
  };
  const inFlight = new Set<Promise<void>>();
  const ctx: ExchangeContext = {
    options: o,
    severalCards: several,
    upstream,
    meter: () => Meter.forNode(node, meterOptions),
    unmetered: (why: string, seconds: number, tokens: number | null): Energy =>
      unmeasured(why, {
        backend,
        seconds,
        idleW: node.cards.reduce((sum, card) => sum + card.idleW, 0),
        tokens,
        joulesPer1kHint: o.joulesPer1kHint,
        contendedBy: null,
        contentionUnchecked: null,
        shared: false,
        stages: {},
        attribution: "shared",
        concurrency: null,
      }),
    finished: (record: ProxyRecord, meter: Meter | null) => {
      metrics.observe(record);
      try {
        o.onRecord?.(record, meter);
      } catch (error) {
        debug("proxy: onRecord threw: %s", String(error));
      }
    },
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const given = req.headers["x-request-id"];
    const id = typeof given === "string" && REQUEST_ID.test(given) ? given : randomUUID();
    if (req.headers.upgrade !== undefined) {
      sendError(res, 501, "upgrade_unsupported", "giul-proxy does not forward protocol upgrades", [], true);
      return;
    }
    if (!req.url?.startsWith("/")) {
      sendError(res, 400, "bad_request", "expected a path (origin-form request target)", [], true);
      return;
    }
    const declared = req.headers["content-length"];
    const tooLarge = () =>
      sendError(
        res,
        413,
        "request_too_large",
        `the request body is larger than ${o.maxBodyBytes} bytes`,
        [],
        true,
      );
    if (declared !== undefined && Number(declared) > o.maxBodyBytes) {
      tooLarge();
      return;
    }
    metrics.inFlight++;
    const exchange = readBody(req, o.maxBodyBytes)
      .then((body) => {
        if (body === null) return;
        if (body === "too_large") {
          tooLarge();
          return;
        }
        const ex = new Exchange(ctx, req, res, id, body);
        void ex.run();
        return ex.settled;
      })
      .catch((error: unknown) => {
        debug("proxy: exchange failed: %s", String(error));
        sendError(res, 500, "proxy_error", "internal error in giul-proxy");
      })
      .finally(() => {
        metrics.inFlight--;
        inFlight.delete(exchange);
      });
    inFlight.add(exchange);
  };

  const server = createServer(
    {
      headersTimeout: o.headersTimeoutMs,
      requestTimeout: o.requestTimeoutMs,
      keepAliveTimeout: o.keepAliveTimeoutMs,
      maxHeaderSize: o.maxHeaderBytes,
      connectionsCheckingInterval: Math.min(1_000, o.headersTimeoutMs),
      noDelay: true,
    },
    handle,
  );
  server.maxConnections = o.maxConnections;
  guard(server);

  let admin: Server | null = null;
  if (o.adminPort !== null) {
    admin = createServer(
      { headersTimeout: 5_000, requestTimeout: 10_000, maxHeaderSize: 8_192 },
      (req, res) => {
        const path = (req.url ?? "/").split("?")[0];
        if (path !== "/metrics" && path !== "/healthz") {
          sendError(res, 404, "not_found", "this admin listener serves GET /metrics and /healthz");
          return;
        }
        if (req.method !== "GET" && req.method !== "HEAD") {
          sendError(res, 405, "method_not_allowed", "GET or HEAD only", [["allow", "GET, HEAD"]]);
          return;
        }
        const body = path === "/healthz" ? "ok\n" : metrics.format(cardGauges());
        res.writeHead(200, {
          "content-type":
            path === "/healthz" ? "text/plain; charset=utf-8" : "text/plain; version=0.0.4; charset=utf-8",
          "content-length": Buffer.byteLength(body),
          "cache-control": "no-store",
        });
        res.end(body);
      },
    );
    admin.maxConnections = 64;
    guard(admin);
  }

  const cardGauges = (): CardGauges[] => cards.map((c) => gauges(c, node, several));

  let address: AddressInfo;
  let adminAddress: AddressInfo | null = null;
  try {
    address = await listen(server, o.port, o.host);
    if (admin !== null) adminAddress = await listen(admin, o.adminPort as number, o.adminHost);
  } catch (error) {
    server.close();
    upstream.agent.destroy();
    for (const t of tracks) t?.release();
    throw error;
  }
  for (const [what, host] of [
    ["proxy", o.host],
    ["admin listener", o.adminHost],
  ] as const) {
    if (EVERY_INTERFACE.has(host) && (what === "proxy" || admin !== null))
      o.warn(
        `giul-proxy: the ${what} listens on every interface (${host}); bind a private address instead unless the host is otherwise firewalled`,
      );
  }
  server.on("error", (error) => o.warn(`giul-proxy: server error: ${String(error)}`));

  let closed: Promise<void> | null = null;
  return {
    server,
    admin,
    url: urlOf(address),
    adminUrl: adminAddress === null ? null : urlOf(adminAddress),
    upstream: o.upstream.href,
    backend,
    reason,
    metrics,
    inFlight: () => inFlight.size,
    close(drainMs = 10_000) {
      closed ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        admin?.close();
        admin?.closeAllConnections();
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.allSettled([...inFlight]),
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, drainMs);
          }),
        ]);
        clearTimeout(timer);
        server.closeAllConnections();
        await Promise.race([Promise.allSettled([...inFlight]), new Promise((r) => setTimeout(r, 1_000))]);
        await stopped;
        upstream.agent.destroy();
        for (const t of tracks) t?.release();
      })();
      return closed;
    },
  };
}

/** One card of the proxy's node: its backend, its track retained for the proxy's life, its name. */
interface ProxyCard {
  /** The card's index (−1: named by a UUID no card has here, or a remote card). */
  readonly index: number;
  /** The UUID the node named it by, or null. */
  readonly uuid: string | null;
  /** hw_energy_joules_total: the card's energy since the proxy first reported it (its first scrape). */
  readonly total: EnergyTotal;
  readonly selection: Selection;
  readonly track: Track | null;
  readonly reason: string | null;
  name: string | null;
}

async function proxyCard(card: ResolvedNode, periodMs: number): Promise<ProxyCard> {
  const selection = await whileAlive(select(card, forcedBackend()));
  if (selection.forcedUnavailable !== undefined)
    throw new GiulError("BACKEND_UNAVAILABLE", selection.forcedUnavailable, { field: "GIUL_BACKEND" });
  const track: Track | null = selection.track;
  let reason = selection.reason;
  if (track !== null) {
    track.retain(periodMs);
    const ready = await whileAlive(track.ready());
    reason = ready.ok ? reason : ready.reason;
  }
  const uuid = card.cards[0]?.gpuUuid ?? null;
  const index = nodeAtCard(card).gpuIndex;
  const out: ProxyCard = { index, uuid, total: new EnergyTotal(), selection, track, reason, name: null };
  void selection.reader
    ?.readInfo()
    .then((info) => {
      if (info.ok) out.name = info.value.name;
    })
    .catch(() => {});
  return out;
}

/** Who a card of the proxy is: as selection noted it (./../select/in-use.ts), or a remote agent's. */
function identityOf(c: ProxyCard, node: ResolvedNode, several: boolean): CardIdentity {
  const local = c.index >= 0 ? cardInUse(c.index)?.identity : undefined;
  if (node.isLocal && local !== undefined) return local;
  const at = c.index >= 0 ? `gpu${c.index}` : (c.uuid ?? "gpu");
  const id = node.isLocal ? (c.uuid ?? at) : several ? `${node.name}/${c.uuid ?? at}` : node.name;
  return { id, name: c.name ?? at, vendor: "NVIDIA", driverVersion: null };
}

/** The card as its sampler last read it; its energy since the proxy first reported it (its first scrape). */
function gauges(c: ProxyCard, node: ResolvedNode, several: boolean): CardGauges {
  const identity = identityOf(c, node, several);
  const readings = c.track?.readings;
  const sample = readings?.latest() ?? null;
  const info = readings?.ringInfo() ?? null;
  if (readings === undefined || info === null) return { identity, watts: null, energyJ: c.total.totalJ };
  return {
    identity,
    watts: freshPowerW(sample, info.periodNs, process.hrtime.bigint()),
    energyJ: c.total.observe(sample, info.column, readings),
  };
}
