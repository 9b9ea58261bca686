/**
 * A window's opening, bounded by the node's `timeoutMs`: the card's backend (./select/), its track
 * retained, and the track's first sample, all within it. Past it the window opens without a
 * measurement and says why; the probe goes on in the background (./select/ caches it), and later
 * windows use it once it answers. So no request waits on a sick card, a stuck driver or a tool that
 * hangs for longer than the node allows.
 */

import { type CardLedger, type LedgerWindow, ledgerFor } from "../ledger/ledger.js";
import type { ResolvedNode } from "../rules/node.js";
import { type Selection, select, selectNow } from "../select/index.js";
import { NullTrack, type Track } from "../track/track.js";
import { debug } from "../vocabulary/debug.js";
import { GiulError } from "../vocabulary/errors.js";
import type { BackendName } from "../vocabulary/measurement.js";
import { checkIdleAgainstCard } from "./options.js";

export interface OpenedTrack {
  readonly selection: Selection;
  /** The card's track, retained for the window: release it when the window ends. */
  readonly track: Track;
  /** Why the window cannot be measured, or null. */
  readonly notReady: string | null;
}

/** A window's track as open() got it, or no backend (selection null) where getting it failed. */
export type Opening = Omit<OpenedTrack, "selection"> & { readonly selection: Selection | null };

/** openTrack() never throws; this is belt and braces for the caller's sake: no backend, and why. */
export function failedOpening(error: unknown): Opening {
  const reason = `opening the window failed: ${String(error)}`;
  debug("open failed: %s", String(error));
  return { selection: null, track: new NullTrack(reason), notReady: reason };
}

/**
 * What refuses a window's opening, its track in hand: GIUL_BACKEND names a backend the card does
 * not have, or idleW is above the card's power limit. A GiulError naming the field, or null.
 */
export function configurationError(node: ResolvedNode, selection: Selection | null): GiulError | null {
  const forcedUnavailable = selection?.forcedUnavailable;
  if (forcedUnavailable !== undefined)
    return new GiulError("BACKEND_UNAVAILABLE", forcedUnavailable, { field: "GIUL_BACKEND" });
  const notASlice = selection?.notASlice;
  if (notASlice !== undefined) return new GiulError("INVALID_NODE", notASlice, { field: "gpuUuid" });
  const ambiguous = selection?.ambiguousIndex;
  if (ambiguous !== undefined) return new GiulError("INVALID_NODE", ambiguous, { field: "gpuIndex" });
  return checkIdleAgainstCard(node, selection);
}

/** A window opened on its card's ledger: its track (retained), the ledger, its entries on it. */
export interface OpenedWindow {
  readonly track: Track;
  readonly ledger: CardLedger;
  readonly entries: LedgerWindow;
}

/**
 * The opening edge on the card's ledger, the track in hand. Throws a GiulError for a configuration
 * error (GIUL_BACKEND, an idleW above the card's limit or another window's), the track released.
 */
export function openOnLedger(node: ResolvedNode, opening: Opening, weight: number): OpenedWindow {
  const { selection, track } = opening;
  try {
    // A configuration error is said, never fallen back from.
    const refused = configurationError(node, selection);
    if (refused !== null) throw refused;
    const ledger = ledgerFor(track, selection?.cardKey ?? null, selection?.noKeyReason ?? null);
    return { track, ledger, entries: ledger.openWindow(weight, node.idleW) };
  } catch (error) {
    track.release();
    throw error;
  }
}

const TIMED_OUT: unique symbol = Symbol("timed out");
/** How much sooner than the node's budget the track's own wait for a first sample ends (ms). */
const READY_MARGIN_MS = 30;

/** The track of a node that cannot be metered: one per selection, so its windows share a ledger. */
const nullTracks = new WeakMap<Selection, NullTrack>();

function trackOf(selection: Selection): Track {
  if (selection.track !== null) return selection.track;
  let track = nullTracks.get(selection);
  if (track === undefined) {
    track = new NullTrack(selection.reason ?? "no backend");
    nullTracks.set(selection, track);
  }
  return track;
}

/**
 * Chooses the node's backend and retains its track with `periodMs`, waiting for the track's first
 * sample: resolves within `node.timeoutMs` whatever the card does. Never rejects.
 */
export async function openTrack(
  node: ResolvedNode,
  forced: BackendName | null,
  periodMs: number,
): Promise<OpenedTrack> {
  return openTrackNow(node, forced, periodMs) ?? openTrackLater(node, forced, periodMs);
}

/**
 * openTrack() at once, where the card is already probed and its track sampling (no promise to
 * race, no timer, nothing awaited); null where it would have to wait.
 */
export function openTrackNow(
  node: ResolvedNode,
  forced: BackendName | null,
  periodMs: number,
): OpenedTrack | null {
  const known = selectNow(node, forced);
  if (known === null || known.forcedUnavailable !== undefined) return null;
  const track = trackOf(known);
  const now = track.readyNow?.() ?? null;
  if (now === null) return null;
  track.retain(periodMs);
  // Retaining may (re)start a sampler: then it has no sample yet, and openTrack's wait is right.
  const still = track.readyNow?.() ?? null;
  if (still !== null) return { selection: known, track, notReady: still.ok ? null : still.reason };
  track.release();
  return null;
}

/** openTrack() where openTrackNow() answered null: the probe and the first sample awaited. */
export async function openTrackLater(
  node: ResolvedNode,
  forced: BackendName | null,
  periodMs: number,
): Promise<OpenedTrack> {
  const started = performance.now();
  const budget = node.timeoutMs;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<typeof TIMED_OUT>((done) => {
    timer = setTimeout(() => done(TIMED_OUT), budget);
  });
  try {
    const selection = await Promise.race([select(node, forced), timedOut]);
    if (selection === TIMED_OUT) {
      const reason =
        `the card's probe did not answer within the node's timeoutMs (${budget} ms), so this window ` +
        "is not measured; the probe goes on, and later windows use it once it answers";
      const none: Selection = { backend: "none", track: null, reason };
      return { selection: none, track: trackOf(none), notReady: reason };
    }
    const track = trackOf(selection);
    track.retain(periodMs);
    if (selection.forcedUnavailable !== undefined) {
      return { selection, track, notReady: selection.forcedUnavailable };
    }
    // The track gives up a little before the budget, so that its own reason (a stalled sampler,
    // which it then remembers) is the one the window reports.
    const left = Math.max(0, budget - (performance.now() - started) - READY_MARGIN_MS);
    const ready = await Promise.race([track.ready(left), timedOut]);
    if (ready === TIMED_OUT) {
      const reason =
        `the ${selection.backend} backend was not ready within the node's timeoutMs (${budget} ms): ` +
        "no sample yet (its sampler stalled or starting), or no answer yet from its agent";
      return { selection, track, notReady: reason };
    }
    return { selection, track, notReady: ready.ok ? null : ready.reason };
  } finally {
    clearTimeout(timer);
  }
}
