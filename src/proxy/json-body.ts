/**
 * A JSON answer the proxy holds whole (up to maxBodyBytes), however the upstream framed it
 * (Content-Length or chunked) and encoded it (identity, gzip, deflate, br): its text, decoded off
 * the event loop, so that its `usage` can be read and, opted in, given `energy`. A body that is
 * injected is sent identity, its Content-Encoding and Content-Length fields fixed; one that is not
 * goes on as the upstream sent it.
 */
import { promisify } from "node:util";
import { brotliDecompress, gunzip, inflate, inflateRaw } from "node:zlib";
import type { ClientRecord } from "./record.js";
import { injectEnergy, jsonUsage } from "./record.js";
import type { Usage } from "./sse.js";

const DECODERS: Record<string, (body: Buffer, o: { maxOutputLength: number }) => Promise<Buffer>> = {
  gzip: promisify(gunzip),
  "x-gzip": promisify(gunzip),
  br: promisify(brotliDecompress),
  // HTTP's deflate is the zlib format; some servers send raw deflate.
  deflate: (body, o) => promisify(inflate)(body, o).catch(() => promisify(inflateRaw)(body, o)),
};

/** The body as text bytes, or null where its encoding is not one giul decodes, or it does not decode within `max`. */
export async function decodedBody(body: Buffer, encoding: string, max: number): Promise<Buffer | null> {
  const codings = encoding
    .toLowerCase()
    .split(",")
    .map((c) => c.trim())
    .filter((c) => c !== "" && c !== "identity");
  let out = body;
  // Codings are listed in the order they were applied: undone last first.
  for (const coding of codings.reverse()) {
    const decode = DECODERS[coding];
    if (decode === undefined) return null;
    try {
      out = await decode(out, { maxOutputLength: max });
    } catch {
      return null;
    }
  }
  return out;
}

/** What a held JSON answer gives: its usage, and (injecting) the body to send and whether it changed. */
export interface HeldJson {
  readonly usage: Usage | null;
  /** The text of the body, decoded (null where it could not be). */
  readonly text: Buffer | null;
}

export async function readHeldJson(body: Buffer, encoding: string, max: number): Promise<HeldJson> {
  const text = await decodedBody(body, encoding, max);
  return { usage: text === null ? null : jsonUsage(text), text };
}

/**
 * The answer with `usage.energy`: the decoded body injected and sent identity (fields fixed), or
 * null where it has no usage object to add it to (then it goes on as it came).
 */
export function injectedAnswer(
  held: HeldJson,
  headers: readonly string[],
  record: ClientRecord,
): { body: Buffer; headers: string[] } | null {
  if (held.text === null) return null;
  const body = injectEnergy(held.text, record);
  if (body === null) return null;
  const out: string[] = [];
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const lower = (headers[i] as string).toLowerCase();
    if (lower === "content-length" || lower === "content-encoding") continue;
    out.push(headers[i] as string, headers[i + 1] as string);
  }
  out.push("content-length", String(body.length));
  return { body, headers: out };
}
