/**
 * A window's part on one card: what is per card and nothing else — the card's track and ledger,
 * the window's entry and events on that ledger, its stage marks there, its contention witness, and
 * what it measured. A Meter (./meter.ts) holds one per card of its node (one for a one-card node,
 * the case N = 1 of a window over several cards) and drives them together: one set of options,
 * marks, weights and promises for the window.
 */
import type { CardLedger, LedgerEvent, LedgerWindow } from "../ledger/ledger.js";
import type { Concurrency, Energy } from "../rules/energy.js";
import type { ResolvedNode } from "../rules/node.js";
import { cardOf, type Selection } from "../select/index.js";
import { partitionOfNode, sliceShare } from "../select/mig.js";
import type { Track } from "../track/track.js";
import type { BackendName } from "../vocabulary/measurement.js";
import { abandoned, Leftovers } from "./abandoned.js";
import { type CloseCountdown, CloseWait } from "./close.js";
import { type EdgeTimes, WindowEvents } from "./events.js";
import { measureClosed, type Outcome, type StageMark, withMark } from "./measure.js";
import {
  failedOpening,
  type OpenedWindow,
  type Opening,
  openOnLedger,
  openTrackLater,
  openTrackNow,
} from "./open-track.js";
import type { ResolvedMeterOptions } from "./options.js";
import { chargeOutcome } from "./record.js";
import { type Witness, witnessFor } from "./witness.js";

export class CardWindow {
  private selection: Selection | null = null;
  private track: Track | null = null;
  private ledger: CardLedger | null = null;
  private entries: LedgerWindow | null = null;
  /** What this part releases if its window is collected unclosed (./abandoned.ts). */
  private leftovers: Leftovers | null = null;
  /** Its view of the card's other tenants, where the node names a serving process or a MIG slice. */
  private witness: Witness | null = null;
  /** Its own events' instants and weights (on the ledger while open, kept once measured). */
  readonly events = new WindowEvents();
  /** Its stage marks: the index of each mark's event on its card. */
  marks: StageMark[] = [];
  private notReady: string | null = null;
  private syncFailure: string | null = null;
  /** What close measured, its stages in the order of its marks; null before. */
  private outcome: Outcome | null = null;
  /** Opened on its card's ledger, and not yet closing. */
  isOpen = false;
  /** What its weights are multiplied by on the card: a MIG slice's share of it, else 1. */
  private share = 1;

  constructor(
    /** The card's node (the window's own for a one-card node). */
    readonly node: ResolvedNode,
    /** The window's options (its weight as opened), and GIUL_BACKEND's forced backend. */
    private readonly o: ResolvedMeterOptions,
    private readonly forced: BackendName | null,
  ) {}

  /** The backend metering this card (known once it has opened). */
  get backend(): BackendName | null {
    return this.selection?.backend ?? null;
  }

  /** Opens it: null where it opened at once (no promise), else the wait. Throws a configuration error. */
  open(): Promise<void> | null {
    let opened: Opening | null;
    try {
      opened = openTrackNow(this.node, this.forced, this.o.periodMs);
    } catch (error) {
      opened = failedOpening(error);
    }
    if (opened === null) return this.openLater();
    this.opened(opened);
    return null;
  }

  /** open() where the card is still to be probed or its sampler to start. */
  private async openLater(): Promise<void> {
    let opened: Opening;
    try {
      opened = await openTrackLater(this.node, this.forced, this.o.periodMs);
    } catch (error) {
      opened = failedOpening(error);
    }
    this.opened(opened);
  }

  /** The rest of open(), its track in hand: the opening edge (a configuration error throws). */
  private opened(opening: Opening): void {
    // A window on a MIG slice weighs its slice's share of the card (../select/mig.ts).
    this.share = sliceShare(partitionOfNode(this.node));
    const opened: OpenedWindow = openOnLedger(this.node, opening, this.o.weight * this.share);
    this.selection = opening.selection;
    this.notReady = opening.notReady;
    const { track, ledger, entries } = opened;
    this.track = track;
    this.ledger = ledger;
    this.entries = entries;
    this.events.opened(entries);
    this.witness = witnessFor(this.node, this.selection, this.events.ns(0), this.o.watchContention, ledger);
    this.leftovers = new Leftovers(track, this.witness?.held() ?? null, ledger, entries);
    abandoned.add(this, this.leftovers);
    this.isOpen = true;
  }

  /** A stage ends here (its arguments checked by the window). */
  mark(name: string, tokens: number | null): void {
    const ledger = this.ledger as CardLedger;
    const entries = this.entries as LedgerWindow;
    const start = entries.events[this.stageStart()] as LedgerEvent;
    ledger.mark(entries);
    this.marks = withMark(this.marks, {
      name,
      index: entries.events.length - 1,
      tokens,
      // Only now is it exact (the newest event); the mean comes from the events at the close.
      maxConcurrency: ledger.maxCountSince(start) | 0,
    });
  }

  setWeight(weight: number): void {
    (this.ledger as CardLedger).setWeight(this.entries as LedgerWindow, weight * this.share);
  }

  private stageStart(): number {
    return this.marks.length === 0 ? 0 : (this.marks[this.marks.length - 1] as StageMark).index;
  }

  /** Nothing of it can be measured: the window's sync hook failed, and why. */
  failWith(reason: string): void {
    this.syncFailure = reason;
  }

  /**
   * Its closing edge, taken now; `countdown` is told once it is measured (its edges settled).
   * Throws only for a failure of giul's own (the countdown is then told by the caller).
   */
  close(countdown: CloseCountdown): void {
    this.isOpen = false;
    if (this.leftovers !== null) {
      abandoned.remove(this.leftovers);
      this.leftovers = null;
    }
    const ledger = this.ledger as CardLedger;
    const entries = this.entries as LedgerWindow;
    const openEvent = entries.events[0] as LedgerEvent;
    const closeEvent = ledger.closeWindow(entries);
    const concurrency = ledger.concurrency(openEvent, closeEvent);
    const contention = this.witness?.check(openEvent.edge.tNs, closeEvent.edge.tNs) ?? null;
    // One waiter per card, resolved from the ledger's call, not a chain of promises and closures
    // kept alive by a crowd of closing windows.
    const wait = new CloseWait(this, closeEvent, concurrency, contention, countdown);
    try {
      ledger.settleThen(wait);
    } catch (error) {
      wait.accounted({ error });
    }
  }

  /** The outcome once its edges have settled (`thrown`: that failed); its CloseWait calls it. */
  measured(closeEvent: LedgerEvent, concurrency: Concurrency, thrown: { error: unknown } | null): void {
    const track = this.track as Track;
    const entries = this.entries as LedgerWindow;
    try {
      const idleW = Number.isNaN(entries.idleW) ? this.node.idleW : entries.idleW;
      const failure = this.syncFailure ?? this.witness?.gone ?? this.notReady;
      const sources = {
        track,
        ledger: this.ledger as CardLedger,
        entries,
        idleW,
        attribution: this.o.attribution,
        failure,
      };
      this.outcome = measureClosed(sources, this.marks, closeEvent, concurrency, thrown);
    } finally {
      track.release();
      this.events.measured();
      this.entries = null;
    }
  }

  /** Whether close measured it. */
  get measuredYet(): boolean {
    return this.outcome !== null;
  }

  /** The rules applied to what close measured (`part`: one card of several, never estimated alone). */
  charged(tokens: number | null, hint: number | null, part: boolean): Energy {
    const facts = {
      backend: this.selection?.backend ?? "none",
      idleW: this.node.idleW,
      joulesPer1kHint: hint,
      contendedBy: this.witness?.contendedBy ?? null,
      contentionUnchecked: this.witness?.unchecked ?? null,
      shared: this.witness !== null,
      attribution: this.o.attribution,
      part,
      partition: this.witness?.partition ?? null,
    };
    return chargeOutcome(this.outcome as Outcome, facts, tokens);
  }

  /** The card it is on: index, and UUID where known. */
  card(): { readonly index: number | null; readonly uuid: string | null } {
    return cardOf(this.selection, this.node);
  }

  /** Its edges (`closed`: its closing event is appended). */
  edgeTimes(closed: boolean): EdgeTimes {
    return this.events.edgeTimes(this.marks, closed);
  }

  /** CLOCK_MONOTONIC ns of its opening (or, `last`, its newest) edge. */
  edgeNs(last: boolean): bigint {
    return this.events.ns(last ? this.events.count() - 1 : 0);
  }
}
