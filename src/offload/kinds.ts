/**
 * What a window's environment says of each event it appends to a card's process-wide event log
 * (binding.d.ts: ledgerAppend's owner, own and kind), so that the accounting worker
 * (./worker.ts) can follow the windows of that environment: the window's number (unique in the
 * environment), its own weight after the event, and the event's kind below.
 */

/** A window opens, its share taken from the card's split among overlapping windows. */
export const KIND_OPEN_SHARED = 0;
/** A window opens, measuring the whole card (attribution "exclusive"). */
export const KIND_OPEN_EXCLUSIVE = 1;
/** A stage ends. */
export const KIND_MARK = 2;
/** The window's weight changes. */
export const KIND_WEIGHT = 3;
/** The addon's own: a dropped reference closes what it left open (binding.d.ts eKind). */
export const KIND_COMPENSATION = 4;
/** The window closes. */
export const KIND_CLOSE = 5;

/** How another environment opens the same track: the card and how its sampler reads it. */
export interface TrackSpec {
  readonly index: number;
  readonly counter: boolean;
  readonly instantPower: boolean;
}
