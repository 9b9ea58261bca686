/**
 * The HTTP client of a giul-agent (this package's, or a Python giul 0.2 agent): GET with a total
 * deadline that never rejects, the agent's base URL from a node's powerEndpoint, one read of its
 * /power, and a CardReader over it for contention checks and probeNode.
 *
 * Every request has a timeout (default 500 ms). An unreachable, slow or malformed agent is a value
 * with the reason, never a throw.
 */
import http, { type ClientRequest } from "node:http";
import https from "node:https";
import type { CardReader } from "../../track/card.js";
import {
  type CardInfo,
  type CardState,
  fail,
  ok,
  type ProcessRead,
  type Result,
} from "../../vocabulary/measurement.js";
import { type PythonPower, parsePower } from "../../vocabulary/wire.js";

export const DEFAULT_TIMEOUT_MS = 500;
const MAX_BODY = 1 << 20;

const keepAlive = {
  http: new http.Agent({ keepAlive: true, maxSockets: 64 }),
  https: new https.Agent({ keepAlive: true, maxSockets: 64 }),
};

export type HttpResult =
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
  options: {
    readonly unref?: boolean;
    /** Extra request headers, made at each attempt from its send instant (tSend). */
    readonly headers?: (tSend: bigint) => Record<string, string>;
  } = {},
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
          {
            agent: https_ ? keepAlive.https : keepAlive.http,
            headers: { accept: "application/json", ...options.headers?.(tSend) },
          },
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

/**
 * The agent's base URL from a node's powerEndpoint ("http://h:9402" or "http://h:9402/power"),
 * keeping `?gpu=N` (which of the agent's cards: a node of several cards names each so).
 */
export function agentBase(endpoint: string): URL {
  const url = new URL(endpoint);
  const gpu = url.searchParams.get("gpu");
  url.search = gpu === null ? "" : `?gpu=${encodeURIComponent(gpu)}`;
  url.hash = "";
  if (url.pathname.endsWith("/power")) url.pathname = url.pathname.slice(0, -"power".length);
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  return url;
}

/** `path` (power, energy) at the agent's base, for the base's card. */
export function agentUrl(base: URL, path: string): URL {
  const url = new URL(path, base);
  url.search = base.search;
  return url;
}

/** Why an answer is not a success (its status and the agent's own error), or null for a 200. */
export function httpFailure(result: Extract<HttpResult, { ok: true }>, what: string): string | null {
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
    url = agentUrl(agentBase(endpoint), "power");
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
    async readInfo(): Promise<Result<CardInfo>> {
      const { r } = await read();
      return r.ok ? ok(infoOf(r.value)) : r;
    },
    async readState(): Promise<Result<CardState>> {
      const { r } = await read();
      if (!r.ok) return r;
      const p = r.value;
      if (p.computeApps === null)
        return fail("the giul-agent cannot read the card's processes (compute_apps null)");
      return ok({ ...infoOf(p), computeApps: p.computeApps });
    },
  };
}

function infoOf(p: PythonPower): CardInfo {
  return {
    name: p.name,
    memoryFreeMib: p.memoryFreeMib,
    memoryUsedMib: p.memoryUsedMib,
    memoryTotalMib: p.memoryTotalMib,
    utilizationPct: p.utilizationPct,
    powerW: p.watts,
  };
}
