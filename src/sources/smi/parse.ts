/**
 * The part of nvidia-smi's command line that giul relies on: the power query, a strict parser of
 * its CSV rows, and a one-shot run of it (for giul-probe). Pure except for {@link querySmiOnce}.
 *
 * The parser is total: every line maps to exactly one {@link SmiLine}, and a value is a reading
 * only when it is a plain decimal number of watts. Tokens (`[N/A]`, `[Not Supported]`,
 * `[Unknown Error]`, `[GPU is lost]`, …), blank, truncated or garbled lines and messages such as
 * the driver failure become data with an error code, never 0 W (shared/nvml-facts.md §3).
 *
 * Each row ends with nvidia-smi's `timestamp` (when it took the reading: its local wall clock,
 * `YYYY/MM/DD HH:MM:SS.mmm`), which the sampler maps onto CLOCK_MONOTONIC. A row without it (a
 * replayed capture, a stand-in script) or with a stamp that does not parse is still a row: its
 * stamp is absent or marked bad, and the sampler falls back to the time the row arrived.
 */
import { spawn } from "node:child_process";
import { MAX_PLAUSIBLE_W } from "../../edges/uncertainty.js";

/** The query when the driver knows `power.draw.instant` (R535 and later). */
export const QUERY_INSTANT = "index,power.draw.instant,power.draw,timestamp";
/** The query for a driver that rejects `power.draw.instant` as an unknown field. */
export const QUERY_AVERAGED = "index,power.draw,timestamp";

export type SmiQuery = "instant" | "averaged";

/** Which power a card's readings come from: instantaneous, or `power.draw` (averaged on Ampere+). */
export type SmiPower = "instant" | "averaged";

/** The arguments of one nvidia-smi run: looping every `periodMs` when given, else once. */
export function smiArgs(query: SmiQuery, periodMs: number | null): string[] {
  const args = [
    `--query-gpu=${query === "instant" ? QUERY_INSTANT : QUERY_AVERAGED}`,
    "--format=csv,noheader,nounits",
  ];
  if (periodMs !== null) args.push("-lms", String(periodMs));
  return args;
}

/**
 * Error codes carried by the samples of the smi sampler (Sample.error). Their own space, unrelated
 * to NVML's codes: the tool does not print the NVML return, only a token.
 */
export const SMI_ERROR = Object.freeze({
  /** `[N/A]` or bare `N/A`: NOT_SUPPORTED in current drivers. */
  NOT_AVAILABLE: 1,
  /** `[Not Supported]` (older drivers). */
  NOT_SUPPORTED: 2,
  UNKNOWN_ERROR: 3,
  GPU_LOST: 4,
  RESET_REQUIRED: 5,
  NO_PERMISSION: 6,
  /** Another bracketed token (`[Function Not Found]`, `[Requested functionality has been deprecated]`, …). */
  OTHER_TOKEN: 7,
  /** A value that is neither a number of watts nor a token, or a row of the wrong shape. */
  MALFORMED: 8,
  /** nvidia-smi exited (or could not be started, or stalled and was stopped). */
  EXITED: 9,
});

export type SmiErrorCode = (typeof SMI_ERROR)[keyof typeof SMI_ERROR];

const TOKENS: Readonly<Record<string, SmiErrorCode>> = {
  "n/a": SMI_ERROR.NOT_AVAILABLE,
  "not supported": SMI_ERROR.NOT_SUPPORTED,
  "unknown error": SMI_ERROR.UNKNOWN_ERROR,
  "gpu is lost": SMI_ERROR.GPU_LOST,
  "gpu requires reset": SMI_ERROR.RESET_REQUIRED,
  "insufficient permissions": SMI_ERROR.NO_PERMISSION,
};

/** Describes an {@link SMI_ERROR} code for a person. */
export function describeSmiError(code: number): string {
  switch (code) {
    case 0:
      return "no error recorded";
    case SMI_ERROR.NOT_AVAILABLE:
      return "nvidia-smi printed [N/A] for the power";
    case SMI_ERROR.NOT_SUPPORTED:
      return "nvidia-smi printed [Not Supported] for the power";
    case SMI_ERROR.UNKNOWN_ERROR:
      return "nvidia-smi printed [Unknown Error] for the power";
    case SMI_ERROR.GPU_LOST:
      return "nvidia-smi printed [GPU is lost]";
    case SMI_ERROR.RESET_REQUIRED:
      return "nvidia-smi printed [GPU requires reset]";
    case SMI_ERROR.NO_PERMISSION:
      return "nvidia-smi printed [Insufficient Permissions] for the power";
    case SMI_ERROR.OTHER_TOKEN:
      return "nvidia-smi printed an error token instead of the power";
    case SMI_ERROR.MALFORMED:
      return "nvidia-smi printed a row that is not a power reading";
    case SMI_ERROR.EXITED:
      return "nvidia-smi stopped";
    default:
      return `smi error ${code}`;
  }
}

/** One cell: watts, or why there is no reading. */
export type SmiCell =
  | { readonly ok: true; readonly watts: number }
  | { readonly ok: false; readonly code: SmiErrorCode; readonly text: string };

const WATTS = /^(\d{1,6})(\.\d{1,6})?(?: W)?$/;
const INDEX = /^\d{1,4}$/;

/** Parses one power cell: `69.62` (or `69.62 W`), or a token. */
export function parseCell(raw: string): SmiCell {
  const text = raw.trim();
  const m = WATTS.exec(text);
  if (m !== null) {
    const watts = Number(`${m[1]}${m[2] ?? ""}`);
    if (Number.isFinite(watts) && watts <= MAX_PLAUSIBLE_W) return { ok: true, watts };
    return { ok: false, code: SMI_ERROR.MALFORMED, text };
  }
  const bare = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  const code = TOKENS[bare.trim().toLowerCase()];
  if (code !== undefined) return { ok: false, code, text };
  if (text.startsWith("[") && text.endsWith("]")) return { ok: false, code: SMI_ERROR.OTHER_TOKEN, text };
  return { ok: false, code: SMI_ERROR.MALFORMED, text };
}

/**
 * nvidia-smi's `timestamp` cell: the wall-clock reading it printed, as milliseconds counted as if
 * that reading were UTC (`wallMs`), or the text when it is not a timestamp. The zone is left out on
 * purpose: the sampler only uses differences from CLOCK_MONOTONIC, in which any constant offset
 * (the zone among them) cancels, and a zone change (DST) is a step it detects; reading the text as
 * local time instead would make the value depend on the TZ of this process rather than on what
 * was printed, and leave the skipped and repeated hours of a DST change ambiguous.
 */
export type SmiStamp =
  | { readonly ok: true; readonly wallMs: number }
  | { readonly ok: false; readonly text: string };

const STAMP = /^(\d{4})\/(\d{2})\/(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{3})$/;

/** Parses a timestamp cell, `YYYY/MM/DD HH:MM:SS.mmm`; anything else (`[N/A]`, garbage) is not ok. */
export function parseStamp(raw: string): SmiStamp {
  const text = raw.trim();
  const m = STAMP.exec(text);
  if (m === null) return { ok: false, text };
  const [y, mo, d, h, mi, s, ms] = m.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const wallMs = Date.UTC(y, mo - 1, d, h, mi, s, ms);
  const back = new Date(wallMs);
  // Date.UTC rolls 2024/02/30 over into March and 24:00 into the next day: refuse those.
  if (
    back.getUTCFullYear() !== y ||
    back.getUTCMonth() !== mo - 1 ||
    back.getUTCDate() !== d ||
    back.getUTCHours() !== h ||
    back.getUTCMinutes() !== mi ||
    back.getUTCSeconds() !== s
  )
    return { ok: false, text };
  return { ok: true, wallMs };
}

/** What one line of output is. */
export type SmiLine =
  /**
   * A card's row: `instant` is null for the averaged-only query; `stamp` is null when the row has
   * no timestamp column (the cells of the query without it).
   */
  | {
      readonly kind: "row";
      readonly index: number;
      readonly instant: SmiCell | null;
      readonly average: SmiCell;
      readonly stamp: SmiStamp | null;
    }
  | { readonly kind: "blank" }
  /** A CSV header (`index, power.draw.instant [W], …`): ignored. */
  | { readonly kind: "header" }
  /** `Field "power.draw.instant" is not a valid field to query.`: the driver predates the field. */
  | { readonly kind: "invalid-field"; readonly field: string }
  /** A line that starts like a row but is not one (wrong number of cells, bad index). */
  | { readonly kind: "malformed"; readonly index: number | null; readonly text: string }
  /** Any other text: the tool speaking (driver failure, version mismatch, no devices, …). */
  | { readonly kind: "message"; readonly text: string };

const INVALID_FIELD = /^Field "([^"]*)" is not a valid field to query/;
const MAX_TEXT = 300;

/** Parses one line (without its newline) of the output of {@link smiArgs}`(query, …)`. */
export function parseLine(line: string, query: SmiQuery): SmiLine {
  const text = line.replace(/\r$/, "").trim();
  if (text === "") return { kind: "blank" };
  const invalid = INVALID_FIELD.exec(text);
  if (invalid !== null) return { kind: "invalid-field", field: invalid[1] ?? "" };
  if (/^index\s*(,|$)/.test(text)) return { kind: "header" };
  if (!/^\d/.test(text)) return { kind: "message", text: text.slice(0, MAX_TEXT) };
  const cells = text.split(",");
  // The power cells, then the timestamp; a row without the timestamp is accepted too.
  const want = query === "instant" ? 3 : 2;
  const first = (cells[0] ?? "").trim();
  const index = INDEX.test(first) ? Number(first) : null;
  if ((cells.length !== want && cells.length !== want + 1) || index === null)
    return { kind: "malformed", index, text: text.slice(0, MAX_TEXT) };
  const stamp = cells.length === want + 1 ? parseStamp(cells[want] as string) : null;
  if (query === "instant") {
    return {
      kind: "row",
      index,
      instant: parseCell(cells[1] as string),
      average: parseCell(cells[2] as string),
      stamp,
    };
  }
  return { kind: "row", index, instant: null, average: parseCell(cells[1] as string), stamp };
}

/** Longest line kept; a longer one is not nvidia-smi's output and is dropped (see LineSplitter). */
export const MAX_LINE = 4096;

/** What a single run of the power query says about the cards (for giul-probe). */
export interface SmiProbe {
  /** The query ran and listed at least one card. */
  readonly ok: boolean;
  /** Why it did not, or null. */
  readonly reason: string | null;
  /** The driver knows `power.draw.instant` (it did not reject the field). Null when it did not run. */
  readonly instantField: boolean | null;
  readonly devices: readonly SmiProbeDevice[];
}

export interface SmiProbeDevice {
  readonly index: number;
  /** What the sampler would read on this card, or null when neither column has a number. */
  readonly power: SmiPower | null;
  /** The row's watts in that column, or null. */
  readonly watts: number | null;
  /** Why the card's power cannot be read, or null. */
  readonly reason: string | null;
}

/** Reads the rows of one run of the query into the probe's view. */
export function summarizeRows(lines: readonly SmiLine[]): SmiProbeDevice[] {
  const devices: SmiProbeDevice[] = [];
  for (const line of lines) {
    if (line.kind !== "row" || devices.some((d) => d.index === line.index)) continue;
    const power = choosePower(line);
    if (power === "instant" && line.instant?.ok)
      devices.push({ index: line.index, power, watts: line.instant.watts, reason: null });
    else if (power === "averaged" && line.average.ok)
      devices.push({ index: line.index, power, watts: line.average.watts, reason: null });
    else {
      const cell = line.instant && !line.instant.ok ? line.instant : line.average;
      const text = cell.ok ? "" : cell.text;
      devices.push({ index: line.index, power: null, watts: null, reason: `nvidia-smi printed ${text}` });
    }
  }
  return devices;
}

/**
 * The column a card's readings are taken from, decided on its first row that has a number:
 * instantaneous power when it answers, else `power.draw`. Null when neither has a number yet.
 */
export function choosePower(row: Extract<SmiLine, { kind: "row" }>): SmiPower | null {
  if (row.instant?.ok) return "instant";
  if (row.average.ok) return "averaged";
  return null;
}

async function runOnce(
  path: string,
  query: SmiQuery,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<{ lines: SmiLine[]; code: number | null; error: string | null }> {
  return new Promise((done) => {
    let out = "";
    let settled = false;
    const finish = (code: number | null, error: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const lines = out.split("\n").map((l) => parseLine(l, query));
      done({ lines, code, error });
    };
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(path, smiArgs(query, null), { env, stdio: ["ignore", "pipe", "pipe"] });
    } catch (error) {
      finish(null, `cannot run ${path}: ${error instanceof Error ? error.message : String(error)}`);
      return;
    }
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      finish(null, `${path} did not answer within ${timeoutMs} ms`);
    }, timeoutMs);
    timer.unref();
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (chunk: string) => {
      if (out.length < 65_536) out += chunk;
    });
    child.stderr?.resume();
    child.on("error", (error) => finish(null, `cannot run ${path}: ${error.message}`));
    child.on("close", (code) => finish(code, null));
  });
}

/**
 * Runs the power query once (no loop) and says, per card, whether instantaneous power answers or
 * only the averaged `power.draw`. Never throws.
 */
export async function querySmiOnce(
  path: string,
  env: NodeJS.ProcessEnv = process.env,
  timeoutMs = 10_000,
): Promise<SmiProbe> {
  let query: SmiQuery = "instant";
  let run = await runOnce(path, query, env, timeoutMs);
  let instantField: boolean | null = true;
  if (run.lines.some((l) => l.kind === "invalid-field")) {
    instantField = false;
    query = "averaged";
    run = await runOnce(path, query, env, timeoutMs);
  }
  if (run.error !== null) return { ok: false, reason: run.error, instantField: null, devices: [] };
  const devices = summarizeRows(run.lines);
  if (devices.length === 0) {
    const message = run.lines.find((l): l is Extract<SmiLine, { kind: "message" }> => l.kind === "message");
    const why = message ? message.text : "it printed no row";
    return {
      ok: false,
      reason: `nvidia-smi exited with code ${run.code}: ${why}`,
      instantField: run.lines.some((l) => l.kind === "row") ? instantField : null,
      devices,
    };
  }
  return { ok: true, reason: null, instantField, devices };
}
