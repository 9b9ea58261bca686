/**
 * The entries of the per-card ledger (./ledger.ts): the events at which the windows on a card or
 * their weights changed, with the accumulators each carries, and one window's own events.
 */
import type { Edge } from "./backends/track.js";
import type { Failure } from "./measurement.js";

// Where each of an event's numbers sits in its `n` array (see LedgerEvent).
const WEIGHT_BEFORE = 0;
const WEIGHT_AFTER = 1;
const COUNT_NS = 2;
const V = 3;
const U = 4;
const E2 = 5;
const LAG_UP = 6;
const LAG_DOWN = 7;
const ERR = 8;
const LAG = 9;
const CARD = 10;

/**
 * One instant at which the windows on a card, or their weights, changed (or a stage ended).
 *
 * Its numbers live in one array of doubles behind accessors rather than in fields: V8 keeps each
 * double field in a separate heap number, so an event with a dozen of them was a dozen objects
 * for the collector to copy while its window is open, four events a window, thousands of windows
 * at once (bench/RESULTS.md). A double array holds them unboxed, in one object.
 */
export class LedgerEvent {
  readonly edge: Edge;
  readonly seq: number;
  /** Windows open on the card just after this event. */
  readonly countAfter: number;
  /** Set once the interval ending here has been accounted. */
  resolved = false;
  /** Events of the process-wide log were lost just before this one (the log wrapped). */
  lostBefore = false;
  /**
   * Events of the log were skipped just before this one on purpose: this environment had no window
   * open then, so nothing of its own spans the gap, which is not measured.
   */
  skippedBefore = false;
  /** Why this event's edge errors are not known, or null. */
  edgeFailure: string | null = null;
  /** Intervals that could not be measured, cumulative. */
  broken = 0;
  /** Why the latest of them could not be measured. */
  brokenReason: string | null = null;
  private readonly n: number[];

  constructor(
    edge: Edge,
    seq: number,
    weightBefore: number,
    weightAfter: number,
    countAfter: number,
    countNs: number,
  ) {
    this.edge = edge;
    this.seq = seq;
    this.countAfter = countAfter;
    // 0.5 rather than 0 where a slot starts: a literal of doubles, so that the array is one of
    // doubles from the start (one of small integers would be reallocated at the first fraction).
    const n = [weightBefore, weightAfter, countNs, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5];
    for (let i = V; i <= CARD; i++) n[i] = 0;
    this.n = n;
  }

  /** Total weight on the card just before and just after this event. */
  get weightBefore(): number {
    return this.n[WEIGHT_BEFORE] as number;
  }
  get weightAfter(): number {
    return this.n[WEIGHT_AFTER] as number;
  }
  /** ∫ windows open dt up to this event (windows × ns). */
  get countNs(): number {
    return this.n[COUNT_NS] as number;
  }
  /** Energy above idle per unit weight, cumulative (J). */
  get v(): number {
    return this.n[V] as number;
  }
  set v(x: number) {
    this.n[V] = x;
  }
  /** Errors of intervals themselves per unit weight, cumulative (J). */
  get u(): number {
    return this.n[U] as number;
  }
  set u(x: number) {
    this.n[U] = x;
  }
  /**
   * Σ |Δ(1/W)| × two-sided edge error, and Σ max(0, ±Δ(1/W)) × edge lag, cumulative (J), each
   * including this event's own term (see {@link LedgerEvent.invChange}).
   */
  get e2(): number {
    return this.n[E2] as number;
  }
  set e2(x: number) {
    this.n[E2] = x;
  }
  get lagUp(): number {
    return this.n[LAG_UP] as number;
  }
  set lagUp(x: number) {
    this.n[LAG_UP] = x;
  }
  get lagDown(): number {
    return this.n[LAG_DOWN] as number;
  }
  set lagDown(x: number) {
    this.n[LAG_DOWN] = x;
  }
  /** This event's edge errors (J), or why they are not known (edgeFailure). */
  get err(): number {
    return this.n[ERR] as number;
  }
  set err(x: number) {
    this.n[ERR] = x;
  }
  get lag(): number {
    return this.n[LAG] as number;
  }
  set lag(x: number) {
    this.n[LAG] = x;
  }
  /** Card energy above idle over the intervals with a window open, cumulative (J). */
  get card(): number {
    return this.n[CARD] as number;
  }
  set card(x: number) {
    this.n[CARD] = x;
  }

  /** The change of 1 / (total weight) at this event: every other window's coefficient moves by w × it. */
  invChange(): number {
    return inverse(this.weightAfter) - inverse(this.weightBefore);
  }
}

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
 * from that event on.
 */
export class LedgerWindow {
  readonly events: LedgerEvent[] = [];
  /** The window's own weight after each of its events (0 after the close). */
  readonly weights: number[] = [];
  weight: number;
  constructor(weight: number) {
    this.weight = weight;
  }
}

/** 1 / weight, 0 for an empty card. */
export function inverse(weight: number): number {
  return weight > 0 ? 1 / weight : 0;
}
