/**
 * The entries of the per-card ledger (./ledger.ts): the events at which the windows on a card or
 * their weights changed, with the accumulators each carries, and one window's own events.
 */
import type { Edge } from "../track/track.js";
import type { Failure } from "../vocabulary/measurement.js";
import { SlabPool, type Unboxed, unboxedAccessors } from "../vocabulary/unboxed.js";

/**
 * One instant at which the windows on a card, or their weights, changed (or a stage ended). Its
 * numbers are kept unboxed in a slab (../unboxed.ts), in the order of its accessors' names below.
 */
export class LedgerEvent implements Unboxed {
  readonly edge: Edge;
  readonly seq: number;
  /** Windows open on the card just after this event. */
  readonly countAfter: number;
  /** Total weight on the card just before and just after this event. */
  declare readonly weightBefore: number;
  declare readonly weightAfter: number;
  /** ∫ windows open dt up to this event (windows × ns). */
  declare readonly countNs: number;
  /** The idle floor charged for the card from this event on (W; NaN when none is open). */
  declare readonly idle: number;
  /** Energy above idle per unit weight, cumulative (J). */
  declare v: number;
  /** Errors of intervals themselves per unit weight, cumulative (J). */
  declare u: number;
  /**
   * Σ |Δ(1/W)| × two-sided edge error, and Σ max(0, ±Δ(1/W)) × edge lag, cumulative (J), each
   * including this event's own term (see {@link LedgerEvent.invChange}).
   */
  declare e2: number;
  declare lagUp: number;
  declare lagDown: number;
  /** This event's edge errors (J), or why they are not known (edgeFailure). */
  declare err: number;
  declare lag: number;
  /** Card energy above idle over the intervals with a window open, cumulative (J). */
  declare card: number;
  /** The weight of the window whose event this is, from this event on (0 after its close). */
  declare own: number;
  /** Set once the interval ending here has been accounted. */
  resolved = false;
  /** Events of the card's log were lost just before this one (the log wrapped, or an entry was garbage), and why. */
  lostBefore = false;
  lostReason: string | null = null;
  /**
   * Events of the log were skipped just before this one on purpose: this environment had no window
   * open then, so nothing of its own spans the gap, which is not measured.
   */
  skippedBefore = false;
  edgeFailure: string | null = null;
  /** Intervals that could not be measured, cumulative. */
  broken = 0;
  /** Why the latest of them could not be measured. */
  brokenReason: string | null = null;
  readonly slab: Float64Array;
  readonly at: number;

  constructor(
    edge: Edge,
    seq: number,
    weightBefore: number,
    weightAfter: number,
    countAfter: number,
    countNs: number,
    idle: number,
  ) {
    this.edge = edge;
    this.seq = seq;
    // A count of windows (an int32 stays a small integer, not a heap number; the log's counts
    // arrive as doubles).
    this.countAfter = countAfter | 0;
    // Its numbers in a slab (./unboxed.ts), in the accessors' order (below); a fresh slab's slots
    // are zero, as the accumulators (v onwards) start.
    const at = EVENT_SLOTS.take();
    const slab = EVENT_SLOTS.slab;
    slab[at] = weightBefore;
    slab[at + 1] = weightAfter;
    slab[at + 2] = countNs;
    slab[at + 3] = idle;
    this.slab = slab;
    this.at = at;
  }

  /** The change of 1 / (total weight) at this event: every other window's coefficient moves by w × it. */
  invChange(): number {
    return inverse(this.weightAfter) - inverse(this.weightBefore);
  }
}
const EVENT_NAMES = [
  "weightBefore",
  "weightAfter",
  "countNs",
  "idle",
  "v",
  "u",
  "e2",
  "lagUp",
  "lagDown",
  "err",
  "lag",
  "card",
  "own",
];
// Written after construction: the accumulators, from v on.
unboxedAccessors(LedgerEvent.prototype, EVENT_NAMES, EVENT_NAMES.slice(EVENT_NAMES.indexOf("v")));
/** The slabs of every LedgerEvent's numbers (./unboxed.ts). */
const EVENT_SLOTS = new SlabPool(EVENT_NAMES.length);

/** What a window was charged between two of its own events. */
export type ShareResult =
  | {
      readonly ok: true;
      /** Its share of the card's energy above idle (J). */
      readonly aboveJoules: number;
      /** Its bound (J). */
      readonly uncertaintyJoules: number;
    }
  | Failure;

/**
 * One window's entries in its card's ledger: its events in order, each with the window's weight
 * from that event on (LedgerEvent.own).
 */
const NO_EVENTS: readonly LedgerEvent[] = Object.freeze([]);

export class LedgerWindow {
  /**
   * Its events, oldest first, in an array of exactly their number (see add()): most windows have
   * four, and an array grown by push() takes room for 17, kept while the window lives.
   */
  events: readonly LedgerEvent[] = NO_EVENTS;
  weight: number;
  /** The idle floor the card is charged at while it is open (W): its node's, or the card's where another set it. */
  idleW = Number.NaN;
  /** What its record says of how the card was shared (another floor, sharing not host-wide), or null. */
  caveat: string | null = null;
  constructor(weight: number) {
    this.weight = weight;
  }

  /** Appends its next event. */
  add(event: LedgerEvent): void {
    const events = this.events;
    const next = new Array<LedgerEvent>(events.length + 1);
    for (let i = 0; i < events.length; i++) next[i] = events[i] as LedgerEvent;
    next[events.length] = event;
    this.events = next;
  }
}

/** 1 / weight, 0 for an empty card. */
export function inverse(weight: number): number {
  return weight > 0 ? 1 / weight : 0;
}
