import {
  energyChannel,
  settleOwedEnergyWith,
  windowCloseChannel,
  windowOpenChannel,
} from "../diagnostics.js";
import { chargeCards } from "../rules/cards.js";
import type { Energy } from "../rules/energy.js";
import { type Node, nodesOfCards, type ResolvedNode, resolveNodeOnce } from "../rules/node.js";
import { forcedBackend, knownForcedFailure } from "../select/index.js";
import { GiulError } from "../vocabulary/errors.js";
import type { BackendName } from "../vocabulary/measurement.js";
import { describeValue } from "../vocabulary/validate.js";
import { CardWindow } from "./card-window.js";
import { CloseCountdown } from "./close.js";
import type { EdgeTimes } from "./events.js";
import { hasStage, type StageMark, withMark } from "./measure.js";
import { WindowMessages } from "./messages.js";
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
import { measureRun } from "./run.js";
import { asyncDispose, runSyncHook } from "./sync.js";

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
  private currentWeight: number;
  private state: State = "new";
  /** The window's part on each card of its node, in the node's order (one for a one-card node). */
  private readonly cards: readonly CardWindow[];
  /** Over several cards: its stages, named in order (each card's part keeps where they fell on its card). */
  private marks: StageMark[] = [];
  private closing: Promise<void> | null = null;
  private readonly messages = new WindowMessages();

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

  private constructor(node: ResolvedNode, options: ResolvedMeterOptions, forced: BackendName | null) {
    this.node = node;
    this.o = options;
    this.currentWeight = options.weight;
    this.cards =
      node.cards.length === 1
        ? [new CardWindow(node, options, forced)]
        : nodesOfCards(node).map((n) => new CardWindow(n, options, forced));
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

  /** The backend metering this window (known once open() has resolved): "mixed" where its cards differ. */
  get backend(): BackendName | null {
    const first = (this.cards[0] as CardWindow).backend;
    if (first === null) return null;
    for (const c of this.cards) if (c.backend !== first) return "mixed";
    return first;
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
    const closed = this.state === "closing" || this.state === "closed";
    const first = (this.cards[0] as CardWindow).edgeTimes(closed);
    if (this.cards.length === 1) return first;
    // Every part's edges are within microseconds of its first card's.
    const cards = this.cards.map((c) => ({ index: c.card().index, ...c.edgeTimes(closed) }));
    return { ...first, cards };
  }

  /**
   * Opens the window: the opening edge is taken when this resolves, within the node's `timeoutMs`
   * whatever the card does (past it the window is not measured, and says why). Never rejects for
   * the card's sake.
   */
  open(): Promise<this> {
    if (this.state !== "new")
      return Promise.reject(new GiulError("WINDOW_STATE", `open(): the window is already ${this.state}`));
    this.state = "opening";
    let later: Promise<void> | null;
    try {
      later = this.openCards();
    } catch (error) {
      this.state = "new";
      return Promise.reject(error);
    }
    if (later === null) return Promise.resolve(this.opened());
    return later.then(
      () => this.opened(),
      (error: unknown) => {
        this.state = "new";
        throw error;
      },
    );
  }

  /**
   * Opens every card's part: null where all opened at once (no promise of its own per card), else
   * the wait. Where one refuses (a configuration error), closes the others and rejects with it.
   */
  private openCards(): Promise<void> | null {
    if (this.cards.length === 1) return (this.cards[0] as CardWindow).open();
    let waits: Promise<unknown>[] | null = null;
    let refused: { error: unknown } | null = null;
    for (const c of this.cards) {
      let wait: Promise<void> | null;
      try {
        wait = c.open();
      } catch (error) {
        refused ??= { error };
        continue;
      }
      if (wait === null) continue;
      waits ??= [];
      waits.push(
        wait.catch((error: unknown) => {
          refused ??= { error };
        }),
      );
    }
    if (waits === null && refused === null) return null;
    return Promise.all(waits ?? []).then(async () => {
      if (refused === null) return;
      const opened = this.cards.filter((c) => c.isOpen);
      if (opened.length > 0) {
        const closing = new CloseCountdown(opened.length);
        for (const c of opened) closeCard(c, closing);
        await closing.promise.catch(() => undefined);
      }
      throw refused.error;
    });
  }

  /** Every card's part is open: so is the window. */
  private opened(): this {
    this.state = "open";
    if (windowOpenChannel.hasSubscribers)
      this.messages.opened(this, this.backend ?? "none", this.edgeNs(false));
    return this;
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
    if (hasStage(this.cards.length === 1 ? (this.cards[0] as CardWindow).marks : this.marks, name)) {
      throw optionError("name", `stage ${describeValue(name)} was already marked in this window`);
    }
    const tokens = checkTokens("tokens", checkOptions<MarkOptions>("options", options, TOKEN_OPTIONS).tokens);
    for (const c of this.cards) c.mark(name, tokens);
    // The stages' names for the sum of several cards (one card's own marks are the window's).
    if (this.cards.length > 1)
      this.marks = withMark(this.marks, { name, index: -1, tokens, maxConcurrency: 0 });
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
    for (const c of this.cards) c.setWeight(w);
  }

  /**
   * Closes the window: awaits `sync`, takes the closing edge, and resolves once it can be bounded:
   * on an integral of power, the samples as long after it as the readings may lag (about 10 ms at
   * the native 5 ms period, 200 ms through nvidia-smi); on the energy counter, its next update
   * after the edge (about half a step). Idempotent. Never rejects for the card's sake.
   */
  close(): Promise<void> {
    if (this.closing) return this.closing;
    if (this.state !== "open") {
      return Promise.reject(new GiulError("WINDOW_STATE", `close(): the window is ${this.state}, not open`));
    }
    this.state = "closing";
    const sync = this.o.sync;
    this.closing = sync ? this.finishAfterSync(sync) : this.finishNow(null);
    return this.closing;
  }

  private async finishAfterSync(sync: () => unknown): Promise<void> {
    return this.finishNow(await runSyncHook(sync, this.o.syncTimeoutMs));
  }

  /**
   * close() from its closing edges on (`failure`: why none can be measured, or null): the edges
   * taken now, the outcome once they have settled. Not an async function: a crowd of closing
   * windows would each keep a suspended frame of it alive, where the countdown keeps a few words.
   */
  private finishNow(failure: string | null): Promise<void> {
    const countdown = new CloseCountdown(this.cards.length, this);
    for (const c of this.cards) {
      if (failure !== null) c.failWith(failure);
      closeCard(c, countdown);
    }
    if (windowCloseChannel.hasSubscribers)
      this.messages.closed(this, this.backend ?? "none", this.edgeNs(false), this.edgeNs(true));
    return countdown.promise;
  }

  /** @internal Every card's part is measured (its CloseCountdown tells it, before close() settles). */
  closed(): void {
    this.state = "closed";
    // Published by the first result() before this tick is over (it knows the tokens), else right after.
    if (energyChannel.hasSubscribers) this.messages.owe(this);
  }

  /** What the window cost. Call after close(). Cheap: the rules are applied to what close() read. */
  result(options?: ResultOptions): Energy {
    if (this.state !== "closed" || !this.cards.every((c) => c.measuredYet)) {
      throw new GiulError("WINDOW_STATE", `result(): the window is ${this.state}; await close() first`);
    }
    const tokens = checkTokens(
      "tokens",
      checkOptions<ResultOptions>("options", options, TOKEN_OPTIONS).tokens,
    );
    const energy =
      this.cards.length === 1
        ? (this.cards[0] as CardWindow).charged(tokens, this.o.hint, false)
        : chargeCards(
            this.cards.map((c) => ({ ...c.card(), energy: c.charged(null, null, true) })),
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

  /** CLOCK_MONOTONIC ns of the window's opening (or, `last`, its newest) edge: its first card's. */
  private edgeNs(last: boolean): bigint {
    return (this.cards[0] as CardWindow).edgeNs(last);
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

/** A card's part closes; `countdown` is told once it is measured, or at once if closing threw. */
function closeCard(c: CardWindow, countdown: CloseCountdown): void {
  try {
    c.close(countdown);
  } catch (error) {
    countdown.done({ error });
  }
}
