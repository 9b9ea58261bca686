/**
 * What a window accounted by the accounting worker (./offload/) reads of its own events, which
 * its environment keeps in place of ledger events: their instants (for edgeTimes() and the
 * seconds of a span not measured), and its outcome named with its stages.
 */
import { fail } from "./measurement.js";
import type { Outcome, SpanOutcome, StageMark } from "./meter-measure.js";
import type { OffloadedWindow } from "./offload/client.js";

/** A window's edges as Meter.edgeTimes() gives them. */
export interface EdgeTimes {
  open: bigint | null;
  marks: { name: string; tNs: bigint }[];
  close: bigint | null;
  weights: { tNs: bigint; weight: number }[];
}

/** CLOCK_MONOTONIC ns of the window's event `i` (as the ledger's edges would have it). */
export function nsAt(epochNs: bigint, w: OffloadedWindow, i: number): bigint {
  return epochNs + BigInt(Math.round(w.times[i] as number));
}

/** edgeTimes() of an offloaded window; `closed` once its closing event is appended. */
export function offloadedEdgeTimes(
  epochNs: bigint,
  w: OffloadedWindow,
  marks: readonly StageMark[],
  closed: boolean,
): EdgeTimes {
  const last = closed ? w.last : w.count;
  const marked = new Set(marks.map((m) => m.index));
  const weights: { tNs: bigint; weight: number }[] = [];
  for (let i = 0; i < last; i++) {
    if (!marked.has(i)) weights.push({ tNs: nsAt(epochNs, w, i), weight: w.weights?.[i] ?? w.initial });
  }
  return {
    open: nsAt(epochNs, w, 0),
    marks: marks.map((m) => ({ name: m.name, tNs: nsAt(epochNs, w, m.index) })),
    close: closed ? nsAt(epochNs, w, w.last) : null,
    weights,
  };
}

/**
 * The worker's outcome with the stages' names and tokens (its stages are in the order of the
 * marks), or every span failed with `failure` (the sync hook, a card not ready, a worker gone).
 */
export function namedOutcome(
  outcome: Outcome | null,
  epochNs: bigint,
  w: OffloadedWindow,
  marks: readonly StageMark[],
  failure: string | null,
): Outcome {
  const secs = (from: number, to: number): number =>
    Number(nsAt(epochNs, w, to) - nsAt(epochNs, w, from)) / 1e9;
  const whole = outcome !== null && outcome.stages.length === marks.length;
  const reason =
    failure ??
    (whole
      ? null
      : ((outcome?.total.measurement as { reason?: string })?.reason ?? "the window was not measured"));
  const stages: Outcome["stages"][number][] = [];
  let from = 0;
  for (const [i, mark] of marks.entries()) {
    const got = whole ? (outcome.stages[i] as SpanOutcome) : null;
    stages.push({
      name: mark.name,
      tokens: mark.tokens,
      measurement: reason !== null ? fail(reason) : (got as SpanOutcome).measurement,
      seconds: got?.seconds ?? secs(from, mark.index),
      concurrency: got?.concurrency ?? null,
    });
    from = mark.index;
  }
  const total = outcome?.total ?? null;
  return {
    total: {
      measurement:
        reason !== null || total === null ? fail(reason ?? "the window was not measured") : total.measurement,
      seconds: total !== null && total.seconds > 0 ? total.seconds : secs(0, w.last),
      concurrency: total?.concurrency ?? null,
    },
    stages,
  };
}
