/**
 * What the nvidia-smi sampler says about itself (SmiSampler.diagnostics): what it counted,
 * its child, and each card it reads.
 */
import { SMI_ERROR, type SmiPower, type SmiQuery } from "./parse.js";

/** What the sampler counted since it was made (for diagnostics and tests). */
export interface SmiCounters {
  /** Card rows parsed (of any card, watched or not). */
  rows: number;
  /** Readings written into a card's ring. */
  readings: number;
  /** Rows whose power was a token or garbled, by kind. */
  notAvailable: number;
  notSupported: number;
  unknownError: number;
  gpuLost: number;
  resetRequired: number;
  noPermission: number;
  otherToken: number;
  malformed: number;
  /** A line cut off by the child's exit. */
  truncated: number;
  /** Lines longer than any nvidia-smi row (dropped). */
  overlong: number;
  blank: number;
  headers: number;
  /** Lines of text that are not rows (a driver failure message, say). */
  messages: number;
  /** `Field "power.draw.instant" is not a valid field to query.` */
  invalidField: number;
  /** Children started, and those that ended without being asked to. */
  starts: number;
  exits: number;
  /** Children stopped for printing nothing for too long. */
  stalls: number;
  /** Rows placed by nvidia-smi's own timestamp, and those placed without one (missing or bad). */
  stamped: number;
  unstamped: number;
  /** Rows whose timestamp did not parse. */
  badStamps: number;
  /** Steps of the wall clock seen in the timestamps (the offset estimate restarted). */
  clockSteps: number;
}

export interface SmiCardDiagnostics {
  readonly index: number;
  /** The column this card's readings come from, or null before its first reading. */
  readonly power: SmiPower | null;
  readonly readings: number;
}

export interface SmiDiagnostics {
  /** The nvidia-smi run (or to be run), or null when none is found. */
  readonly path: string | null;
  readonly running: boolean;
  /** The pid of the child (the watchdog shell where there is one). */
  readonly pid: number | null;
  /** The child's loop period (ms), or null. */
  readonly periodMs: number | null;
  /** The query in use: with `power.draw.instant`, or `power.draw` only (an older driver). */
  readonly query: SmiQuery;
  /** Why the last child stopped, or null. */
  readonly lastStop: string | null;
  /** Deaths in a row (the backoff exponent). */
  readonly failures: number;
  /** The delay of the restart now pending (ms), or null. */
  readonly restartInMs: number | null;
  readonly counters: Readonly<SmiCounters>;
  readonly cards: readonly SmiCardDiagnostics[];
}

/** Every counter at 0. */
export function zeroCounters(): SmiCounters {
  return {
    rows: 0,
    readings: 0,
    notAvailable: 0,
    notSupported: 0,
    unknownError: 0,
    gpuLost: 0,
    resetRequired: 0,
    noPermission: 0,
    otherToken: 0,
    malformed: 0,
    truncated: 0,
    overlong: 0,
    blank: 0,
    headers: 0,
    messages: 0,
    invalidField: 0,
    starts: 0,
    exits: 0,
    stalls: 0,
    stamped: 0,
    unstamped: 0,
    badStamps: 0,
    clockSteps: 0,
  };
}

/** The counter of each error code a row can carry. */
export const COUNTER_OF: Readonly<Record<number, keyof SmiCounters>> = {
  [SMI_ERROR.NOT_AVAILABLE]: "notAvailable",
  [SMI_ERROR.NOT_SUPPORTED]: "notSupported",
  [SMI_ERROR.UNKNOWN_ERROR]: "unknownError",
  [SMI_ERROR.GPU_LOST]: "gpuLost",
  [SMI_ERROR.RESET_REQUIRED]: "resetRequired",
  [SMI_ERROR.NO_PERMISSION]: "noPermission",
  [SMI_ERROR.OTHER_TOKEN]: "otherToken",
  [SMI_ERROR.MALFORMED]: "malformed",
};
