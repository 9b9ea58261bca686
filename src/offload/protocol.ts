/**
 * The messages between an environment that meters windows and its accounting worker
 * (./client.ts, ./worker.ts). Everything else they share is the card's process-wide event log,
 * in which each of the environment's windows says whose its events are (./kinds.ts).
 */
import type { Outcome } from "../meter-measure.js";
import type { TrackSpec } from "./kinds.js";

/** The environment's windows on a card are to be followed from entry `from` of its event log. */
export interface CardMessage {
  readonly type: "card";
  /** The environment's number for the card (its tracks are numbered as they are offloaded). */
  readonly card: number;
  readonly spec: TrackSpec;
  readonly periodMs: number;
  /** The environment's reference id on the card's log: the eRef of its windows' events. */
  readonly ref: number;
  /** The log's next sequence number before the environment's first append through this track. */
  readonly from: number;
  /**
   * The card this one replaces (the same card, followed through a reference of the environment's
   * that has since been released), or null: the worker stops following it once its windows are
   * measured.
   */
  readonly replaces: number | null;
}

/** Windows closed since the last look: read the logs (the shared flag was cleared first). */
export interface PokeMessage {
  readonly type: "poke";
}

export type ToWorker = CardMessage | PokeMessage;

/**
 * What one closed window measured (Outcome, its stages in the order of their marks: the names and
 * token counts are the environment's), by its number.
 */
export type OutcomeItem = readonly [owner: number, outcome: Outcome];

/**
 * A batch of outcomes as numbers (a structured clone of the objects cost the receiving event loop
 * more than the window itself: ./codec.ts), with the strings they name.
 */
export interface OutcomesMessage {
  readonly type: "outcomes";
  readonly numbers: Float64Array;
  readonly strings: readonly string[];
}

/** The worker cannot account anything (the addon or NVML would not load in it). */
export interface FailedMessage {
  readonly type: "failed";
  readonly reason: string;
}

/** The worker has the addon and NVML, and follows cards from now on. */
export interface ReadyMessage {
  readonly type: "ready";
}

export type FromWorker = OutcomesMessage | FailedMessage | ReadyMessage;

/**
 * Index in the shared Int32Array: 1 while the worker will read the logs again without a poke (a
 * poke is posted and not yet taken, or windows are being measured); 0 when a close must poke it.
 */
export const POKE_FLAG = 0;
