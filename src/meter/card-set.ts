/**
 * A window over several cards (a node with several `gpuIndex`, tensor parallel): one window on
 * each card, each a Meter of that card's node that publishes nothing of its own, opened, marked,
 * weighed and closed together; the record sums their parts (../rules/cards.ts). On each card the
 * part takes its share among the windows on that card, whatever other cards they span.
 */
import { type CardPart, chargeCards } from "../rules/cards.js";
import type { Attribution, Energy } from "../rules/energy.js";
import type { BackendName } from "../vocabulary/measurement.js";
import type { EdgeTimes } from "./events.js";

/** One card's window (a Meter of that card's node). */
export interface PartWindow {
  readonly backend: BackendName | null;
  open(): Promise<unknown>;
  mark(name: string, options?: { tokens?: number | null }): void;
  setWeight(weight: number): void;
  close(): Promise<void>;
  result(): Energy;
  edgeTimes(): EdgeTimes;
  /** @internal The card it is on: index, and UUID where known. */
  card(): { readonly index: number | null; readonly uuid: string | null };
  /** @internal Nothing of it can be measured, and why (the window's sync hook failed). */
  failWith(reason: string): void;
}

export class CardSet {
  constructor(readonly parts: readonly PartWindow[]) {}

  /** Every part's backend where they agree, "mixed" where they do not (null before open()). */
  get backend(): BackendName | null {
    const first = (this.parts[0] as PartWindow).backend;
    if (first === null) return null;
    for (const p of this.parts) if (p.backend !== first) return "mixed";
    return first;
  }

  /** Opens every part; where one refuses (a configuration error), closes the others and rethrows. */
  async open(): Promise<void> {
    const opened = await Promise.allSettled(this.parts.map((p) => p.open()));
    const refused = opened.find((o) => o.status === "rejected");
    if (refused === undefined) return;
    await Promise.allSettled(
      this.parts.filter((_, i) => opened[i]?.status === "fulfilled").map((p) => p.close()),
    );
    throw (refused as PromiseRejectedResult).reason;
  }

  mark(name: string, tokens: number | null): void {
    for (const p of this.parts) p.mark(name, { tokens });
  }

  setWeight(weight: number): void {
    for (const p of this.parts) p.setWeight(weight);
  }

  /** Closes every part (`failure`: why none can be measured, or null). */
  async close(failure: string | null): Promise<void> {
    if (failure !== null) for (const p of this.parts) p.failWith(failure);
    await Promise.all(this.parts.map((p) => p.close()));
  }

  /** The window's edges: its first card's (every part's edges are within microseconds of them). */
  edgeTimes(): EdgeTimes {
    const cards = this.parts.map((p) => ({ index: p.card().index, ...p.edgeTimes() }));
    return { ...(this.parts[0] as PartWindow).edgeTimes(), cards };
  }

  /** CLOCK_MONOTONIC ns of the window's opening (or, `last`, its newest) edge: its first card's. */
  edgeNs(last: boolean): bigint {
    const t = (this.parts[0] as PartWindow).edgeTimes();
    return (last ? (t.close ?? t.open) : t.open) as bigint;
  }

  result(
    marks: readonly { readonly name: string; readonly tokens: number | null }[],
    facts: { readonly joulesPer1kHint: number | null; readonly attribution: Attribution },
    tokens: number | null,
  ): Energy {
    const parts: CardPart[] = this.parts.map((p) => ({ ...p.card(), energy: p.result() }));
    return chargeCards(parts, marks, facts, tokens);
  }
}
