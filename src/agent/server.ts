/**
 * giul-agent's HTTP server: Node's standard `http` only, read-only.
 *
 * - `GET /power`   the Python agent's fields for one card, plus this agent's energy extras (wire.ts)
 * - `GET /energy`  the cumulative energy at the request's arrival, for a remote meter's edges
 * - `GET /metrics` Prometheus text for every served card
 *
 * `?gpu=N` (or the card's UUID) picks a served card (default: the first). HEAD is answered like GET without a body.
 * Anything else is 404 (unknown path) or 405 (another method); a request with a body is refused
 * (413) and its connection closed. Slow clients are cut off by the header and request timeouts,
 * idle keep-alive connections by the keep-alive timeout; the connections are capped in all and per
 * address, and idle or slow ones give way to new ones (./connections.ts), so the agent keeps
 * answering among thousands of sockets that send nothing. No input can crash it: every failure is
 * an HTTP status, and handler errors are 500.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { CARD_UUID } from "../rules/node.js";
import { findSlice, isSliceUuid } from "../select/mig.js";
import { packageVersion } from "../sources/native/binding.js";
import { debug } from "../vocabulary/debug.js";
import { EDGE_AGE_HEADER, EDGE_AGE_MAX_NS } from "../vocabulary/wire.js";
import { answerClientErrors, type ConnectionCounts, ConnectionGuard } from "./connections.js";
import { formatMetrics } from "./metrics.js";
import { DeviceMonitor } from "./monitor.js";

export interface AgentOptions {
  /** TCP port (default 9402; 0 picks a free one). */
  readonly port?: number;
  /** Address to bind (default 127.0.0.1). */
  readonly host?: string;
  /** Card indices to serve (default [0]); /power and /energy default to the first. */
  readonly gpus?: readonly number[];
  /** The sampler's period (ms, 1..1000; default 10). */
  readonly periodMs?: number;
  /**
   * Connections open at once (default 1024). Past it a new connection takes the place of the one
   * idle the longest; it is refused only when every connection has a request in progress.
   */
  readonly maxConnections?: number;
  /** Connections open at once from one address, with the same rule (default 128). */
  readonly maxConnectionsPerAddress?: number;
  /**
   * Under pressure (more than half of maxConnections open), a connection with no request in
   * progress is closed after this (ms; default 500), not after the header or keep-alive timeout.
   */
  readonly pressureIdleTimeoutMs?: number;
  /** A request's headers must arrive within this (ms; default 5000). */
  readonly headersTimeoutMs?: number;
  /** A whole request must arrive within this (ms; default 10000). */
  readonly requestTimeoutMs?: number;
  /** An idle keep-alive connection is closed after this (ms; default 5000). */
  readonly keepAliveTimeoutMs?: number;
  /** Largest request head accepted (bytes; default 8192); larger is 431. */
  readonly maxHeaderSize?: number;
  /** The device state (memory, utilization, processes) is re-read when older than this (ms; default 250). */
  readonly stateTtlMs?: number;
  /** Where warnings go (default: stderr). */
  readonly warn?: (message: string) => void;
  /** Added to every monotonic_ns reported: tests use it to play an agent on another clock. */
  readonly clockOffsetNs?: bigint;
}

export interface Agent {
  readonly server: Server;
  /** The bound address and port. */
  readonly host: string;
  readonly port: number;
  /** http://host:port */
  readonly url: string;
  /** The served cards, in order. */
  readonly monitors: readonly DeviceMonitor[];
  /** The connections now, and what the limits did to them so far. */
  connections(): ConnectionCounts;
  /** Stops listening, closes every connection and releases the samplers. */
  close(): Promise<void>;
}

const ROUTES = new Set(["/power", "/energy", "/metrics"]);
const JSON_TYPE = "application/json; charset=utf-8";

function send(res: ServerResponse, status: number, type: string, body: string, close = false): void {
  if (res.headersSent || res.destroyed) return;
  const headers: Record<string, string | number> = {
    "content-type": type,
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
  };
  if (close) headers.connection = "close";
  res.writeHead(status, headers);
  res.end(body);
}

function sendError(res: ServerResponse, status: number, message: string, extra: Record<string, string> = {}) {
  for (const [k, v] of Object.entries(extra)) res.setHeader(k, v);
  send(res, status, JSON_TYPE, `${JSON.stringify({ error: message })}\n`, status === 413);
}

function checkInt(field: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${field}: expected an integer from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

/** Starts an agent and resolves once it listens. Throws on bad options or when the port cannot be bound. */
export async function startAgent(options: AgentOptions = {}): Promise<Agent> {
  const port = checkInt("port", options.port ?? 9402, 0, 65535);
  const host = options.host ?? "127.0.0.1";
  const gpus = options.gpus ?? [0];
  if (gpus.length === 0) throw new RangeError("gpus: expected at least one card index");
  for (const g of gpus) checkInt("gpu", g, 0, 1023);
  const periodMs = checkInt("periodMs", options.periodMs ?? 10, 1, 1000);
  const guard = new ConnectionGuard({
    maxConnections: checkInt("maxConnections", options.maxConnections ?? 1024, 1, 1_000_000),
    maxPerAddress: checkInt(
      "maxConnectionsPerAddress",
      options.maxConnectionsPerAddress ?? 128,
      1,
      1_000_000,
    ),
    pressureIdleMs: checkInt("pressureIdleTimeoutMs", options.pressureIdleTimeoutMs ?? 500, 1, 3_600_000),
  });
  const warn = options.warn ?? ((m: string) => process.stderr.write(`${m}\n`));
  const version = packageVersion();
  const agentName = `giul-node/${version}`;

  const monitors = [...new Set(gpus)].map(
    (gpu) =>
      new DeviceMonitor({
        gpu,
        periodMs,
        stateTtlMs: options.stateTtlMs ?? 250,
        stateMaxAgeMs: Math.max(2_000, (options.stateTtlMs ?? 250) * 4),
        refreshWaitMs: 1_000,
        agent: agentName,
        clockOffsetNs: options.clockOffsetNs ?? 0n,
      }),
  );
  // The card probes do not keep the event loop alive (a Meter never waits on a driver that does
  // not answer); the agent does wait for them before it listens.
  const keepAlive = setInterval(() => {}, 60_000);
  try {
    await Promise.all(monitors.map((m) => m.start()));
  } finally {
    clearInterval(keepAlive);
  }
  for (const m of monitors) {
    if (m.reason !== null) warn(`giul-agent: GPU ${m.gpu}: energy unavailable (${m.reason})`);
  }

  // A MIG slice (?gpu=MIG-…) has no sensor: it is served its card's readings (found once).
  const slices = new Map<string, Promise<number | null>>();
  const pick = async (url: URL): Promise<DeviceMonitor | null> => {
    const raw = url.searchParams.get("gpu");
    if (raw === null) return monitors[0] ?? null;
    if (/^\d+$/.test(raw)) return monitors.find((m) => m.gpu === Number(raw)) ?? null;
    if (isSliceUuid(raw)) {
      const key = raw.toLowerCase();
      let card = slices.get(key);
      if (card === undefined) {
        card = findSlice(raw).then((found) => {
          if (found.index === null) slices.delete(key); // looked for again next time
          return found.index;
        });
        slices.set(key, card);
      }
      const index = await card;
      return monitors.find((m) => m.gpu === index) ?? null;
    }
    return monitors.find((m) => m.uuid !== null && m.uuid.toLowerCase() === raw.toLowerCase()) ?? null;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    let url: URL;
    try {
      url = new URL(req.url ?? "/", "http://agent.invalid");
    } catch {
      sendError(res, 400, "bad request target");
      return;
    }
    if (!ROUTES.has(url.pathname)) {
      sendError(res, 404, `no such path; this agent serves GET ${[...ROUTES].join(", ")}`);
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      sendError(res, 405, "read-only: GET or HEAD only", { allow: "GET, HEAD" });
      return;
    }
    const length = req.headers["content-length"];
    if ((length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined) {
      sendError(res, 413, "requests carry no body");
      return;
    }
    if (url.pathname === "/metrics") {
      const gpusNow = await Promise.all(
        monitors.map(async (m) => ({ gpu: m.gpu, backend: m.backend, ...(await m.metrics()) })),
      );
      send(res, 200, "text/plain; version=0.0.4; charset=utf-8", formatMetrics(gpusNow, version));
      return;
    }
    const raw = url.searchParams.get("gpu");
    if (raw !== null && !/^\d{1,4}$/.test(raw) && !CARD_UUID.test(raw)) {
      sendError(
        res,
        400,
        `gpu: expected a card index (0..1023) or UUID, got ${JSON.stringify(raw.slice(0, 40))}`,
      );
      return;
    }
    const unknownParam = [...url.searchParams.keys()].find((k) => k !== "gpu");
    if (unknownParam !== undefined) {
      sendError(
        res,
        400,
        `${JSON.stringify(unknownParam.slice(0, 40))}: unknown parameter; this agent takes ?gpu=N (an index or UUID)`,
      );
      return;
    }
    const monitor = await pick(url);
    if (monitor === null) {
      const served = monitors.map((m) => (m.uuid === null ? `${m.gpu}` : `${m.gpu} (${m.uuid})`));
      sendError(res, 404, `this agent serves gpu ${served.join(", ")}`);
      return;
    }
    if (url.pathname === "/power") {
      send(res, 200, JSON_TYPE, JSON.stringify(await monitor.power()));
      return;
    }
    const age = edgeAge(req.headers[EDGE_AGE_HEADER]);
    if (typeof age === "string") {
      sendError(res, 400, age);
      return;
    }
    const reading = await monitor.energy(age);
    if (!reading.ok) {
      send(
        res,
        503,
        JSON_TYPE,
        JSON.stringify({ error: reading.reason, agent: agentName, gpu: monitor.gpu }),
      );
      return;
    }
    send(res, 200, JSON_TYPE, JSON.stringify(reading.value));
  };

  const server = createServer(
    {
      headersTimeout: options.headersTimeoutMs ?? 5_000,
      requestTimeout: options.requestTimeoutMs ?? 10_000,
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 5_000,
      maxHeaderSize: options.maxHeaderSize ?? 8_192,
      connectionsCheckingInterval: 500,
      noDelay: true,
    },
    (req, res) => {
      const socket = req.socket;
      guard.busy(socket);
      res.once("close", () => guard.idle(socket));
      handle(req, res).catch((error: unknown) => {
        debug("agent: handler failed: %s", String(error));
        sendError(res, 500, "internal error");
      });
    },
  );
  answerClientErrors(server);
  server.on("connection", (socket: Socket) => {
    socket.on("error", () => socket.destroy());
    guard.admit(socket);
  });

  try {
    await new Promise<void>((resolve, reject) => {
      const onError = (error: Error) => reject(error);
      server.once("error", onError);
      server.listen({ port, host }, () => {
        server.off("error", onError);
        resolve();
      });
    });
  } catch (error) {
    // The port is taken (or the address is not ours): give back the samplers started above.
    for (const m of monitors) m.stop();
    throw error;
  }
  server.on("error", (error) => warn(`giul-agent: server error: ${String(error)}`));
  const address = server.address() as AddressInfo;
  if (host === "0.0.0.0" || host === "::" || host === "" || host === "[::]") {
    warn(
      `giul-agent: listening on every interface (${host}); bind the mesh address instead unless the node is otherwise firewalled`,
    );
  }
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  let closed: Promise<void> | null = null;
  return {
    server,
    host: address.address,
    port: address.port,
    url: `http://${shownHost}:${address.port}`,
    monitors,
    connections: () => guard.snapshot(),
    close() {
      closed ??= new Promise<void>((resolve) => {
        guard.stop();
        server.close(() => resolve());
        server.closeAllConnections();
        for (const m of monitors) m.stop();
      });
      return closed;
    },
  };
}

/**
 * The client's edge age (EDGE_AGE_HEADER), when it sent one: a whole number of ns, 0 to
 * EDGE_AGE_MAX_NS; what is wrong with it, naming the header, otherwise.
 */
function edgeAge(raw: string | string[] | undefined): number | null | string {
  if (raw === undefined) return null;
  const text = Array.isArray(raw) ? raw.join(",") : raw;
  const ns = /^\d{1,11}$/.test(text) ? Number(text) : Number.NaN;
  if (!(ns <= EDGE_AGE_MAX_NS)) {
    return `${EDGE_AGE_HEADER}: expected a whole number of ns from 0 to ${EDGE_AGE_MAX_NS}, got ${JSON.stringify(text.slice(0, 40))}`;
  }
  return ns;
}
