/**
 * A window over several cards (a node with several `gpuIndex`, tensor parallel): one window on
 * each card, each a Meter of that card's node that publishes nothing of its own, opened, marked,
 * weighed and closed together; the record sums their parts (../rules/cards.ts). On each card the
 * part takes its share among the windows on that card, whatever other cards they span.
 */
import { type CardPart, chargeCards } from "../rules/cards.js";
import type { Attribution, Energy } from "../rules/energy.js";
import type { BackendName } from "../vocabulary/measurement.js";
import { CloseCountdown } from "./close.js";
import type { EdgeTimes } from "./events.js";

/** One card's window (a Meter of that card's node). */
export interface PartWindow {
  readonly backend: BackendName | null;
  /** Opens it: null where it opened at once, else the wait. Throws a configuration error. */
  openPart(): Promise<unknown> | null;
  /** Whether it is open (opened, not closing). */
  partOpen(): boolean;
  /** mark(), its arguments checked. */
  markPart(name: string, tokens: number | null): void;
  setWeight(weight: number): void;
  /** Closes it; `countdown` is told once it is measured. */
  closePart(countdown: CloseCountdown): void;
  /** Its record, the rules applied (as a part: never estimated on its own). */
  charged(tokens: number | null): Energy;
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

  /**
   * Opens every part: null where all opened at once (no promise of its own per card), else the
   * wait. Where one refuses (a configuration error), closes the others and rejects with it.
   */
  open(): Promise<void> | null {
    let waits: Promise<unknown>[] | null = null;
    let refused: { error: unknown } | null = null;
    for (const p of this.parts) {
      let wait: Promise<unknown> | null;
      try {
        wait = p.openPart();
      } catch (error) {
        refused ??= { error };
        continue;
      }
      if (wait === null) continue;
      waits ??= [];
      waits.push(
        wait.catch((error: unknown) => {
          refused ??= { error };
        }),
      );
    }
    if (waits === null && refused === null) return null;
    return Promise.all(waits ?? []).then(async () => {
      if (refused === null) return;
      const opened = this.parts.filter((p) => p.partOpen());
      if (opened.length > 0) {
        const closing = new CloseCountdown(opened.length);
        for (const p of opened) p.closePart(closing);
        await closing.promise.catch(() => undefined);
      }
      throw refused.error;
    });
  }

  mark(name: string, tokens: number | null): void {
    for (const p of this.parts) p.markPart(name, tokens);
  }

  setWeight(weight: number): void {
    for (const p of this.parts) p.setWeight(weight);
  }

  /** Closes every part (`failure`: why none can be measured, or null): one promise for all. */
  close(failure: string | null): Promise<void> {
    if (failure !== null) for (const p of this.parts) p.failWith(failure);
    const closing = new CloseCountdown(this.parts.length);
    for (const p of this.parts) p.closePart(closing);
    return closing.promise;
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
    const parts: CardPart[] = this.parts.map((p) => ({ ...p.card(), energy: p.charged(null) }));
    return chargeCards(parts, marks, facts, tokens);
  }
}
