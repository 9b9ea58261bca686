/**
 * The entries of the per-card ledger (./ledger.ts): the events at which the windows on a card or
 * their weights changed, with the accumulators each carries, and one window's own events.
 */
import type { Edge } from "./backends/track.js";
import type { Failure } from "./measurement.js";

/** One instant at which the windows on a card, or their weights, changed (or a stage ended). */
export class LedgerEvent {
  readonly edge: Edge;
  readonly seq: number;
  /** Total weight on the card just before and just after this event. */
  readonly weightBefore: number;
  readonly weightAfter: number;
  /** Windows open on the card just after this event. */
  readonly countAfter: number;
  /** ∫ windows open dt up to this event (windows × ns). */
  readonly countNs: number;
  /** Set once the interval ending here has been accounted. */
  resolved = false;
  /** Energy above idle per unit weight, cumulative (J). */
  v = 0;
  /** Errors of intervals themselves per unit weight, cumulative (J). */
  u = 0;
  /**
   * Σ |Δ(1/W)| × two-sided edge error, and Σ max(0, ±Δ(1/W)) × edge lag, cumulative (J), each
   * including this event's own term (see {@link LedgerEvent.invChange}).
   */
  e2 = 0;
  lagUp = 0;
  lagDown = 0;
  /** Events of the process-wide log were lost just before this one (the log wrapped). */
  lostBefore = false;
  /**
   * Events of the log were skipped just before this one on purpose: this environment had no window
   * open then, so nothing of its own spans the gap, which is not measured.
   */
  skippedBefore = false;
  /** This event's edge errors (J), or why they are not known. */
  err = 0;
  lag = 0;
  edgeFailure: string | null = null;
  /** Card energy above idle over the intervals with a window open, cumulative (J). */
  card = 0;
  /** Intervals that could not be measured, cumulative. */
  broken = 0;
  /** Why the latest of them could not be measured. */
  brokenReason: string | null = null;

  /** The change of 1 / (total weight) at this event: every other window's coefficient moves by w × it. */
  invChange(): number {
    return inverse(this.weightAfter) - inverse(this.weightBefore);
  }

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
    this.weightBefore = weightBefore;
    this.weightAfter = weightAfter;
    this.countAfter = countAfter;
    this.countNs = countNs;
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
