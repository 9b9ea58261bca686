import type { Server } from "node:http";

/** What the stub saw and did for one request (keyed by its x-request-id). */
export interface StubRecord {
  readonly key: string;
  readonly method: string;
  readonly url: string;
  readonly rawHeaders: string[];
  body: Buffer;
  /** Every piece written, in order. */
  readonly written: Buffer[];
  /** The connection closed before the answer ended (the proxy aborted it, or the stub failed it). */
  aborted: boolean;
  ended: boolean;
  /** Writes that had to wait for 'drain' (the reader was behind). */
  blocked: number;
}

export interface Stub {
  readonly server: Server;
  readonly port: number;
  readonly url: string;
  readonly requests: Map<string, StubRecord>;
  bytes(key: string): Buffer;
  close(): Promise<void>;
}

/** What a request's `stub` field may set (see openai-stub.mjs). */
export interface StubTiming {
  ttft_ms?: number;
  itl_ms?: number;
  pad?: number;
  split?: boolean;
  chunked?: boolean;
  /** End SSE lines with CRLF. */
  crlf?: boolean;
  /** Compress a non-streamed body. */
  encoding?: "gzip" | "deflate" | "br";
}

export function startStub(options?: {
  port?: number;
  host?: string;
  /** Keep every byte written (default true). */
  record?: boolean;
  /** For requests whose body sets no `stub`. */
  defaults?: StubTiming;
}): Promise<Stub>;
