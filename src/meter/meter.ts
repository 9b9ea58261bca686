import {
  energyChannel,
  settleOwedEnergyWith,
  windowCloseChannel,
  windowOpenChannel,
} from "../diagnostics.js";
import type { CardLedger, LedgerEvent, LedgerWindow } from "../ledger/ledger.js";
import type { Concurrency, Energy } from "../rules/energy.js";
import { type Node, nodesOfCards, type ResolvedNode, resolveNodeOnce } from "../rules/node.js";
import { cardOf, forcedBackend, knownForcedFailure, type Selection } from "../select/index.js";
import type { Track } from "../track/track.js";
import { GiulError } from "../vocabulary/errors.js";
import type { BackendName } from "../vocabulary/measurement.js";
import { describeValue } from "../vocabulary/validate.js";
import { abandoned, Leftovers } from "./abandoned.js";
import { CardSet } from "./card-set.js";
import { CloseCountdown, CloseWait } from "./close.js";
import { type EdgeTimes, WindowEvents } from "./events.js";
import { hasStage, measureClosed, type Outcome, type StageMark, withMark } from "./measure.js";
import { WindowMessages } from "./messages.js";
import {
  failedOpening,
  type OpenedWindow,
  type Opening,
  openOnLedger,
  openTrackLater,
  openTrackNow,
} from "./open-track.js";
import {
  checkOptions,
  checkStageName,
  checkTokens,
  checkWeight,
  type MarkOptions,
  METER_OPTIONS,
  type MeasureOptions,
  type MeterOptions,
  optionError,
  type ResolvedMeterOptions,
  type ResultOptions,
  resolveMeterOptions,
  TOKEN_OPTIONS,
} from "./options.js";
import { chargeOutcome } from "./record.js";
import { measureRun } from "./run.js";
import { asyncDispose, runSyncHook } from "./sync.js";
import { type Witness, witnessFor } from "./witness.js";

export type { EdgeTimes } from "./events.js";
export type { MarkOptions, MeasureOptions, MeterOptions, ResultOptions } from "./options.js";

type State = "new" | "opening" | "open" | "closing" | "closed";

/**
 * One window on one node's card: open it, mark its stages, close it, read what it cost.
 *
 * ```ts
 * const m = await Meter.forNode(node, { joulesPer1kHint: 4100 }).open();
 * await retrieve(); m.mark("retrieve");
 * await generate(); m.mark("generate");
 * await m.close();
 * const e = m.result({ tokens: 412 });
 * ```
 *
 * Windows open on the same card at the same time share it (see {@link MeterOptions.attribution}).
 *
 * Metering never throws into the caller's work: a card that cannot be read costs the measurement
 * (the result says `estimated` or `unknown`, and why), never the request. Only programmer errors
 * throw, at once, naming the field: an invalid node or option, `mark()` after close, `result()`
 * before close.
 */
export class Meter {
  readonly node: ResolvedNode;
  private readonly o: ResolvedMeterOptions;
  private readonly forced: BackendName | null;
  private currentWeight: number;
  private state: State = "new";
  /** Its view of the card's other tenants, where the node names a serving process. */
  private witness: Witness | null = null;
  private selection: Selection | null = null;
  private track: Track | null = null;
  private ledger: CardLedger | null = null;
  private entries: LedgerWindow | null = null;
  /** What this window releases if it is collected unclosed (./abandoned.ts). */
  private leftovers: Leftovers | null = null;
  /** Its own events' instants and weights (on the ledger while open, kept once measured). */
  private readonly events = new WindowEvents();
  private marks: StageMark[] = [];
  private notReady: string | null = null;
  private syncFailure: string | null = null;
  private closing: Promise<void> | null = null;
  /** What close() measured, its stages in the order of its marks. */
  private outcome: Outcome | null = null;
  private readonly messages = new WindowMessages();
  /** A node of several cards: the window's part on each card (./card-set.ts), else null. */
  private readonly set: CardSet | null = null;

  static {
    // A window whose record is still owed at the end of the tick it closed in: result() publishes it.
    settleOwedEnergyWith((window) => {
      const meter = window as Meter;
      if (!meter.messages.owed) return;
      try {
        meter.result();
      } catch {
        meter.messages.owed = false; // a closed window's result() does not throw; were it to, owe nothing
      }
    });
  }

  private constructor(
    node: ResolvedNode,
    options: ResolvedMeterOptions,
    forced: BackendName | null,
    /** One card's part of a window over several cards: it publishes nothing, it is never estimated. */
    private readonly isPart = false,
  ) {
    this.node = node;
    this.o = options;
    this.currentWeight = options.weight;
    this.forced = forced;
    if (node.cards.length > 1) {
      const partOptions = { ...options, sync: null, hint: null };
      this.set = new CardSet(nodesOfCards(node).map((n) => new Meter(n, partOptions, forced, true)));
    }
  }

  /** A window on `node`'s card. Validates the node and options at once (throws GiulError). */
  static forNode(node: Node, options: MeterOptions = {}): Meter {
    const resolved = resolveNodeOnce(node);
    const checked = checkOptions<MeterOptions>("options", options, METER_OPTIONS);
    const forced = forcedBackend();
    for (const card of forced === null ? [] : nodesOfCards(resolved)) {
      const failure = knownForcedFailure(card, forced as BackendName);
      if (failure !== null) throw new GiulError("BACKEND_UNAVAILABLE", failure, { field: "GIUL_BACKEND" });
    }
    return new Meter(resolved, resolveMeterOptions(checked), forced);
  }

  /** The backend metering this window (known once open() has resolved). */
  get backend(): BackendName | null {
    return this.set !== null ? this.set.backend : (this.selection?.backend ?? null);
  }

  /** @internal Whether it is open (opened, not closing). */
  partOpen(): boolean {
    return this.state === "open";
  }

  /** The window's weight: as opened, or as last set (see {@link MeterOptions.weight}). */
  get weight(): number {
    return this.currentWeight;
  }

  /**
   * CLOCK_MONOTONIC ns (the clock of `process.hrtime.bigint()`) of the window's edges: to line a
   * window up with traces, or to check a figure against another meter over the same instants.
   * `weights` lists the window's weight from each instant on (its opening edge first).
   */
  edgeTimes(): EdgeTimes {
    if (this.set !== null) return this.set.edgeTimes();
    return this.events.edgeTimes(this.marks, this.state === "closing" || this.state === "closed");
  }

  /**
   * Opens the window: the opening edge is taken when this resolves, within the node's `timeoutMs`
   * whatever the card does (past it the window is not measured, and says why). Never rejects for
   * the card's sake.
   */
  open(): Promise<this> {
    let later: Promise<unknown> | null;
    try {
      later = this.set !== null ? this.openSet(this.set) : this.openPart();
    } catch (error) {
      return Promise.reject(error);
    }
    return later === null ? Promise.resolve(this) : (later as Promise<this>);
  }

  /** @internal open() of one card's window: null where it opened at once (no promise), else the wait. */
  openPart(): Promise<this> | null {
    this.beginOpen();
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

  /** open() of a window over several cards: its part on each (null where all opened at once). */
  private openSet(set: CardSet): Promise<this> | null {
    this.beginOpen();
    const opened = (): this => {
      this.state = "open";
      if (windowOpenChannel.hasSubscribers)
        this.messages.opened(this, this.backend ?? "none", this.edgeNs(false));
      return this;
    };
    const later = set.open();
    if (later === null) {
      opened();
      return null;
    }
    return later.then(opened, (error: unknown) => {
      this.state = "new";
      throw error;
    });
  }

  /** The window starts opening: only once (a part closed after its window was refused stays so). */
  private beginOpen(): void {
    if (this.state !== "new")
      throw new GiulError("WINDOW_STATE", `open(): the window is already ${this.state}`);
    this.state = "opening";
  }

  /** open() where the card is still to be probed or its sampler to start. */
  private async openLater(): Promise<this> {
    let opened: Opening;
    try {
      opened = await openTrackLater(this.node, this.forced, this.o.periodMs);
    } catch (error) {
      opened = failedOpening(error);
    }
    this.opened(opened);
    return this;
  }

  /** The rest of open(), its track in hand: the opening edge (a configuration error: back to new). */
  private opened(opening: Opening): void {
    let opened: OpenedWindow;
    try {
      opened = openOnLedger(this.node, opening, this.o.weight);
    } catch (error) {
      this.state = "new";
      throw error;
    }
    this.selection = opening.selection;
    this.notReady = opening.notReady;
    const { track, ledger, entries } = opened;
    this.track = track;
    this.ledger = ledger;
    this.entries = entries;
    this.events.opened(entries);
    this.witness = witnessFor(this.node, this.selection, this.events.ns(0), this.o.watchContention, ledger);
    const heldWatch = this.witness?.held() ?? null;
    this.leftovers = new Leftovers(track, heldWatch, ledger, entries);
    abandoned.add(this, this.leftovers);
    this.state = "open";
    if (windowOpenChannel.hasSubscribers && !this.isPart)
      this.messages.opened(this, this.backend ?? "none", this.edgeNs(false));
  }

  /**
   * Ends the current stage, naming it, and starts the next. The total is never the sum of stages:
   * time after the last mark still counts in the total.
   */
  mark(name: string, options?: MarkOptions): void {
    if (this.state !== "open") {
      throw new GiulError(
        "WINDOW_STATE",
        `mark(${describeValue(name)}): the window is ${this.state}, not open`,
      );
    }
    checkStageName(name);
    if (hasStage(this.marks, name)) {
      throw optionError("name", `stage ${describeValue(name)} was already marked in this window`);
    }
    const tokens = checkTokens("tokens", checkOptions<MarkOptions>("options", options, TOKEN_OPTIONS).tokens);
    if (this.set === null) this.markPart(name, tokens);
    else {
      this.set.mark(name, tokens);
      this.marks = withMark(this.marks, { name, index: -1, tokens, maxConcurrency: 0 });
    }
  }

  /** @internal mark() of one card's window, its arguments checked. */
  markPart(name: string, tokens: number | null): void {
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

  /**
   * Changes this window's weight in the card's split from now on (e.g. tokens in flight, KV-cache
   * blocks held). Finite and > 0. Only while the window is open.
   */
  setWeight(weight: number): void {
    if (this.state !== "open") {
      throw new GiulError("WINDOW_STATE", `setWeight(): the window is ${this.state}, not open`);
    }
    const w = checkWeight("weight", weight);
    if (w === this.currentWeight) return;
    this.currentWeight = w;
    if (this.set !== null) this.set.setWeight(w);
    else (this.ledger as CardLedger).setWeight(this.entries as LedgerWindow, w);
  }

  /**
   * Closes the window: awaits `sync`, takes the closing edge, and resolves once it can be bounded:
   * on an integral of power, a sample after it (about 0.25 ms on the native backends, which ask
   * the sampler for a read); on the energy counter, its next update after the edge as well (about
   * half a step). Idempotent. Never rejects for the card's sake.
   */
  close(): Promise<void> {
    if (this.closing) return this.closing;
    if (this.state !== "open") {
      return Promise.reject(new GiulError("WINDOW_STATE", `close(): the window is ${this.state}, not open`));
    }
    this.state = "closing";
    this.closing = this.finish();
    return this.closing;
  }

  /** The window is closing: nothing is left for a collection to release (./abandoned.ts). */
  private forgetLeftovers(): void {
    if (this.leftovers === null) return;
    abandoned.remove(this.leftovers);
    this.leftovers = null;
  }

  private stageStart(): number {
    return this.marks.length === 0 ? 0 : (this.marks[this.marks.length - 1] as StageMark).index;
  }

  private finish(): Promise<void> {
    const sync = this.o.sync;
    if (sync) return this.finishAfterSync(sync);
    try {
      return this.finishNow();
    } catch (error) {
      // As an async function would: a failure of giul's own rejects, it never throws from close().
      return Promise.reject(error);
    }
  }

  private async finishAfterSync(sync: () => unknown): Promise<void> {
    this.syncFailure = await runSyncHook(sync, this.o.syncTimeoutMs);
    return this.finishNow();
  }

  /**
   * close() from its closing edge on: the edge taken now, the outcome once the edges have settled.
   * Not an async function: a crowd of closing windows would each keep a suspended frame of it
   * alive, where the waiter keeps a few words.
   */
  private finishNow(ofParts: CloseCountdown | null = null): Promise<void> {
    if (this.set !== null) return this.finishSet(this.set);
    const countdown = ofParts ?? new CloseCountdown(1);
    this.forgetLeftovers();
    const ledger = this.ledger as CardLedger;
    const entries = this.entries as LedgerWindow;
    const openEvent = entries.events[0] as LedgerEvent;
    const closeEvent = ledger.closeWindow(entries);
    if (windowCloseChannel.hasSubscribers && !this.isPart)
      this.messages.closed(this, this.selection?.backend ?? "none", openEvent.edge.tNs, closeEvent.edge.tNs);
    const concurrency = ledger.concurrency(openEvent, closeEvent);
    const contention = this.witness?.check(openEvent.edge.tNs, closeEvent.edge.tNs) ?? null;
    // One promise per closing window, resolved from the ledger's call of one waiter, not a chain
    // of promises and closures kept alive by a crowd of closing windows.
    const wait = new CloseWait(this, closeEvent, concurrency, contention, countdown);
    try {
      ledger.settleThen(wait);
    } catch (error) {
      wait.accounted({ error });
    }
    return countdown.promise;
  }

  /** close() of a window over several cards: every part closed, then its messages. */
  private async finishSet(set: CardSet): Promise<void> {
    await set.close(this.syncFailure);
    this.state = "closed";
    if (windowCloseChannel.hasSubscribers)
      this.messages.closed(this, set.backend ?? "none", this.edgeNs(false), this.edgeNs(true));
    if (energyChannel.hasSubscribers) this.messages.owe(this);
  }

  /** @internal close() of one card's part, open (its CardSet's): `countdown` is told once it is measured. */
  closePart(countdown: CloseCountdown): void {
    this.state = "closing";
    this.closing = countdown.promise;
    try {
      this.finishNow(countdown);
    } catch (error) {
      countdown.done({ error });
    }
  }

  /** @internal The card this window is on (a part of a window over several cards). */
  card(): { readonly index: number | null; readonly uuid: string | null } {
    return cardOf(this.selection, this.node);
  }

  /** @internal Nothing of this part can be measured: the window's sync hook failed, and why. */
  failWith(reason: string): void {
    this.syncFailure = reason;
  }

  /** @internal The outcome once its edges have settled (`thrown`: that failed); its CloseWait calls it. */
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
      this.state = "closed";
    }
    // Published by the first result() before this tick is over (it knows the tokens), else right after.
    if (energyChannel.hasSubscribers && !this.isPart) this.messages.owe(this);
  }

  /** What the window cost. Call after close(). Cheap: the rules are applied to what close() read. */
  result(options?: ResultOptions): Energy {
    if (this.state !== "closed" || (this.outcome === null && this.set === null)) {
      throw new GiulError("WINDOW_STATE", `result(): the window is ${this.state}; await close() first`);
    }
    const tokens = checkTokens(
      "tokens",
      checkOptions<ResultOptions>("options", options, TOKEN_OPTIONS).tokens,
    );
    const energy =
      this.set === null
        ? this.charged(tokens)
        : this.set.result(
            this.marks,
            { joulesPer1kHint: this.o.hint, attribution: this.o.attribution },
            tokens,
          );
    return this.messages.settled(
      this,
      energy,
      () => this.edgeNs(false),
      () => this.edgeNs(true),
    );
  }

  /** @internal The rules applied to what close() measured (a part's: never estimated on its own). */
  charged(tokens: number | null): Energy {
    const facts = {
      backend: this.selection?.backend ?? "none",
      idleW: this.node.idleW,
      joulesPer1kHint: this.o.hint,
      contendedBy: this.witness?.contendedBy ?? null,
      contentionUnchecked: this.witness?.unchecked ?? null,
      shared: this.witness !== null,
      attribution: this.o.attribution,
      part: this.isPart,
      partition: this.witness?.partition ?? null,
    };
    return chargeOutcome(this.outcome as Outcome, facts, tokens);
  }

  /** CLOCK_MONOTONIC ns of the window's opening (or, `last`, its newest) edge. */
  private edgeNs(last: boolean): bigint {
    if (this.set !== null) return this.set.edgeNs(last);
    return this.events.ns(last ? this.events.count() - 1 : 0);
  }

  /** Opens a window, runs fn, closes it (also when fn throws, then rethrows): fn's value, what it cost. */
  measure<T>(
    fn: (meter: Meter) => Promise<T> | T,
    measureOptions?: MeasureOptions<T>,
  ): Promise<{ value: T; energy: Energy }> {
    return measureRun(this, fn, measureOptions);
  }

  /** `await using m = await Meter.forNode(node).open()` closes the window at the end of the block. */
  async [asyncDispose](): Promise<void> {
    if (this.state === "open" || this.state === "closing") await this.close();
  }
}
