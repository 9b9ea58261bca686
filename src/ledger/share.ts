/**
 * A window's share of its card between two of its own ledger events (./ledger.ts), with its
 * bound: its weight times the accumulators' advance, and its own coefficient's jumps at its
 * events times their edges' errors.
 *
 * The bound is apportioned like the energy, with accumulators of the same kind. The card's
 * cumulative energy at each event is off by that edge's error ε: a window's share is off by
 * Σ Δc × ε over the events of its life, where c = w / W is its coefficient and Δc its change at the
 * event — for another window's event w × Δ(1/W), for its own the jump of its own coefficient. So
 * each event adds |Δ(1/W)| × (its two-sided error) to one accumulator and, because a counter's value
 * can only lag, Δ(1/W) × (its lag) to one of two one-sided accumulators by the sign of Δ(1/W): a
 * window's lag error lies between minus the positive sum and the negative sum, so its bar takes
 * the larger of the two, not both. Errors of an interval itself (a trapezoid between samples,
 * averaging) are divided by W like the energy. An interval that could not be measured (a fault, a
 * restart, an edge with no sample) is counted: a window whose life includes one has no share, with
 * the reason.
 *
 */
import { inverse, type LedgerEvent, type LedgerWindow, type ShareResult } from "./event.js";

/**
 * What a window was charged between two of its own events (indices into `w.events`): the whole
 * window (open to close) or one stage (mark to mark), with its bound. Both events accounted.
 */
export function windowShare(w: LedgerWindow, fromIndex: number, toIndex: number): ShareResult {
  const from = w.events[fromIndex] as LedgerEvent;
  const to = w.events[toIndex] as LedgerEvent;
  if (!to.resolved || !from.resolved) return { ok: false, reason: "the window's edges were not settled" };
  if (to.broken !== from.broken) {
    return { ok: false, reason: to.brokenReason ?? "part of the window could not be measured" };
  }
  let above = 0;
  let spread = 0;
  let twoSided = 0;
  let up = 0;
  let down = 0;
  let before = 0; // the window's coefficient w / W just before the event
  for (let i = fromIndex; i <= toIndex; i++) {
    const e = w.events[i] as LedgerEvent;
    if (e.edgeFailure !== null) return { ok: false, reason: e.edgeFailure };
    const weight = e.own;
    // Its own event: the jump of its coefficient (from 0 at the span's start, to 0 at its end).
    const after = i === toIndex ? 0 : weight * inverse(e.weightAfter);
    const jump = after - before;
    twoSided += Math.abs(jump) * e.err;
    if (jump > 0) up += jump * e.lag;
    else down -= jump * e.lag;
    if (i === toIndex) break;
    // Then the intervals and other windows' events up to its next event, at its weight.
    const next = w.events[i + 1] as LedgerEvent;
    above += weight * (next.v - e.v);
    spread += weight * (next.u - e.u);
    // Up to its next event, that event's own term excluded: that is its own jump, next round.
    const d = next.invChange();
    twoSided += weight * (next.e2 - Math.abs(d) * next.err - e.e2);
    up += weight * (next.lagUp - (d > 0 ? d * next.lag : 0) - e.lagUp);
    down += weight * (next.lagDown - (d < 0 ? -d * next.lag : 0) - e.lagDown);
    before = weight * inverse(next.weightBefore);
  }
  return { ok: true, aboveJoules: above, uncertaintyJoules: spread + twoSided + Math.max(up, down) };
}
