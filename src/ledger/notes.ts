/** What the ledger (./ledger.ts) says of idle floors and lost events: its errors, caveats, warnings. */
import type { EventLog } from "../track/track.js";
import { GiulError } from "../vocabulary/errors.js";
import { REFUSED } from "./card-log.js";

/** Idle floors already warned of, per card: "given/the card's". */
const warnedIdle = new Set<string>();

/** An open refused: windows open on the card charge another idle floor (`other`). */
export function idleConflict(idleW: number, other: number): GiulError {
  return new GiulError(
    "INVALID_NODE",
    `idleW: ${idleW} W, but windows open on the same card charge its idle as ${other} W; ` +
      "windows sharing a card share its idle floor (give every Node naming this card the same idleW)",
    { field: "idleW" },
  );
}

/**
 * The card's floor was set by a window elsewhere (`cardIdleW`): the caveat of a window given
 * `idleW`, and a warning naming both, once per card and pair.
 */
export function idleElsewhere(key: string | null, idleW: number, cardIdleW: number): string {
  const pair = `${key ?? ""}:${idleW}/${cardIdleW}`;
  if (!warnedIdle.has(pair)) {
    warnedIdle.add(pair);
    process.emitWarning(
      `giul: idleW ${idleW} W given for a card whose open windows (in another process or copy of giul) ` +
        `charge its idle as ${cardIdleW} W; ${cardIdleW} W is used (give every Node naming this card the same idleW)`,
      { code: "GIUL_IDLE_MISMATCH" },
    );
  }
  return (
    `idleW ${idleW} W was given, but windows open on the card elsewhere charge its idle as ${cardIdleW} W: ` +
    "the card's idle is subtracted once, at that floor"
  );
}

/** Why an event could not be appended to the card's log (its append's negative code). */
export function lostReason(code: number, log: EventLog): string {
  if (code === REFUSED) return log.reason ?? "the card's event log refused the event";
  if (code === -3) return "the card's event log was held by another process for too long";
  if (code === -4) return "the card's shared event log holds values no giul wrote";
  if (code === -2) return "the card's event log was released";
  return "this window's own event was overwritten in the card's event log before it was read";
}
