/**
 * The per-card ledger: every window open on a card, in any process, with its weight, and the one
 * place where the card's energy is split among overlapping windows.
 *
 * It is the virtual time of weighted fair queueing. Every change of the set of windows or of their
 * weights (an open, a close, a setWeight) and every stage mark is an *event*, taken as an edge of
 * the card's track. Between two consecutive events the total weight W is constant, so the card's
 * energy above idle over that interval — measured once for the card, idle subtracted once — is
 * split in proportion to weight: it advances the accumulator
 *
 *     V += (E(t₂) − E(t₁) − idleW × (t₂ − t₁)) / W
 *
 * and a window of weight w is charged w × (V at its end − V at its start), piecewise where its
 * weight changed. Every event is O(1) (O(log n) for the concurrency maximum), whatever the number of
 * windows open; the shares of the windows add up to the card's energy above idle over their union.
 * The bound is apportioned like the energy (see ./share.ts).
 *
 * The events are those of the card's event log (./card-log.ts): every window on the card appends
 * its events to it, whatever process, environment or copy of giul opened it, and the ledger of
 * each environment reads every event from it, its own and the others', each an edge of its own
 * track at the logged instant. So the card's energy above idle, idle subtracted once with the one
 * floor the log keeps, is split among all its windows host-wide. A track that cannot take an edge
 * at a logged instant (a remote agent's) keeps a log of this environment's windows alone.
 */

import { aboveIdle, type Concurrency } from "../rules/energy.js";
import { type Edge, type EventLog, type EventLogEntry, emptyLogEntry, type Track } from "../track/track.js";
import { cardLogFor, KIND, MemoryEventLog, replaceCardLog } from "./card-log.js";
import { LedgerEvent, LedgerWindow, type ShareResult } from "./event.js";
import { idleConflict, idleElsewhere, lostReason } from "./notes.js";
import { SettleFrontier } from "./settle.js";
import { windowShare } from "./share.js";

export { LedgerEvent, LedgerWindow, type ShareResult } from "./event.js";
export { idleConflict } from "./notes.js";

const MAX_PENDING_BEFORE_COMPACT = 4096;
/** How often an environment with windows open reads the log and looks for dead processes (ms). */
const CATCH_UP_MS = 100;

/** What waits for a close to be accounted (CardLedger.settleThen): its event, what to call then. */
export interface Accounted {
  readonly event: LedgerEvent;
  /** With what accounting threw, if it did (a fault of giul's own). */
  accounted(thrown: { error: unknown } | null): void;
}

/** The ledger of one card (one track) in this environment. */
export class CardLedger {
  readonly track: Track;
  /** The card's key in the registry of logs (its UUID), or null for a log of this ledger's own. */
  private readonly key: string | null;
  /** The idle floor of this environment's windows open on the card, while any is. */
  private idleW: number | null = null;
  private weight = 0;
  private count = 0;
  private seq = 0;
  private lastNs = 0n;
  private countNs = 0;
  /** The newest event that has been accounted (its interval measured). */
  private resolvedTail: LedgerEvent | null = null;
  /** Events not yet accounted, oldest first, from index `head`. */
  private pending: LedgerEvent[] = [];
  private head = 0;
  /**
   * Monotonic stack for the concurrency maximum: (seq, countAfter) with counts strictly decreasing
   * from bottom to top, so the maximum over events [a, newest] is the first entry with seq ≥ a.
   */
  private stackSeq: number[] = [];
  /** The newest event whose edge has been handed to track.settle(). */
  private requestedSeq = -1;
  /** How far the track has settled the events' edges (./settle.ts). */
  private readonly frontier = new SettleFrontier<Accounted>((waiter) => this.accountThen(waiter));
  /** The log read (the card's), the one last followed, the next entry to read, this environment's open windows. */
  private log: EventLog;
  private followed: EventLog | null = null;
  private cursor = 0;
  private lost = false;
  private skipNext = false;
  private localOpen = 0;
  /** The sequence number this environment is appending (its edge is its own), −1 between appends. */
  private appendingSeq = -1;
  private catchUp: NodeJS.Timeout | null = null;
  private readonly entry: EventLogEntry = emptyLogEntry();
  private stackCount: number[] = [];

  /**
   * `key`: the card's (Selection.cardKey); null, or a track that cannot take an edge at a logged
   * instant: a log of this ledger's windows alone. `noKey`: why the key is no UUID (then the log
   * is this environment's, shared by its copies of giul, not host-wide).
   */
  constructor(track: Track, key: string | null, noKey: string | null = null, log: EventLog | null = null) {
    this.track = track;
    this.key = track.loggedEdge === undefined ? null : key;
    this.log =
      log ?? (this.key === null ? new MemoryEventLog("environment", noKey) : cardLogFor(this.key, noKey));
  }

  /** Why windows on this card do not share it host-wide, or null where they do. */
  get sharingCaveat(): string | null {
    const log = this.log;
    if (log.reason === null) return null;
    const whom = log.scope === "process" ? "this process" : "this JavaScript environment";
    return `the card is split only among the windows of ${whom}: ${log.reason}`;
  }

  /**
   * The card's energy above idle over every interval that had a window open, since this ledger
   * began, as far as accounted (J): what the shares of all windows add up to.
   */
  get cardAboveJoules(): number {
    return this.resolvedTail?.card ?? 0;
  }

  /** The pids of the processes with windows on the card's log (this one, where the log is its own). */
  readonly giulPids = (): readonly number[] => this.log.pids?.() ?? [process.pid];

  /** Windows open on the card now. */
  get open(): number {
    return this.count;
  }

  /**
   * A window opens with `weight`: the opening edge is taken now. Throws GiulError naming idleW when
   * a window of this environment with a different idle floor is open on the same card; a window
   * elsewhere (another process, environment or copy of giul) with another floor keeps the card's,
   * with a warning, and the window says which floor it was charged (LedgerWindow.idleW).
   */
  openWindow(weight: number, idleW: number): LedgerWindow {
    if (this.localOpen > 0 && this.idleW !== null && this.idleW !== idleW)
      throw idleConflict(idleW, this.idleW);
    this.log.reap?.();
    const w = new LedgerWindow(weight);
    const event = this.append(w, weight, 1, weight, idleW, KIND.OPEN);
    w.idleW = Number.isNaN(event.idle) ? idleW : event.idle;
    if (w.idleW !== idleW) w.caveat = idleElsewhere(this.key, idleW, w.idleW);
    const caveat = this.sharingCaveat;
    if (caveat !== null) w.caveat = w.caveat === null ? caveat : `${w.caveat}; ${caveat}`;
    this.idleW = idleW;
    this.localOpen += 1;
    this.keepUp();
    return w;
  }

  /** A stage ends (no change of weight): its edge is taken now. */
  mark(w: LedgerWindow): LedgerEvent {
    return this.append(w, 0, 0, w.weight, Number.NaN, KIND.MARK);
  }

  /** The window's weight changes from now on. */
  setWeight(w: LedgerWindow, weight: number): LedgerEvent {
    const delta = weight - w.weight;
    w.weight = weight;
    return this.append(w, delta, 0, weight, Number.NaN, KIND.WEIGHT);
  }

  /** The window closes: its closing edge is taken now. */
  closeWindow(w: LedgerWindow): LedgerEvent {
    const delta = -w.weight;
    w.weight = 0;
    this.localOpen = Math.max(0, this.localOpen - 1);
    const event = this.append(w, delta, -1, 0, Number.NaN, KIND.CLOSE);
    this.keepUp();
    return event;
  }

  /** Most windows open at once between `from` and the newest event (itself included). */
  maxCountSince(from: LedgerEvent): number {
    const seqs = this.stackSeq;
    let lo = 0;
    let hi = seqs.length - 1;
    if (hi < 0) return 0;
    // The first entry with seq ≥ from.seq.
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((seqs[mid] as number) >= from.seq) hi = mid;
      else lo = mid + 1;
    }
    return (seqs[lo] as number) >= from.seq ? (this.stackCount[lo] as number) : 0;
  }

  /** Time-weighted mean of windows open between two events. */
  static meanCount(from: LedgerEvent, to: LedgerEvent): number {
    const dt = Number(to.edge.tNs - from.edge.tNs);
    return dt > 0 ? (to.countNs - from.countNs) / dt : from.countAfter;
  }

  /**
   * Resolves once every event up to `event` has been accounted (or could not be: then the
   * intervals are counted broken). Never rejects.
   */
  settleThrough(event: LedgerEvent): Promise<void> {
    return new Promise((done, reject) => {
      this.settleThen({
        event,
        accounted: (thrown) => (thrown === null ? done() : reject(thrown.error)),
      });
    });
  }

  /**
   * Tells `waiter` once every event up to its event has been accounted (or could not be: then the
   * intervals are counted broken): at once when nothing is left to wait for, else from the
   * settling of the edges; with what accounting threw, if it did (a fault of giul's own). What the
   * Meter's close uses: no promise, nor closure, of its own per window.
   */
  settleThen(waiter: Accounted): void {
    const event = waiter.event;
    if (event.resolved) {
      waiter.accounted(null);
      return;
    }
    // Hand the track only the edges no earlier call has handed it (events are appended with
    // consecutive seq numbers), so that a burst of closes costs O(1) each, not a walk of every
    // pending event; then wait for those earlier calls' edges too.
    const first = this.pending[this.head];
    if (first !== undefined && event.seq > this.requestedSeq) {
      const from = this.head + Math.max(0, this.requestedSeq + 1 - first.seq);
      const to = this.head + (event.seq - first.seq);
      // Sized at once (grown by push, an array of one or two edges would take room for 17).
      const edges: Edge[] = new Array(to - from + 1);
      for (let i = from; i <= to; i++) edges[i - from] = (this.pending[i] as LedgerEvent).edge;
      this.requestedSeq = event.seq;
      // settle() never rejects; whatever it could not settle is measured as broken below. A track
      // with a callback form spares this close a promise and its reactions.
      const track = this.track;
      if (track.settleThen) track.settleThen(edges, this.frontier.begin(event.seq));
      else this.frontier.add(event.seq, track.settle(edges));
    }
    if (first === undefined || this.frontier.reached(event.seq)) this.accountThen(waiter);
    else this.frontier.whenReached(waiter);
  }

  /** Accounts through the waiter's event, then tells it (with what accounting threw, if it did). */
  private accountThen(waiter: Accounted): void {
    let thrown: { error: unknown } | null = null;
    try {
      this.account(waiter.event);
    } catch (error) {
      thrown = { error };
    }
    waiter.accounted(thrown);
  }

  /**
   * What a window was charged between two of its own events (indices into `w.events`): the whole
   * window (open to close) or one stage (mark to mark), with its bound. Both events accounted.
   */
  share(w: LedgerWindow, fromIndex: number, toIndex: number): ShareResult {
    return windowShare(w, fromIndex, toIndex);
  }

  /** The card's energy above idle over the intervals with a window open, between two events. */
  static cardBetween(from: LedgerEvent, to: LedgerEvent): number {
    return to.card - from.card;
  }

  /**
   * Windows open on the card between two events (itself included): the time-weighted mean, and the
   * most at once. Exact when `to` is the newest event, so call it right after appending `to`.
   */
  concurrency(from: LedgerEvent, to: LedgerEvent): Concurrency {
    return { mean: CardLedger.meanCount(from, to), max: this.maxCountSince(from) };
  }

  /** Appends the window's event to the card's log and reads the log through it. */
  private append(
    w: LedgerWindow,
    deltaWeight: number,
    deltaCount: number,
    ownAfter: number,
    idleW: number,
    kind: number,
  ): LedgerEvent {
    this.follow(deltaCount > 0);
    const log = this.log;
    const seq = log.append(deltaWeight, deltaCount, idleW, kind);
    this.appendingSeq = seq;
    let event = seq >= 0 ? this.ingest(seq) : null;
    this.appendingSeq = -1;
    if (event === null) {
      // Not appended, or our own entry overwritten before we read it (the log wrapped within this
      // call): an event that can only be broken, at the instant of the call.
      event = this.push(
        this.edgeAt(process.hrtime.bigint(), true),
        Number.NaN,
        this.weight,
        this.count,
        Number.NaN,
      );
      event.lostBefore = true;
      event.lostReason = lostReason(seq, log);
      if (seq === -4 && this.key !== null) this.log = replaceCardLog(this.key, event.lostReason);
    }
    event.own = ownAfter;
    w.add(event);
    return event;
  }

  /** An edge of the track at a logged instant (one of its own, where the track cannot take those). */
  private edgeAt(tNs: bigint, own: boolean): Edge {
    const track = this.track;
    return track.loggedEdge === undefined ? track.edge() : track.loggedEdge(tNs, own);
  }

  /** Appends an event to the pending list, the concurrency integral and the maximum's stack. */
  private push(
    edge: Edge,
    weightBefore: number,
    weightAfter: number,
    countAfter: number,
    idle: number,
  ): LedgerEvent {
    const t = edge.tNs;
    if (this.seq > 0 && t > this.lastNs) this.countNs += this.count * Number(t - this.lastNs);
    if (t > this.lastNs) this.lastNs = t;
    this.weight = weightAfter;
    this.count = countAfter;
    const event = new LedgerEvent(
      edge,
      this.seq++,
      weightBefore,
      weightAfter,
      countAfter,
      this.countNs,
      idle,
    );
    this.pending.push(event);
    const seqs = this.stackSeq;
    const counts = this.stackCount;
    while (counts.length > 0 && (counts[counts.length - 1] as number) <= countAfter) {
      counts.pop();
      seqs.pop();
    }
    seqs.push(event.seq);
    counts.push(countAfter);
    return event;
  }

  /**
   * Starts reading the log where it stands when this environment has nothing open (older events
   * cannot concern its windows), or when the log is another one.
   */
  private follow(opening: boolean): void {
    const log = this.log;
    if (log === this.followed && !(opening && this.localOpen === 0)) return;
    const published = log.published();
    if (log === this.followed && published === this.cursor) return;
    // Windows of ours that closed may still be settling: their events stay pending and are
    // accounted as usual; only the gap up to the next event read is left unmeasured.
    this.followed = log;
    this.cursor = published;
    this.lost = false;
    this.skipNext = true;
  }

  /** Reads the log's entries up to `through` into pending events; the event of `through`, if read. */
  private ingest(through: number): LedgerEvent | null {
    const log = this.log;
    const entry = this.entry;
    let found: LedgerEvent | null = null;
    while (this.cursor <= through) {
      const k = this.cursor++;
      if (!log.read(k, entry)) {
        this.lost = true;
        continue;
      }
      const tNs = log.epochNs + BigInt(Math.round(entry.t));
      const event = this.push(
        this.edgeAt(tNs, k === this.appendingSeq),
        entry.weightBefore,
        entry.weightAfter,
        entry.countAfter,
        entry.idleAfter,
      );
      if (this.skipNext) {
        event.skippedBefore = true;
        this.skipNext = false;
      }
      if (this.lost) {
        event.lostBefore = true;
        event.lostReason =
          "events of other windows on the card were lost (its event log wrapped before this environment read it, or held an entry no giul wrote)";
        this.lost = false;
      }
      if (k === through) found = event;
    }
    return found;
  }

  /**
   * While windows of this environment are open, read the log now and then even when this
   * environment is idle, so that it never falls a whole log behind; and close the windows of
   * processes that died (the log's reap), so that a killed process stops taking a share.
   */
  private keepUp(): void {
    if (this.localOpen === 0) {
      if (this.catchUp !== null) clearInterval(this.catchUp);
      this.catchUp = null;
      return;
    }
    if (this.catchUp !== null) return;
    this.catchUp = setInterval(() => {
      const log = this.log;
      if (log !== this.followed) return;
      log.reap?.();
      // Read only: accounting waits for samples, and a wait must not hold a finished process open
      // (events are accounted at this environment's next close).
      this.ingest(log.published() - 1);
    }, CATCH_UP_MS);
    this.catchUp.unref();
  }

  /** Accounts the intervals of every pending event up to `last`, in order. */
  private account(last: LedgerEvent): void {
    while (this.head < this.pending.length) {
      const e = this.pending[this.head] as LedgerEvent;
      // Another window's close may have accounted past `last` while this one awaited its edges.
      if (e.seq > last.seq) break;
      this.head += 1;
      this.accountOne(e, this.resolvedTail);
      this.resolvedTail = e;
      if (e === last) break;
    }
    if (this.head >= MAX_PENDING_BEFORE_COMPACT && this.head * 2 >= this.pending.length) {
      this.pending = this.pending.slice(this.head);
      this.head = 0;
    }
  }

  private accountOne(e: LedgerEvent, prev: LedgerEvent | null): void {
    if (prev !== null) {
      e.v = prev.v;
      e.u = prev.u;
      e.e2 = prev.e2;
      e.lagUp = prev.lagUp;
      e.lagDown = prev.lagDown;
      e.card = prev.card;
      e.broken = prev.broken;
      e.brokenReason = prev.brokenReason;
      const weight = prev.weightAfter;
      if (e.skippedBefore) {
        // Nothing of this environment's spans the gap: neither measured nor broken.
      } else if (e.lostBefore) {
        e.broken += 1;
        e.brokenReason = e.lostReason;
      } else if (weight > 0 && !(prev.idle >= 0)) {
        e.broken += 1;
        e.brokenReason = "the card's event log gave no idle floor for windows open on it";
      } else if (weight > 0) {
        // The interval since the previous event: measured once for the card, idle subtracted once.
        const m = this.track.interval(prev.edge, e.edge);
        if (m.ok) {
          const seconds = Number(e.edge.tNs - prev.edge.tNs) / 1e9;
          const above = aboveIdle(m.grossJoules, prev.idle, seconds);
          e.v += above / weight;
          e.u += m.spreadJoules / weight;
          e.card += above;
        } else {
          e.broken += 1;
          e.brokenReason = m.reason;
        }
      }
    }
    const error = this.track.edgeError(e.edge);
    if (error.ok) {
      e.err = error.errJoules;
      e.lag = error.lagJoules;
      const d = e.invChange();
      e.e2 += Math.abs(d) * e.err;
      if (d > 0) e.lagUp += d * e.lag;
      else e.lagDown -= d * e.lag;
    } else {
      e.edgeFailure = error.reason;
      if (e.weightBefore > 0 && e.weightAfter > 0) {
        // Other windows open across this event cannot bound their shares either.
        e.broken += 1;
        e.brokenReason = error.reason;
      }
    }
    e.resolved = true;
  }
}

const ledgers = new WeakMap<Track, CardLedger>();

/**
 * The ledger of a card: one per track (the selection shares one track per card). `key`: the
 * card's UUID, by which its windows share it with every other process and copy of giul; null where
 * none is known (then only with this environment's).
 */
export function ledgerFor(track: Track, key: string | null = null, noKey: string | null = null): CardLedger {
  let ledger = ledgers.get(track);
  if (ledger === undefined) {
    ledger = new CardLedger(track, key, noKey);
    ledgers.set(track, ledger);
  }
  return ledger;
}
