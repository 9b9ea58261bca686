/**
 * Reading NDJSON logs of giul records for giul-report: giul-proxy's `--log`, or lines a program
 * writes with `JSON.stringify(energy)`. Streamed a line at a time (a log of millions of records is
 * never held whole); every line that is not a record is counted, by why, never a crash: an
 * unreadable line, a truncated last line (a log still being written), a line that is JSON but not a
 * giul 0.2 record (another version, another program's).
 */
import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import { isMethod } from "../vocabulary/measurement.js";

/** What giul-report reads of a record; a proxy's record adds the request's fields. */
export interface ReportRecord {
  readonly joules: number | null;
  readonly method: "sampled" | "estimated" | "unknown";
  readonly backend: string;
  readonly seconds: number;
  readonly idle_w: number;
  readonly tokens: number | null;
  readonly uncertainty_joules: number | null;
  readonly contended: boolean;
  readonly card_joules: number | null;
  readonly stages: Readonly<Record<string, { readonly joules: number | null; readonly method: string }>>;
  readonly model?: string | null;
  readonly started_at?: string;
  readonly duration_ms?: number;
}

export interface Skipped {
  /** Lines that are not JSON. */
  unreadable: number;
  /** A last line cut short (no newline, not JSON): a log still being written. */
  truncated: number;
  /** JSON, but not a giul 0.2 record (another version's, or another program's). */
  notGiul: number;
  /** Blank lines. */
  blank: number;
}

const finiteOrNull = (v: unknown) => v === null || (typeof v === "number" && Number.isFinite(v));

/** The record in a parsed line, or null where it is not a giul 0.2 record. */
export function asRecord(value: unknown): ReportRecord | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const r = value as Record<string, unknown>;
  if (!isMethod(r.method)) return null;
  if (typeof r.seconds !== "number" || !Number.isFinite(r.seconds) || r.seconds < 0) return null;
  if (!finiteOrNull(r.joules) || typeof r.backend !== "string") return null;
  if (typeof r.idle_w !== "number" || typeof r.stages !== "object" || r.stages === null) return null;
  if (!finiteOrNull(r.tokens ?? null) || !finiteOrNull(r.uncertainty_joules ?? null)) return null;
  // A sampled figure comes with its bar; a record without one is not this version's.
  if (r.method === "sampled" && (r.joules === null || typeof r.uncertainty_joules !== "number")) return null;
  return r as unknown as ReportRecord;
}

/**
 * Calls `take` with each record of the files, in order; what was skipped, and the lines read.
 * Throws (with the file named) only where a file cannot be opened.
 */
export async function readLogs(
  files: readonly string[],
  take: (record: ReportRecord) => void,
): Promise<{ lines: number; records: number; skipped: Skipped }> {
  const skipped: Skipped = { unreadable: 0, truncated: 0, notGiul: 0, blank: 0 };
  let lines = 0;
  let records = 0;
  for (const file of files) {
    const stream = createReadStream(file);
    const opened = new Promise<void>((resolve, reject) => {
      stream.once("open", () => resolve());
      stream.once("error", (error) => reject(new Error(`${file}: ${error.message}`)));
    });
    await opened;
    // Whether the file ends with a newline: a last line without one may have been cut short.
    let endsWithNewline = true;
    stream.on("data", (chunk) => {
      const bytes = chunk as Buffer;
      if (bytes.length > 0) endsWithNewline = bytes[bytes.length - 1] === 0x0a;
    });
    const reader = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
    let pending: string | null = null;
    const judge = (line: string, last: boolean) => {
      lines++;
      if (line.trim() === "") {
        skipped.blank++;
        return;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        if (last && !endsWithNewline) skipped.truncated++;
        else skipped.unreadable++;
        return;
      }
      const record = asRecord(parsed);
      if (record === null) {
        skipped.notGiul++;
        return;
      }
      records++;
      take(record);
    };
    // One line behind, so that the last line is known to be the last.
    for await (const line of reader) {
      if (pending !== null) judge(pending, false);
      pending = line;
    }
    if (pending !== null) judge(pending, true);
  }
  return { lines, records, skipped };
}
