/**
 * An HTTP client for giul-proxy's tests that keeps everything: the status, the header fields as
 * sent (rawHeaders), every body byte, the trailers, and when the body's pieces arrived. Options
 * let it read slowly, stop reading, or hang up after some bytes.
 */
import { type ClientRequest, type IncomingMessage, request } from "node:http";

export interface RawResponse {
  readonly status: number;
  readonly headers: IncomingMessage["headers"];
  readonly rawHeaders: string[];
  readonly body: Buffer;
  readonly trailers: Record<string, string | undefined>;
  /** The body ended normally (false: the connection closed first). */
  readonly complete: boolean;
}

export interface RawOptions {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  /** Hang up once this many body bytes have arrived. */
  readonly abortAfterBytes?: number;
  /** Stop reading for this long after the first body byte, then read on. */
  readonly pauseMs?: number;
  /** Never read the body (resolves when the connection closes). */
  readonly neverRead?: boolean;
  /** Given the request as it starts (to destroy it later, say). */
  readonly onRequest?: (req: ClientRequest) => void;
}

export function raw(url: string, path: string, options: RawOptions = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const target = new URL(path, url);
    const body = options.body === undefined ? undefined : Buffer.from(options.body);
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (body !== undefined) {
      headers["content-type"] ??= "application/json";
      headers["content-length"] = String(body.length);
    }
    const req = request(target, { method: options.method ?? (body ? "POST" : "GET"), headers, agent: false });
    req.on("error", reject);
    options.onRequest?.(req);
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let paused = false;
      const done = (complete: boolean) =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          rawHeaders: res.rawHeaders,
          body: Buffer.concat(chunks),
          trailers: res.trailers,
          complete,
        });
      if (options.neverRead) {
        res.pause();
        res.socket.pause();
        res.on("close", () => done(false));
        return;
      }
      res.on("data", (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        if (options.pauseMs !== undefined && !paused) {
          paused = true;
          res.pause();
          setTimeout(() => res.resume(), options.pauseMs);
        }
        if (options.abortAfterBytes !== undefined && size >= options.abortAfterBytes) {
          req.destroy();
          done(false);
        }
      });
      res.on("end", () => done(true));
      res.on("close", () => {
        if (!res.complete) done(false);
      });
      res.on("error", () => {});
    });
    req.end(body);
  });
}

/** A chat completion request body for the stub (./openai-stub.mjs). */
export function chat(fields: Record<string, unknown> = {}): string {
  return JSON.stringify({ model: "stub-model", messages: [{ role: "user", content: "hi" }], ...fields });
}
