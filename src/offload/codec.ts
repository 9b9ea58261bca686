/**
 * Outcomes (meter-measure.ts Outcome) as rows of numbers, for the accounting worker's messages: a
 * structured clone of the objects costs the receiving event loop a few µs per window (the clone's
 * objects, then their garbage), more than the window's own work there. Per window: its number,
 * its stages' count, then one row per span (the total, then each stage): what kind of measurement,
 * its numbers, its seconds, its concurrency, and its strings as indices into the batch's list.
 */
import type { Concurrency, ShareMeasurement } from "../energy.js";
import { fail, type SpanMeasurement } from "../measurement.js";
import type { Outcome, SpanOutcome } from "../meter-measure.js";
import type { OutcomeItem } from "./protocol.js";

/** The outcome of a window that could not be measured, with why: its every span fails so. */
export function failedOutcome(reason: string): Outcome {
  return { total: { measurement: fail(reason), seconds: 0, concurrency: null }, stages: [] };
}

const FAILED = 0;
const SPAN = 1;
const SHARE = 2;
/** kind, value (gross or above), card above, uncertainty, samples, max gap, seconds, mean, max, caveat, reason */
const ROW = 11;

/** Writes outcomes as numbers and strings. */
export function encodeOutcomes(items: readonly OutcomeItem[]): { numbers: Float64Array; strings: string[] } {
  let n = 0;
  for (const [, o] of items) n += 2 + (1 + o.stages.length) * ROW;
  const numbers = new Float64Array(n);
  const strings: string[] = [];
  const index = (text: string | null): number => {
    if (text === null) return -1;
    strings.push(text);
    return strings.length - 1;
  };
  let at = 0;
  const row = (span: SpanOutcome): void => {
    const m = span.measurement as SpanMeasurement | ShareMeasurement;
    if (!m.ok) {
      numbers[at] = FAILED;
      numbers[at + 10] = index(m.reason);
      numbers[at + 9] = -1;
    } else if ("share" in m) {
      numbers[at] = SHARE;
      numbers[at + 1] = m.aboveJoules;
      numbers[at + 2] = m.cardAboveJoules ?? Number.NaN;
      numbers[at + 3] = m.uncertaintyJoules;
      numbers[at + 4] = m.samples;
      numbers[at + 5] = m.maxGapMs;
      numbers[at + 9] = index(m.caveat);
      numbers[at + 10] = -1;
    } else {
      numbers[at] = SPAN;
      numbers[at + 1] = m.grossJoules;
      numbers[at + 3] = m.uncertaintyJoules;
      numbers[at + 4] = m.samples;
      numbers[at + 5] = m.maxGapMs;
      numbers[at + 9] = index(m.caveat);
      numbers[at + 10] = -1;
    }
    numbers[at + 6] = span.seconds;
    numbers[at + 7] = span.concurrency?.mean ?? Number.NaN;
    numbers[at + 8] = span.concurrency?.max ?? Number.NaN;
    at += ROW;
  };
  for (const [owner, o] of items) {
    numbers[at++] = owner;
    numbers[at++] = o.stages.length;
    row(o.total);
    for (const stage of o.stages) row(stage);
  }
  return { numbers, strings };
}

/** The string a row names in slot `at` (an index into the batch's strings; −1: none). */
function text(numbers: Float64Array, at: number, strings: readonly string[]): string | null {
  const k = numbers[at] as number;
  return k < 0 ? null : (strings[k] ?? null);
}

/** The measurement of the row at `at`. */
function measurementAt(
  numbers: Float64Array,
  at: number,
  strings: readonly string[],
): SpanOutcome["measurement"] {
  const kind = numbers[at] as number;
  if (kind === FAILED) return { ok: false, reason: text(numbers, at + 10, strings) ?? "not measured" };
  if (kind === SHARE) {
    const card = numbers[at + 2] as number;
    const share: ShareMeasurement = {
      ok: true,
      share: true,
      aboveJoules: numbers[at + 1] as number,
      cardAboveJoules: Number.isNaN(card) ? null : card,
      uncertaintyJoules: numbers[at + 3] as number,
      samples: numbers[at + 4] as number,
      maxGapMs: numbers[at + 5] as number,
      caveat: text(numbers, at + 9, strings),
    };
    return share;
  }
  const span: SpanMeasurement = {
    ok: true,
    grossJoules: numbers[at + 1] as number,
    samples: numbers[at + 4] as number,
    maxGapMs: numbers[at + 5] as number,
    uncertaintyJoules: numbers[at + 3] as number,
    caveat: text(numbers, at + 9, strings),
  };
  return span;
}

/** The concurrency of the row at `at`, or null. */
function concurrencyAt(numbers: Float64Array, at: number): Concurrency | null {
  const mean = numbers[at + 7] as number;
  return Number.isNaN(mean) ? null : { mean, max: numbers[at + 8] as number };
}

/** A stage's name and tokens, which the window's environment keeps (its marks). */
export interface StageName {
  readonly name: string;
  readonly tokens: number | null;
}

/**
 * Reads back what encodeOutcomes wrote, window by window: `want(owner)` says how the window's
 * stages are named (null: nobody waits for it, skipped unread), `each` gets the outcome, its
 * stages named so (a count that does not match the names: no stages).
 */
export function decodeOutcomes(
  numbers: Float64Array,
  strings: readonly string[],
  want: (owner: number) => readonly StageName[] | null,
  each: (owner: number, outcome: Outcome) => void,
): void {
  let at = 0;
  while (at < numbers.length) {
    const owner = numbers[at] as number;
    const count = numbers[at + 1] as number;
    at += 2;
    const names = want(owner);
    if (names === null) {
      at += (1 + count) * ROW;
      continue;
    }
    const total: SpanOutcome = {
      measurement: measurementAt(numbers, at, strings),
      seconds: numbers[at + 6] as number,
      concurrency: concurrencyAt(numbers, at),
    };
    at += ROW;
    const named = count === names.length;
    const stages: Outcome["stages"][number][] = new Array(named ? count : 0);
    for (let i = 0; i < count; i++, at += ROW) {
      const name = names[i];
      if (name === undefined || !named) continue;
      stages[i] = {
        name: name.name,
        tokens: name.tokens,
        measurement: measurementAt(numbers, at, strings),
        seconds: numbers[at + 6] as number,
        concurrency: concurrencyAt(numbers, at),
      };
    }
    each(owner, { total, stages });
  }
}
