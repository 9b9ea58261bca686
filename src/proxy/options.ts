/**
 * giul-proxy's options, checked once at start: every bad value is a GiulError naming the option
 * (the node's fields are checked by resolveNode, naming `node.<field>`).
 */

import type { Meter } from "../meter/meter.js";
import { DEFAULT_PERIOD_MS } from "../meter/options.js";
import type { Node } from "../rules/node.js";
import { GiulError } from "../vocabulary/errors.js";
import { describeValue, firstUnknownKey, unknownKey } from "../vocabulary/validate.js";
import type { ProxyRecord } from "./record.js";

export interface ProxyOptions {
  /** The OpenAI-compatible server: `http://127.0.0.1:8000` (a path is prefixed to every request's). */
  readonly upstream: string;
  /** The card the upstream runs on (validated as for Meter.forNode). */
  readonly node: Node;
  /** Address to listen on (default 127.0.0.1). */
  readonly host?: string;
  /** Port (default 9410; 0 picks a free one). */
  readonly port?: number;
  /** Address of the admin listener serving /metrics (default 127.0.0.1). */
  readonly adminHost?: string;
  /** Port of the admin listener (default 9411; 0 picks one; null: no admin listener). */
  readonly adminPort?: number | null;
  /** Add `usage.energy` to non-streamed JSON bodies that have a `usage` object (default false). */
  readonly injectUsage?: boolean;
  /** J per 1,000 completion tokens, to estimate a request that cannot be measured. */
  readonly joulesPer1kHint?: number | null;
  /** The card's sampling period (ms, 1..1000; default 5, the Meter's): a non-streamed answer waits about one. */
  readonly periodMs?: number;
  /** Largest request body accepted, and largest JSON response buffered to set headers (default 16 MiB). */
  readonly maxBodyBytes?: number;
  /** Largest request head accepted (default 16 KiB); larger is 431. */
  readonly maxHeaderBytes?: number;
  /** Client connections open at once before new ones are refused (default 1024). */
  readonly maxConnections?: number;
  /** Connections to the upstream at once (default 1024; more requests wait for one). */
  readonly maxUpstreamSockets?: number;
  /** A request's headers must arrive within this (ms; default 10,000). */
  readonly headersTimeoutMs?: number;
  /** A request's whole body must arrive within this (ms; default 60,000). */
  readonly requestTimeoutMs?: number;
  /** Idle keep-alive client connections are closed after this (ms; default 5,000). */
  readonly keepAliveTimeoutMs?: number;
  /** The upstream may send nothing for this long (ms; default 600,000: a long non-streamed answer). */
  readonly upstreamTimeoutMs?: number;
  /** Connecting to the upstream may take this long (ms; default 5,000). */
  readonly connectTimeoutMs?: number;
  /** A client may leave the upstream paused (not reading) this long (ms; default 60,000). */
  readonly clientStallTimeoutMs?: number;
  /** Each finished request's record, with its window (null when metering failed to open). */
  readonly onRecord?: (record: ProxyRecord, meter: Meter | null) => void;
  /** Where warnings go (default stderr). */
  readonly warn?: (message: string) => void;
}

export type ResolvedProxyOptions = Required<Omit<ProxyOptions, "onRecord" | "upstream" | "node">> & {
  readonly upstream: URL;
  readonly node: Node;
  readonly onRecord: ((record: ProxyRecord, meter: Meter | null) => void) | null;
};

const KNOWN: readonly (keyof ProxyOptions)[] = [
  "upstream",
  "node",
  "host",
  "port",
  "adminHost",
  "adminPort",
  "injectUsage",
  "joulesPer1kHint",
  "periodMs",
  "maxBodyBytes",
  "maxHeaderBytes",
  "maxConnections",
  "maxUpstreamSockets",
  "headersTimeoutMs",
  "requestTimeoutMs",
  "keepAliveTimeoutMs",
  "upstreamTimeoutMs",
  "connectTimeoutMs",
  "clientStallTimeoutMs",
  "onRecord",
  "warn",
];

function invalid(field: string, message: string): GiulError {
  return new GiulError("INVALID_OPTION", `${field}: ${message}`, { field });
}

function int(field: string, value: unknown, fallback: number, min: number, max: number): number {
  const v = value ?? fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw invalid(field, `expected an integer from ${min} to ${max}, got ${describeValue(value)}`);
  }
  return v;
}

/** The upstream's URL, checked: http(s), no credentials, query or fragment. */
export function upstreamUrl(raw: unknown): URL {
  if (typeof raw !== "string" || raw === "")
    throw invalid("upstream", `expected a URL, got ${describeValue(raw)}`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid("upstream", `not a valid URL: ${describeValue(raw)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw invalid("upstream", `expected an http:// or https:// URL, got ${describeValue(raw)}`);
  if (url.username !== "" || url.password !== "")
    throw invalid("upstream", "credentials in the URL are not forwarded; clients send their own headers");
  if (url.search !== "" || url.hash !== "")
    throw invalid("upstream", `expected no query or fragment, got ${describeValue(raw)}`);
  return url;
}

/** Checks the options and fills in the defaults. Throws GiulError naming the option. */
export function resolveProxyOptions(options: ProxyOptions): ResolvedProxyOptions {
  if (typeof options !== "object" || options === null)
    throw invalid("options", `expected an object, got ${describeValue(options)}`);
  const unknown = firstUnknownKey(options, KNOWN);
  if (unknown !== null) throw invalid(unknown, unknownKey(unknown, KNOWN));
  const str = (field: string, value: unknown, fallback: string): string => {
    const v = value ?? fallback;
    if (typeof v !== "string" || v === "")
      throw invalid(field, `expected an address, got ${describeValue(value)}`);
    return v;
  };
  const hint = options.joulesPer1kHint ?? null;
  if (hint !== null && (typeof hint !== "number" || !Number.isFinite(hint) || hint < 0))
    throw invalid("joulesPer1kHint", `expected a finite number ≥ 0, got ${describeValue(hint)}`);
  const injectUsage = options.injectUsage ?? false;
  if (typeof injectUsage !== "boolean")
    throw invalid("injectUsage", `expected a boolean, got ${describeValue(injectUsage)}`);
  for (const field of ["onRecord", "warn"] as const) {
    const f = options[field];
    if (f !== undefined && f !== null && typeof f !== "function")
      throw invalid(field, `expected a function, got ${describeValue(f)}`);
  }
  const headersTimeoutMs = int("headersTimeoutMs", options.headersTimeoutMs, 10_000, 1, 3_600_000);
  const requestTimeoutMs = int("requestTimeoutMs", options.requestTimeoutMs, 60_000, 1, 86_400_000);
  if (requestTimeoutMs < headersTimeoutMs)
    throw invalid(
      "requestTimeoutMs",
      `must be ≥ headersTimeoutMs (${headersTimeoutMs}), got ${requestTimeoutMs}`,
    );
  const adminPort = options.adminPort === null ? null : int("adminPort", options.adminPort, 9411, 0, 65535);
  return {
    upstream: upstreamUrl(options.upstream),
    node: options.node,
    host: str("host", options.host, "127.0.0.1"),
    port: int("port", options.port, 9410, 0, 65535),
    adminHost: str("adminHost", options.adminHost, "127.0.0.1"),
    adminPort,
    injectUsage,
    joulesPer1kHint: hint,
    periodMs: int("periodMs", options.periodMs, DEFAULT_PERIOD_MS, 1, 1000),
    maxBodyBytes: int("maxBodyBytes", options.maxBodyBytes, 16 << 20, 1, 1 << 30),
    maxHeaderBytes: int("maxHeaderBytes", options.maxHeaderBytes, 16 << 10, 1024, 1 << 20),
    maxConnections: int("maxConnections", options.maxConnections, 1024, 1, 1_000_000),
    maxUpstreamSockets: int("maxUpstreamSockets", options.maxUpstreamSockets, 1024, 1, 1_000_000),
    headersTimeoutMs,
    requestTimeoutMs,
    keepAliveTimeoutMs: int("keepAliveTimeoutMs", options.keepAliveTimeoutMs, 5_000, 1, 3_600_000),
    upstreamTimeoutMs: int("upstreamTimeoutMs", options.upstreamTimeoutMs, 600_000, 1, 86_400_000),
    connectTimeoutMs: int("connectTimeoutMs", options.connectTimeoutMs, 5_000, 1, 3_600_000),
    clientStallTimeoutMs: int("clientStallTimeoutMs", options.clientStallTimeoutMs, 60_000, 1, 86_400_000),
    onRecord: options.onRecord ?? null,
    warn: options.warn ?? ((m: string) => process.stderr.write(`${m}\n`)),
  };
}
