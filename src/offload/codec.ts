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

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** PackedOutcome.span()'s objects: one of each for every call (charge() keeps none of them). */
const SPAN_SCRATCH: Mutable<SpanOutcome> = {
  measurement: fail("not measured"),
  seconds: 0,
  concurrency: null,
};
const SHARE_SCRATCH: Mutable<ShareMeasurement> = {
  ok: true,
  share: true,
  aboveJoules: 0,
  cardAboveJoules: null,
  uncertaintyJoules: 0,
  samples: 0,
  maxGapMs: 0,
  caveat: null,
};
const GROSS_SCRATCH: Mutable<Extract<SpanMeasurement, { ok: true }>> = {
  ok: true,
  grossJoules: 0,
  samples: 0,
  maxGapMs: 0,
  uncertaintyJoules: 0,
  caveat: null,
};
const FAILED_SCRATCH: { ok: false; reason: string } = { ok: false, reason: "not measured" };

/**
 * One window's outcome as the worker sent it: where its rows are in its batch's numbers, read when
 * its record is built. Reading every window's rows into objects as the batch came (three spans of
 * three objects each, about 1 kB a window) was most of what the event loop allocated for an
 * offloaded window, for objects read once by result() (bench/RESULTS.md). It keeps its batch's
 * numbers (11 a span, for every window of the batch) as long as it is kept.
 */
export class PackedOutcome {
  constructor(
    private readonly numbers: Float64Array,
    /** Where its total's row begins. */
    private readonly at: number,
    /** Its stages' rows, after the total's. */
    readonly stageCount: number,
    private readonly strings: readonly string[],
  ) {}

  /**
   * Span `i` (0: the total, then each stage in the order of its marks) as one object shared by
   * every call, and so is its measurement: valid until the next call, for a reader that keeps
   * neither (charge()). Its concurrency is its own (a record keeps it).
   */
  span(i: number): SpanOutcome {
    const numbers = this.numbers;
    const at = this.at + i * ROW;
    const kind = numbers[at] as number;
    const out = SPAN_SCRATCH;
    if (kind === FAILED) {
      FAILED_SCRATCH.reason = text(numbers, at + 10, this.strings) ?? "not measured";
      out.measurement = FAILED_SCRATCH;
    } else if (kind === SHARE) {
      const m = SHARE_SCRATCH;
      const card = numbers[at + 2] as number;
      m.aboveJoules = numbers[at + 1] as number;
      m.cardAboveJoules = Number.isNaN(card) ? null : card;
      m.uncertaintyJoules = numbers[at + 3] as number;
      m.samples = numbers[at + 4] as number;
      m.maxGapMs = numbers[at + 5] as number;
      m.caveat = text(numbers, at + 9, this.strings);
      out.measurement = m;
    } else {
      const m = GROSS_SCRATCH;
      m.grossJoules = numbers[at + 1] as number;
      m.uncertaintyJoules = numbers[at + 3] as number;
      m.samples = numbers[at + 4] as number;
      m.maxGapMs = numbers[at + 5] as number;
      m.caveat = text(numbers, at + 9, this.strings);
      out.measurement = m;
    }
    out.seconds = numbers[at + 6] as number;
    out.concurrency = concurrencyAt(numbers, at);
    return out;
  }

  /** As objects of its own, its stages named `names` (a count that does not match the names: no stages). */
  unpack(names: readonly StageName[]): Outcome {
    const named = this.stageCount === names.length;
    const stages: Outcome["stages"][number][] = new Array(named ? this.stageCount : 0);
    for (let i = 0; named && i < this.stageCount; i++) {
      const name = names[i] as StageName;
      stages[i] = { name: name.name, tokens: name.tokens, ...this.ownSpan(i + 1) };
    }
    return { total: this.ownSpan(0), stages };
  }

  /** span(i) copied out of the shared objects. */
  private ownSpan(i: number): SpanOutcome {
    const span = this.span(i);
    return { measurement: { ...span.measurement }, seconds: span.seconds, concurrency: span.concurrency };
  }
}

/**
 * Reads back what encodeOutcomes wrote, window by window: `take(owner)` gives what waits for the
 * window (undefined: nobody, skipped), `each` gets it and the window's outcome, still packed.
 */
export function decodeOutcomes<W>(
  numbers: Float64Array,
  strings: readonly string[],
  take: (owner: number) => W | undefined,
  each: (waiter: W, outcome: PackedOutcome) => void,
): void {
  let at = 0;
  while (at < numbers.length) {
    const owner = numbers[at] as number;
    const count = numbers[at + 1] as number;
    at += 2;
    const waiter = take(owner);
    if (waiter !== undefined) each(waiter, new PackedOutcome(numbers, at, count, strings));
    at += (1 + count) * ROW;
  }
}
