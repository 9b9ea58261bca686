/**
 * A window's own events (its open, marks, weight changes, close): on its card's ledger while it is
 * open, then only their instants and its weight after each, kept once it is measured (the ledger's
 * events share slabs of numbers with hundreds of others, which a Meter kept for long would keep).
 */
import type { LedgerEvent, LedgerWindow } from "../ledger/ledger.js";
import type { StageMark } from "./measure.js";

/** A window's edges as Meter.edgeTimes() gives them. */
export interface EdgeTimes {
  open: bigint | null;
  marks: { name: string; tNs: bigint }[];
  close: bigint | null;
  weights: { tNs: bigint; weight: number }[];
  /**
   * A window over several cards: each card's part's own edges (within microseconds of the ones
   * above, which are its first card's).
   */
  cards?: ({ index: number | null } & Omit<EdgeTimes, "cards">)[];
}

export class WindowEvents {
  private entries: LedgerWindow | null = null;
  private closedNs: bigint[] | null = null;
  private closedOwn: number[] | null = null;

  /** The window opened on its card's ledger. */
  opened(entries: LedgerWindow): void {
    this.entries = entries;
  }

  /** It was measured: keep the instants and weights, let the ledger's events go. */
  measured(): void {
    const events = (this.entries as LedgerWindow).events;
    const ns: bigint[] = new Array(events.length);
    const own: number[] = new Array(events.length);
    for (let i = 0; i < events.length; i++) {
      const e = events[i] as LedgerEvent;
      ns[i] = e.edge.tNs;
      own[i] = e.own;
    }
    this.closedNs = ns;
    this.closedOwn = own;
    this.entries = null;
  }

  /** Events so far (0 before it opened). */
  count(): number {
    return this.closedNs?.length ?? this.entries?.events.length ?? 0;
  }

  /** CLOCK_MONOTONIC ns of event `i`. */
  ns(i: number): bigint {
    const closed = this.closedNs;
    if (closed !== null) return closed[i] as bigint;
    return ((this.entries as LedgerWindow).events[i] as LedgerEvent).edge.tNs;
  }

  /** The window's own weight from event `i` on. */
  own(i: number): number {
    const closed = this.closedOwn;
    if (closed !== null) return closed[i] as number;
    return ((this.entries as LedgerWindow).events[i] as LedgerEvent).own;
  }

  /** The edges, with `closed` once the closing event is appended. */
  edgeTimes(marks: readonly StageMark[], closed: boolean): EdgeTimes {
    const count = this.count();
    if (count === 0) return { open: null, marks: [], close: null, weights: [] };
    const marked = new Set(marks.map((m) => m.index));
    const weights: { tNs: bigint; weight: number }[] = [];
    const last = closed ? count - 1 : count;
    for (let i = 0; i < last; i++) {
      if (!marked.has(i)) weights.push({ tNs: this.ns(i), weight: this.own(i) });
    }
    return {
      open: this.ns(0),
      marks: marks.map((m) => ({ name: m.name, tNs: this.ns(m.index) })),
      close: closed ? this.ns(count - 1) : null,
      weights,
    };
  }
}
