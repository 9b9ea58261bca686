/**
 * Header fields across the proxy: every end-to-end field passes as it came (case, order and
 * repeats kept, from rawHeaders); hop-by-hop fields (RFC 9110 §7.6.1, and those the Connection
 * field names) belong to one connection and are not forwarded. Host is the upstream's.
 */
import type { ServerResponse } from "node:http";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** Names the Connection field lists (also hop-by-hop). */
function connectionListed(raw: readonly string[]): Set<string> {
  const listed = new Set<string>();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if ((raw[i] as string).toLowerCase() !== "connection") continue;
    for (const name of (raw[i + 1] as string).split(",")) listed.add(name.trim().toLowerCase());
  }
  return listed;
}

/**
 * The end-to-end fields of rawHeaders, as a flat [name, value, …] list; `drop` names more to leave
 * out (lower case).
 */
export function endToEnd(raw: readonly string[], drop: ReadonlySet<string> = new Set()): string[] {
  const listed = connectionListed(raw);
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || listed.has(lower) || drop.has(lower)) continue;
    out.push(name, raw[i + 1] as string);
  }
  return out;
}

const REQUEST_DROP = new Set(["host", "content-length", "expect"]);

/**
 * The request's fields for the upstream: its own, with Host set to the upstream's and the body's
 * length (the proxy has read the whole body).
 */
export function requestHeaders(raw: readonly string[], host: string, bodyLength: number | null): string[] {
  const out = ["Host", host, ...endToEnd(raw, REQUEST_DROP)];
  if (bodyLength !== null) out.push("Content-Length", String(bodyLength));
  return out;
}

/** The first value of a field in a flat list, by lower-case name. */
export function field(flat: readonly string[], lower: string): string | undefined {
  for (let i = 0; i + 1 < flat.length; i += 2)
    if ((flat[i] as string).toLowerCase() === lower) return flat[i + 1];
  return undefined;
}

/** The list without the named fields (lower case). */
export function without(flat: readonly string[], names: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    if (!names.has((flat[i] as string).toLowerCase())) out.push(flat[i] as string, flat[i + 1] as string);
  }
  return out;
}

/**
 * A response the proxy makes itself (an error), in the OpenAI error shape that SDKs read:
 * `{ "error": { "message", "type", "code" } }`.
 */
export function sendError(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  extra: readonly [string, string][] = [],
  close = false,
): void {
  if (res.headersSent || res.destroyed) return;
  const body = `${JSON.stringify({ error: { message, type, param: null, code: status } })}\n`;
  const headers: string[] = [
    "content-type",
    "application/json; charset=utf-8",
    "content-length",
    String(Buffer.byteLength(body)),
  ];
  for (const [k, v] of extra) headers.push(k, v);
  if (close) headers.push("connection", "close");
  res.writeHead(status, headers);
  res.end(body);
}
