/**
 * What the proxy reads from a request and a response (the model asked for, the token counts in
 * `usage`), and what it writes: the energy headers, the client's record (SSE comment, trailers,
 * `usage.energy`) and the log's fleet record.
 */
import type { Energy, EnergyRecord } from "../rules/energy.js";
import type { SseEnd, Usage } from "./sse.js";
import { usageOf } from "./sse.js";

/** How the exchange ended. */
export type Outcome =
  /** The upstream's whole response reached the client. */
  | "complete"
  /** The client went away first; the upstream request was aborted. */
  | "client_closed"
  /** The client did not read for clientStallTimeoutMs while the upstream had more to send. */
  | "client_stalled"
  /** No answer: the upstream could not be connected to, or closed before its status line. */
  | "upstream_unreachable"
  /** The upstream failed mid-response (its connection closed before the last byte). */
  | "upstream_failed"
  /** The upstream sent nothing for upstreamTimeoutMs (or did not accept the connection in time). */
  | "upstream_timeout";

/** One NDJSON line of the log: the fleet record, then what the proxy saw of the exchange. */
export interface ProxyRecord extends EnergyRecord {
  readonly request_id: string;
  readonly http_method: string;
  /** The path, without its query string (which may hold secrets). */
  readonly path: string;
  /** `model` of the request's JSON body, when it has one. */
  readonly model: string | null;
  /** The response was a stream of server-sent events. */
  readonly stream: boolean;
  /** The status the client was sent (the upstream's, or the proxy's 502/504), or null if none. */
  readonly status: number | null;
  readonly outcome: Outcome;
  /** What went wrong, when the outcome is not `complete`. */
  readonly error: string | null;
  /** From the upstream's `usage`, when it sent one. */
  readonly prompt_tokens: number | null;
  readonly completion_tokens: number | null;
  /** Wall-clock time the proxy started forwarding the request (the window opened). */
  readonly started_at: string;
  /** From forwarding to the upstream's first body byte (ms), or null when there was none. */
  readonly ttfb_ms: number | null;
  /** From forwarding to the upstream's last byte, or to the failure (ms). */
  readonly duration_ms: number;
  /** Time the upstream was paused because the client was not reading (ms). */
  readonly client_paused_ms: number;
}

/** What the client is given: the fleet record with the request id. */
export type ClientRecord = { readonly request_id: string } & EnergyRecord;

/** What the proxy reads of a request: its JSON body's `model`, `stream`, `stream_options.include_usage`. */
export interface RequestInfo {
  readonly model: string | null;
  readonly stream: boolean;
  /** The client asked for the stream's usage chunk (where SDKs read usage). */
  readonly includeUsage: boolean;
}

const NO_INFO: RequestInfo = { model: null, stream: false, includeUsage: false };

/** `model`, `stream` and `stream_options.include_usage` of a JSON request body, when it is one. */
export function requestInfo(body: Buffer): RequestInfo {
  const first = body.findIndex((b) => b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09);
  if (first < 0 || body[first] !== 0x7b) return NO_INFO;
  try {
    const parsed = JSON.parse(body.toString("utf8")) as {
      model?: unknown;
      stream?: unknown;
      stream_options?: { include_usage?: unknown } | null;
    };
    const model = typeof parsed.model === "string" && parsed.model !== "" ? parsed.model.slice(0, 256) : null;
    const includeUsage = parsed.stream_options?.include_usage === true;
    return { model, stream: parsed.stream === true, includeUsage };
  } catch {
    return NO_INFO;
  }
}

/** The `usage` of a JSON response body, when it has one. */
export function jsonUsage(body: Buffer): Usage | null {
  try {
    return usageOf(JSON.parse(body.toString("utf8")));
  } catch {
    return null;
  }
}

/**
 * The body with `"energy": record` added to its top-level `usage` object, every other byte as it
 * was; null when the body is not a JSON object with a `usage` object (then it is left alone).
 */
export function injectEnergy(body: Buffer, record: ClientRecord): Buffer | null {
  const text = body.toString("utf8");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  if (usageOf(parsed) === null) return null;
  const close = usageClose(text);
  if (close === null) return null;
  const energy = `"energy":${JSON.stringify(record)}`;
  const insert = close.empty ? energy : `,${energy}`;
  return Buffer.from(text.slice(0, close.at) + insert + text.slice(close.at), "utf8");
}

/**
 * Where the top-level `usage` object of a valid JSON object closes (the index of its `}`), and
 * whether it is empty. The last `usage` key wins, as in JSON.parse.
 */
function usageClose(text: string): { at: number; empty: boolean } | null {
  let depth = 0;
  let found: { at: number; empty: boolean } | null = null;
  let usageOpen = -1;
  let usageDepth = -1;
  let expectUsageValue = false;
  let lastKey: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      const start = i;
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++;
      if (depth === 1) lastKey = JSON.parse(text.slice(start, i + 1)) as string;
      continue;
    }
    if (c === ":") {
      expectUsageValue = depth === 1 && lastKey === "usage";
      lastKey = null;
      continue;
    }
    if (c === "{" || c === "[") {
      depth++;
      if (expectUsageValue && c === "{") {
        usageOpen = i;
        usageDepth = depth;
      }
      expectUsageValue = false;
    } else if (c === "}" || c === "]") {
      if (c === "}" && depth === usageDepth && usageOpen >= 0) {
        found = { at: i, empty: text.slice(usageOpen + 1, i).trim() === "" };
        usageOpen = -1;
        usageDepth = -1;
      }
      depth--;
    } else if (c !== " " && c !== "\n" && c !== "\r" && c !== "\t" && c !== ",") {
      expectUsageValue = false;
    }
  }
  return found;
}

/** The client's record: the fleet record (toJSON) with the request id first. */
export function clientRecord(requestId: string, energy: Energy): ClientRecord {
  return { request_id: requestId, ...energy.toJSON() };
}

/** The trailer/header names, in the order the `Trailer` header announces them. */
export const ENERGY_FIELDS = [
  "x-energy-joules",
  "x-energy-method",
  "x-energy-backend",
  "x-energy-uncertainty-joules",
] as const;

/** A node of several cards: each card's part, `<index>:<joules>±<uncertainty>` (or `unknown`), comma-separated. */
export const CARDS_FIELD = "x-energy-cards";

/** The energy as header fields: joules and uncertainty are left out when not known (never 0). */
export function energyHeaders(energy: Energy): [string, string][] {
  const out: [string, string][] = [];
  if (energy.joules !== null) out.push(["x-energy-joules", String(energy.joules)]);
  out.push(["x-energy-method", energy.method], ["x-energy-backend", energy.backend]);
  if (energy.uncertaintyJoules !== null)
    out.push(["x-energy-uncertainty-joules", String(energy.uncertaintyJoules)]);
  if (energy.cards !== null) {
    const parts = energy.cards.map((c) =>
      c.joules === null
        ? `${c.index ?? c.uuid}:unknown`
        : `${c.index ?? c.uuid}:${c.joules}±${c.uncertaintyJoules ?? "?"}`,
    );
    out.push([CARDS_FIELD, parts.join(", ")]);
  }
  return out;
}

/** The SSE comment line that carries the record (SSE clients ignore comments). */
export function energyComment(record: ClientRecord, eol = "\n"): Buffer {
  return Buffer.from(`: energy ${JSON.stringify(record)}${eol}${eol}`, "utf8");
}

/**
 * The end of a stream as the client gets it: the upstream's final usage chunk (its `usage` given
 * `energy` when `inject`), or, `add`ing one where the upstream sent none before `[DONE]`, a usage
 * chunk of the proxy's (`choices: []`, as OpenAI sends it); then the energy comment, then `[DONE]`
 * and whatever followed. Every other byte as the upstream sent it.
 */
export function streamEnd(end: SseEnd, record: ClientRecord, o: { inject: boolean; add: boolean }): Buffer {
  const parts: Buffer[] = [];
  const chunk = end.usageChunk;
  if (chunk !== null) {
    const json = Buffer.from(chunk.json, "utf8");
    parts.push(
      Buffer.from(chunk.prefix, "utf8"),
      (o.inject ? injectEnergy(json, record) : null) ?? json,
      chunk.after,
    );
  } else if (o.add && end.done) {
    const first = Object.fromEntries(Object.entries(end.first ?? {}).filter(([, v]) => v !== undefined));
    const added = { ...first, choices: [], usage: { energy: record } };
    parts.push(Buffer.from(`data: ${JSON.stringify(added)}${end.eol}${end.eol}`, "utf8"));
  }
  const comment = energyComment(record, end.eol);
  if (end.done) parts.push(comment, end.rest);
  else {
    parts.push(end.rest);
    if (end.atBoundary) parts.push(comment);
  }
  return Buffer.concat(parts);
}
