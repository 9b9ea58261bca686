/**
 * The NDJSON log: one line per request, appended to a file (or written to stdout for "-"). Writing
 * never holds a request: when the disk falls behind by more than `maxPendingBytes`, lines are
 * dropped and counted instead. `reopen()` starts a new file descriptor on the same path (after
 * logrotate moved the old one; giul-proxy calls it on SIGHUP).
 */
import { createWriteStream, type WriteStream } from "node:fs";

export class NdjsonLog {
  /** Lines dropped because the destination fell behind. */
  dropped = 0;
  /** Lines written (handed to the stream). */
  written = 0;
  private stream: NodeJS.WritableStream;
  private readonly path: string;
  private readonly maxPendingBytes: number;
  private readonly warn: (message: string) => void;
  private warned = false;

  constructor(path: string, warn: (message: string) => void, maxPendingBytes = 16 << 20) {
    this.path = path;
    this.warn = warn;
    this.maxPendingBytes = maxPendingBytes;
    this.stream = this.open();
  }

  private open(): NodeJS.WritableStream {
    if (this.path === "-") return process.stdout;
    const stream = createWriteStream(this.path, { flags: "a" });
    stream.on("error", (error) => {
      if (!this.warned) this.warn(`giul-proxy: writing ${this.path} failed: ${String(error)}`);
      this.warned = true;
    });
    return stream;
  }

  /** Appends one record as a line; drops it (counted) when the destination is behind. */
  write(record: object): void {
    const pending = (this.stream as Partial<WriteStream>).writableLength ?? 0;
    if (pending > this.maxPendingBytes || (this.stream as Partial<WriteStream>).destroyed === true) {
      this.dropped++;
      return;
    }
    this.stream.write(`${JSON.stringify(record)}\n`);
    this.written++;
  }

  /** Opens the path again (after a rotation); the old descriptor is closed once flushed. */
  reopen(): void {
    if (this.path === "-") return;
    const old = this.stream;
    this.stream = this.open();
    this.warned = false;
    old.end();
  }

  /** Flushes and closes the file (stdout is left open). */
  close(): Promise<void> {
    const stream = this.stream;
    if (stream === process.stdout) return Promise.resolve();
    return new Promise((resolve) => {
      stream.end(() => resolve());
    });
  }
}
