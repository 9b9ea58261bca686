/**
 * What a closed window measured, before the rules (src/rules/energy.ts applies them in result()): over
 * the whole window and each stage, the card's energy from the track and, with shared attribution,
 * this window's share from the card's ledger.
 */

import { CardLedger, type LedgerEvent, type LedgerWindow } from "../ledger/ledger.js";
import { type Attribution, aboveIdle, type Concurrency, type ShareMeasurement } from "../rules/energy.js";
import type { Track } from "../track/track.js";
import { fail, type SpanMeasurement } from "../vocabulary/measurement.js";

export interface StageMark {
  readonly name: string;
  /** Index of the mark's event in the window's ledger entries. */
  readonly index: number;
  readonly tokens: number | null;
  /** Most windows open at once over the stage, taken at its mark (CardLedger.maxCountSince). */
  readonly maxConcurrency: number;
}

/** A stage of that name was marked. */
export function hasStage(marks: readonly StageMark[], name: string): boolean {
  for (let i = 0; i < marks.length; i++) if ((marks[i] as StageMark).name === name) return true;
  return false;
}

/**
 * The marks and `mark`, in a list of exact size: grown by push(), a list of one or two marks
 * takes room for 17, kept as long as the window.
 */
export function withMark(before: readonly StageMark[], mark: StageMark): StageMark[] {
  const marks: StageMark[] = new Array(before.length + 1);
  for (let i = 0; i < before.length; i++) marks[i] = before[i] as StageMark;
  marks[before.length] = mark;
  return marks;
}

/** What one span (the window, or a stage) measured, before the rules. */
export interface SpanOutcome {
  readonly measurement: SpanMeasurement | ShareMeasurement;
  readonly seconds: number;
  readonly concurrency: Concurrency | null;
}

export interface Outcome {
  /** The idle floor the card was charged at (the node's, or the card's where another set it). */
  readonly idleW?: number;
  readonly total: SpanOutcome;
  readonly stages: readonly (SpanOutcome & { readonly name: string; readonly tokens: number | null })[];
}

/** What measuring a window needs. */
export interface WindowSources {
  readonly track: Track;
  readonly ledger: CardLedger;
  readonly entries: LedgerWindow;
  readonly idleW: number;
  readonly attribution: Attribution;
  /** Why nothing of the window can be measured (the sync hook, a card not ready), or null. */
  readonly failure: string | null;
}

/** The window's total and its stages, each between two of its ledger events. */
export function measureWindow(
  w: WindowSources,
  marks: readonly StageMark[],
  concurrency: Concurrency,
): Outcome {
  const last = w.entries.events.length - 1;
  // Sized at once: kept with the outcome, and a pushed array takes room for 17.
  const stages: Outcome["stages"][number][] = new Array(marks.length);
  let from = 0;
  const events = w.entries.events;
  for (let i = 0; i < marks.length; i++) {
    const mark = marks[i] as StageMark;
    const concurrency: Concurrency = {
      mean: CardLedger.meanCount(events[from] as LedgerEvent, events[mark.index] as LedgerEvent),
      max: mark.maxConcurrency,
    };
    const span = measureSpan(w, from, mark.index, concurrency);
    // Built field by field: a spread would build the span's object twice.
    stages[i] = {
      name: mark.name,
      tokens: mark.tokens,
      measurement: span.measurement,
      seconds: span.seconds,
      concurrency: span.concurrency,
    };
    from = mark.index;
  }
  // The total is measured over the whole window, never summed from stages.
  return { idleW: w.idleW, total: measureSpan(w, 0, last, concurrency), stages };
}

/**
 * measureWindow() once the window's events are accounted (`thrown`: accounting them failed); where
 * either threw (a fault of giul's own), nothing is measured, and the outcome says why.
 */
export function measureClosed(
  w: WindowSources,
  marks: readonly StageMark[],
  closeEvent: LedgerEvent,
  concurrency: Concurrency,
  thrown: { error: unknown } | null,
): Outcome {
  try {
    if (thrown !== null) throw thrown.error;
    return measureWindow(w, marks, concurrency);
  } catch (error) {
    const openEdge = (w.entries.events[0] as LedgerEvent).edge;
    const measurement = fail(`evaluating the window failed: ${String(error)}`);
    return {
      total: { measurement, seconds: Number(closeEvent.edge.tNs - openEdge.tNs) / 1e9, concurrency },
      stages: [],
    };
  }
}

function joined(a: string | null | undefined, b: string | null): string | null {
  if (a === null || a === undefined) return b;
  return b === null ? a : `${a}; ${b}`;
}

/** One span between two of the window's ledger events: the card over it, and this window's share. */
function measureSpan(
  w: WindowSources,
  fromIndex: number,
  toIndex: number,
  concurrency: Concurrency,
): SpanOutcome {
  const from = (w.entries.events[fromIndex] as LedgerEvent).edge;
  const to = (w.entries.events[toIndex] as LedgerEvent).edge;
  const secs = Number(to.tNs - from.tNs) / 1e9;
  if (w.failure !== null) return { measurement: fail(w.failure), seconds: secs, concurrency };
  // Shared: the bar is the ledger's share's, so the card's own is not narrowed.
  const card = w.track.span(from, to, w.attribution === "exclusive");
  if (!card.ok || w.attribution === "exclusive") return { measurement: card, seconds: secs, concurrency };
  const share = w.ledger.share(w.entries, fromIndex, toIndex);
  if (!share.ok) return { measurement: share, seconds: secs, concurrency };
  const measurement: ShareMeasurement = {
    ok: true,
    share: true,
    aboveJoules: share.aboveJoules,
    cardAboveJoules: aboveIdle(card.grossJoules, w.idleW, secs),
    uncertaintyJoules: share.uncertaintyJoules,
    samples: card.samples,
    maxGapMs: card.maxGapMs,
    caveat: joined(card.caveat, w.entries.caveat),
  };
  return { measurement, seconds: secs, concurrency };
}
