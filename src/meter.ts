import { type Edge, NullTrack, type Track } from "./backends/track.js";
import { type ProcessWatcher, tenantsOf, watcherFor } from "./contention.js";
import { debug } from "./debug.js";
import {
  announceClose,
  announceOpen,
  claimEnergy,
  energyChannel,
  oweEnergy,
  publishEnergy,
  windowCloseChannel,
  windowOpenChannel,
} from "./diagnostics.js";
import {
  type Attribution,
  aboveIdle,
  type ChargeContext,
  type Concurrency,
  charge,
  type Energy,
  type ShareMeasurement,
} from "./energy.js";
import { GiulError } from "./errors.js";
import { type CardLedger, type LedgerEvent, type LedgerWindow, ledgerFor } from "./ledger.js";
import {
  type BackendName,
  type ContendingProcess,
  fail,
  type ProcessRead,
  type SpanMeasurement,
} from "./measurement.js";
import { type Node, type ResolvedNode, resolveNode } from "./node.js";
import { openTrack } from "./open-track.js";
import { forcedBackend, knownForcedFailure, type Selection } from "./select/index.js";
import { describeValue, firstUnknownKey, unknownKey } from "./validate.js";

/** Options of {@link Meter.forNode}. */
export interface MeterOptions {
  /**
   * Joules per 1,000 tokens to estimate from when a window cannot be measured. Without it (or
   * without a token count) an unmeasurable window is `unknown`.
   */
  readonly joulesPer1kHint?: number | null;
  /**
   * Awaited before the closing edge is taken: synchronise the GPU here when the work is local
   * (the energy counter only counts work the card has finished). An HTTP upstream needs none.
   */
  readonly sync?: (() => unknown) | null;
  /** Sampling period in ms, 1..1000. Default 10. The card's sampler runs at the shortest asked. */
  readonly periodMs?: number;
  /**
   * On a node with `servingMatch`, also look for tenants during the window (at the node's
   * `contentionIntervalMs`, shared with every window on the card), not only at its two edges.
   */
  readonly watchContention?: boolean;
  /**
   * How the card is charged when other windows of this process are open on it at the same time.
   * `"shared"` (the default): at every instant the card's energy above idle is split among the
   * open windows in proportion to their weights, so the shares add up to the card. `"exclusive"`:
   * the whole card above idle over the window (giul 0.2's figure, for fleet comparisons); a window
   * that overlapped another is then witnessed, not measured.
   */
  readonly attribution?: Attribution;
  /**
   * This window's weight in the split (finite, > 0; default 1): e.g. tokens in flight or KV-cache
   * blocks held. Change it while the window is open with {@link Meter.setWeight}.
   */
  readonly weight?: number;
  /**
   * How long close() waits for `sync` (ms; default 60,000). Past it the closing edge is taken
   * anyway, the window says why, and close() resolves: a hook that never settles cannot hold the
   * request.
   */
  readonly syncTimeoutMs?: number;
}

const METER_OPTIONS: readonly (keyof MeterOptions)[] = [
  "joulesPer1kHint",
  "sync",
  "periodMs",
  "watchContention",
  "attribution",
  "weight",
  "syncTimeoutMs",
];
const TOKEN_OPTIONS: readonly string[] = ["tokens"];

export interface MarkOptions {
  /** Tokens produced in this stage, so that it can be estimated if it cannot be measured. */
  readonly tokens?: number | null;
}

export interface ResultOptions {
  /** Tokens the answer produced (for the estimate and for joules per 1k tokens). */
  readonly tokens?: number | null;
}

export interface MeasureOptions<T> {
  /** Tokens the answer produced, or a function of fn's value that says. */
  readonly tokens?: number | null | ((value: T) => number | null | undefined);
}

type State = "new" | "opening" | "open" | "closing" | "closed";

interface StageMark {
  readonly name: string;
  /** Index of the mark's event in the window's ledger entries. */
  readonly index: number;
  readonly tokens: number | null;
  readonly concurrency: Concurrency;
}

/** What one span (the window, or a stage) measured, before the rules. */
interface SpanOutcome {
  readonly measurement: SpanMeasurement | ShareMeasurement;
  readonly seconds: number;
  readonly concurrency: Concurrency | null;
}

interface Outcome {
  readonly total: SpanOutcome;
  readonly stages: readonly (SpanOutcome & { readonly name: string; readonly tokens: number | null })[];
}

declare global {
  interface SymbolConstructor {
    /**
     * `await using` support (Meter[Symbol.asyncDispose]). Declared here as @types/node and
     * TypeScript's esnext.disposable library declare it, so that giul's types check in a project
     * that has neither.
     */
    readonly asyncDispose: unique symbol;
  }
}

const asyncDispose: typeof Symbol.asyncDispose =
  Symbol.asyncDispose ?? (Symbol.for("nodejs.asyncDispose") as typeof Symbol.asyncDispose);

const resolvedNodes = new WeakMap<Node, ResolvedNode>();

/**
 * A window opened and never closed (a caller's bug) must not keep its card's sampler, its
 * contention watch or its weight in the card's ledger for the life of the process: when the Meter
 * is collected, what it held is released. The cleanup holds what it releases, never the Meter.
 */
const abandoned = new FinalizationRegistry<() => void>((release) => release());
const NO_STAGES: Readonly<Record<string, Energy>> = Object.freeze({});
const ATTRIBUTIONS: readonly Attribution[] = ["shared", "exclusive"];
const TIMED_OUT: unique symbol = Symbol("timed out");

function optionError(field: string, message: string): GiulError {
  return new GiulError("INVALID_OPTION", `${field}: ${message}`, { field });
}

function checkTokens(field: string, tokens: unknown): number | null {
  if (tokens === undefined || tokens === null) return null;
  if (typeof tokens !== "number" || !Number.isSafeInteger(tokens) || tokens < 0) {
    throw optionError(field, `expected a whole number of tokens ≥ 0, got ${describeValue(tokens)}`);
  }
  return tokens;
}

/**
 * The options object of a call (`undefined` and `null` are no options): an object whose keys are
 * all known, else a GiulError naming the key and the one meant.
 */
function checkOptions<T extends object>(
  what: string,
  options: unknown,
  known: readonly string[],
): Partial<T> {
  if (options === undefined || options === null) return {};
  if (typeof options !== "object" || Array.isArray(options)) {
    throw optionError(what, `expected an object, got ${describeValue(options)}`);
  }
  const unknown = firstUnknownKey(options, known);
  if (unknown !== null) throw optionError(unknown, unknownKey(unknown, known));
  return options as Partial<T>;
}

function checkWeight(field: string, weight: unknown): number {
  if (typeof weight !== "number" || !Number.isFinite(weight) || weight <= 0) {
    throw optionError(field, `expected a finite number > 0, got ${describeValue(weight)}`);
  }
  return weight;
}

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
  private readonly hint: number | null;
  private readonly sync: (() => unknown) | null;
  private readonly periodMs: number;
  private readonly forced: BackendName | null;
  private readonly watchContention: boolean;
  private readonly syncTimeoutMs: number;
  private readonly attribution: Attribution;
  private readonly initialWeight: number;
  private currentWeight: number;
  private state: State = "new";
  private watcher: ProcessWatcher | null = null;
  private openSnapshot: Promise<ProcessRead> | null = null;
  private contendedBy: readonly ContendingProcess[] | null = null;
  private contentionUnchecked: string | null = null;
  private selection: Selection | null = null;
  private track: Track | null = null;
  private ledger: CardLedger | null = null;
  private entries: LedgerWindow | null = null;
  private readonly marks: StageMark[] = [];
  private notReady: string | null = null;
  private syncFailure: string | null = null;
  private closing: Promise<void> | null = null;
  private outcome: Outcome | null = null;

  private constructor(node: ResolvedNode, options: Partial<MeterOptions>, forced: BackendName | null) {
    this.node = node;
    const hint = options.joulesPer1kHint ?? null;
    if (hint !== null && (typeof hint !== "number" || !Number.isFinite(hint) || hint < 0)) {
      throw optionError(
        "joulesPer1kHint",
        `expected a finite number ≥ 0 (J per 1,000 tokens), got ${describeValue(hint)}`,
      );
    }
    this.hint = hint;
    const sync = options.sync ?? null;
    if (sync !== null && typeof sync !== "function") {
      throw optionError("sync", `expected a function (sync or async), got ${describeValue(sync)}`);
    }
    this.sync = sync;
    const periodMs = options.periodMs ?? 10;
    if (typeof periodMs !== "number" || !Number.isInteger(periodMs) || periodMs < 1 || periodMs > 1000) {
      throw optionError("periodMs", `expected an integer from 1 to 1000, got ${describeValue(periodMs)}`);
    }
    this.periodMs = periodMs;
    const watch = options.watchContention ?? false;
    if (typeof watch !== "boolean")
      throw optionError("watchContention", `expected a boolean, got ${describeValue(watch)}`);
    this.watchContention = watch;
    const syncTimeoutMs = options.syncTimeoutMs ?? 60_000;
    if (
      typeof syncTimeoutMs !== "number" ||
      !Number.isFinite(syncTimeoutMs) ||
      syncTimeoutMs < 1 ||
      syncTimeoutMs > 86_400_000
    ) {
      throw optionError(
        "syncTimeoutMs",
        `expected a number of ms from 1 to 86400000, got ${describeValue(syncTimeoutMs)}`,
      );
    }
    this.syncTimeoutMs = syncTimeoutMs;
    const attribution = options.attribution ?? "shared";
    if (!ATTRIBUTIONS.includes(attribution)) {
      throw optionError("attribution", `expected "shared" or "exclusive", got ${describeValue(attribution)}`);
    }
    this.attribution = attribution;
    this.initialWeight = options.weight === undefined ? 1 : checkWeight("weight", options.weight);
    this.currentWeight = this.initialWeight;
    this.forced = forced;
  }

  /** A window on `node`'s card. Validates the node and options at once (throws GiulError). */
  static forNode(node: Node, options: MeterOptions = {}): Meter {
    let resolved = typeof node === "object" && node !== null ? resolvedNodes.get(node) : undefined;
    if (resolved === undefined) {
      resolved = resolveNode(node);
      if (Object.isFrozen(node)) resolvedNodes.set(node, resolved);
    }
    const checked = checkOptions<MeterOptions>("options", options, METER_OPTIONS);
    const forced = forcedBackend();
    if (forced !== null) {
      const failure = knownForcedFailure(resolved, forced);
      if (failure !== null) throw new GiulError("BACKEND_UNAVAILABLE", failure, { field: "GIUL_BACKEND" });
    }
    return new Meter(resolved, checked, forced);
  }

  /** The backend metering this window (known once open() has resolved). */
  get backend(): BackendName | null {
    return this.selection?.backend ?? null;
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
  edgeTimes(): {
    open: bigint | null;
    marks: { name: string; tNs: bigint }[];
    close: bigint | null;
    weights: { tNs: bigint; weight: number }[];
  } {
    const entries = this.entries;
    if (entries === null) return { open: null, marks: [], close: null, weights: [] };
    const events = entries.events;
    const marked = new Set(this.marks.map((m) => m.index));
    const weights: { tNs: bigint; weight: number }[] = [];
    for (let i = 0; i < events.length; i++) {
      const last = this.state === "closing" || this.state === "closed" ? events.length - 1 : events.length;
      if (i >= last || marked.has(i)) continue;
      weights.push({ tNs: (events[i] as LedgerEvent).edge.tNs, weight: entries.weights[i] as number });
    }
    const closed = this.state === "closing" || this.state === "closed";
    return {
      open: events[0]?.edge.tNs ?? null,
      marks: this.marks.map((m) => ({ name: m.name, tNs: (events[m.index] as LedgerEvent).edge.tNs })),
      close: closed ? ((events[events.length - 1] as LedgerEvent).edge.tNs ?? null) : null,
      weights,
    };
  }

  /**
   * Opens the window: the opening edge is taken when this resolves, within the node's `timeoutMs`
   * whatever the card does (past it the window is not measured, and says why). Never rejects for
   * the card's sake.
   */
  async open(): Promise<this> {
    if (this.state !== "new")
      throw new GiulError("WINDOW_STATE", `open(): the window is already ${this.state}`);
    this.state = "opening";
    let track: Track;
    try {
      const opened = await openTrack(this.node, this.forced, this.periodMs);
      this.selection = opened.selection;
      track = opened.track;
      this.notReady = opened.notReady;
    } catch (error) {
      // openTrack() never rejects; this is belt and braces for the caller's sake.
      track = new NullTrack(`opening the window failed: ${String(error)}`);
      this.notReady = `opening the window failed: ${String(error)}`;
      debug("open failed: %s", String(error));
    }
    const forcedUnavailable = this.selection?.forcedUnavailable;
    if (forcedUnavailable !== undefined) {
      // A diagnosis override that cannot work is a configuration error: say so, never fall back.
      track.release();
      this.state = "new";
      throw new GiulError("BACKEND_UNAVAILABLE", forcedUnavailable, { field: "GIUL_BACKEND" });
    }
    const ledger = ledgerFor(track);
    let entries: LedgerWindow;
    try {
      entries = ledger.openWindow(this.initialWeight, this.node.idleW);
    } catch (error) {
      track.release();
      this.state = "new";
      throw error;
    }
    this.track = track;
    this.ledger = ledger;
    this.entries = entries;
    const openNs = (entries.events[0] as LedgerEvent).edge.tNs;
    if (this.node.servingMatch !== null) {
      // A shared card: witness who is resident at this edge (coalesced with every other window).
      const reader = this.selection?.reader ?? null;
      if (reader !== null) {
        this.watcher = watcherFor(reader, this.node.contentionIntervalMs);
        this.openSnapshot = this.watcher.after(openNs);
        if (this.watchContention) this.watcher.watch();
      } else {
        this.contentionUnchecked = `contention could not be checked: the ${this.selection?.backend ?? "none"} backend cannot read the card's processes`;
      }
    }
    const heldWatch = this.watchContention ? this.watcher : null;
    abandoned.register(
      this,
      () => {
        if (entries.weight > 0) ledger.closeWindow(entries);
        track.release();
        heldWatch?.unwatch();
      },
      this,
    );
    this.state = "open";
    if (windowOpenChannel.hasSubscribers) announceOpen(this, this.selection?.backend ?? "none", openNs);
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
    if (typeof name !== "string" || name.length === 0) {
      throw optionError("name", `mark() needs a non-empty stage name, got ${describeValue(name)}`);
    }
    if (this.marks.some((m) => m.name === name)) {
      throw optionError("name", `stage ${describeValue(name)} was already marked in this window`);
    }
    const tokens = checkTokens("tokens", checkOptions<MarkOptions>("options", options, TOKEN_OPTIONS).tokens);
    const ledger = this.ledger as CardLedger;
    const entries = this.entries as LedgerWindow;
    const start = entries.events[this.stageStart()] as LedgerEvent;
    const event = ledger.mark(entries);
    this.marks.push({
      name,
      index: entries.events.length - 1,
      tokens,
      concurrency: ledger.concurrency(start, event),
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
    (this.ledger as CardLedger).setWeight(this.entries as LedgerWindow, w);
  }

  /**
   * Closes the window: awaits `sync`, takes the closing edge, and resolves once the sampler has a
   * sample after it (about one period). Idempotent. Never rejects for the card's sake.
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

  private stageStart(): number {
    return this.marks.length === 0 ? 0 : (this.marks[this.marks.length - 1] as StageMark).index;
  }

  private async finish(): Promise<void> {
    const sync = this.sync;
    if (sync) {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<typeof TIMED_OUT>((done) => {
        timer = setTimeout(() => done(TIMED_OUT), this.syncTimeoutMs);
      });
      try {
        const outcome = await Promise.race([Promise.resolve().then(sync), timedOut]);
        if (outcome === TIMED_OUT) {
          this.syncFailure =
            `the sync hook did not finish within syncTimeoutMs (${this.syncTimeoutMs} ms): the closing ` +
            "edge was taken without it, so the card's work may not be finished";
        }
      } catch (error) {
        this.syncFailure = `the sync hook failed, so the card's work may not be finished: ${String(error)}`;
      } finally {
        clearTimeout(timer);
      }
    }
    abandoned.unregister(this);
    const track = this.track as Track;
    const ledger = this.ledger as CardLedger;
    const entries = this.entries as LedgerWindow;
    const openEvent = entries.events[0] as LedgerEvent;
    const closeEvent = ledger.closeWindow(entries);
    if (windowCloseChannel.hasSubscribers)
      announceClose(this, this.selection?.backend ?? "none", openEvent.edge.tNs, closeEvent.edge.tNs);
    const concurrency = ledger.concurrency(openEvent, closeEvent);
    const contention = this.watcher
      ? this.checkContention(this.watcher, openEvent.edge, closeEvent.edge)
      : null;
    try {
      await ledger.settleThrough(closeEvent);
      if (contention) await contention;
      this.outcome = this.measureAll(concurrency);
    } catch (error) {
      const reason = `evaluating the window failed: ${String(error)}`;
      this.outcome = {
        total: { measurement: fail(reason), seconds: seconds(openEvent.edge, closeEvent.edge), concurrency },
        stages: [],
      };
    } finally {
      track.release();
      this.state = "closed";
    }
    // Published by the first result() before this tick is over (it knows the tokens), else right after.
    if (energyChannel.hasSubscribers) oweEnergy(this);
  }

  /** Tenants at the two edges (and, when watching, in between). Never rejects. */
  private async checkContention(watcher: ProcessWatcher, openEdge: Edge, closeEdge: Edge): Promise<void> {
    try {
      const [atOpen, atClose] = await Promise.all([
        this.openSnapshot ?? watcher.after(openEdge.tNs),
        watcher.after(closeEdge.tNs),
      ]);
      const seen = this.watchContention ? watcher.seenBetween(openEdge.tNs, closeEdge.tNs) : [];
      if (this.watchContention) watcher.unwatch();
      const byPid = new Map<number, ContendingProcess>();
      const unreadable: string[] = [];
      for (const [label, read] of [
        ["opening edge", atOpen],
        ...seen.map((r) => ["window", r] as const),
        ["closing edge", atClose],
      ] as const) {
        if (!read.ok) {
          if (label !== "window") unreadable.push(`at the ${label}: ${read.reason}`);
          continue;
        }
        for (const t of tenantsOf(this.node, read.processes)) if (!byPid.has(t.pid)) byPid.set(t.pid, t);
      }
      this.contendedBy = [...byPid.values()];
      if (unreadable.length > 0) {
        this.contentionUnchecked = `contention could not be checked ${unreadable.join("; ")}`;
      }
    } catch (error) {
      this.contentionUnchecked = `contention could not be checked: ${String(error)}`;
    }
  }

  /** What the track and the ledger measured over the window and each stage. No rule applied here. */
  private measureAll(concurrency: Concurrency): Outcome {
    const entries = this.entries as LedgerWindow;
    const last = entries.events.length - 1;
    const stages: Outcome["stages"][number][] = [];
    let from = 0;
    for (const mark of this.marks) {
      stages.push({
        name: mark.name,
        tokens: mark.tokens,
        ...this.measureSpan(from, mark.index, mark.concurrency),
      });
      from = mark.index;
    }
    // The total is measured over the whole window, never summed from stages.
    return { total: this.measureSpan(0, last, concurrency), stages };
  }

  /** One span between two of the window's ledger events: the card over it, and this window's share. */
  private measureSpan(fromIndex: number, toIndex: number, concurrency: Concurrency): SpanOutcome {
    const entries = this.entries as LedgerWindow;
    const from = (entries.events[fromIndex] as LedgerEvent).edge;
    const to = (entries.events[toIndex] as LedgerEvent).edge;
    const secs = seconds(from, to);
    const failure = this.syncFailure ?? this.notReady;
    if (failure !== null) return { measurement: fail(failure), seconds: secs, concurrency };
    const card = (this.track as Track).span(from, to);
    if (!card.ok || this.attribution === "exclusive")
      return { measurement: card, seconds: secs, concurrency };
    const share = (this.ledger as CardLedger).share(entries, fromIndex, toIndex);
    if (!share.ok) return { measurement: share, seconds: secs, concurrency };
    return {
      measurement: {
        ok: true,
        share: true,
        aboveJoules: share.aboveJoules,
        cardAboveJoules: aboveIdle(card.grossJoules, this.node.idleW, secs),
        uncertaintyJoules: share.uncertaintyJoules,
        samples: card.samples,
        maxGapMs: card.maxGapMs,
        caveat: card.caveat,
      },
      seconds: secs,
      concurrency,
    };
  }

  /** What the window cost. Call after close(). Cheap: the rules are applied to what close() read. */
  result(options?: ResultOptions): Energy {
    if (this.state !== "closed" || this.outcome === null) {
      throw new GiulError("WINDOW_STATE", `result(): the window is ${this.state}; await close() first`);
    }
    const tokens = checkTokens(
      "tokens",
      checkOptions<ResultOptions>("options", options, TOKEN_OPTIONS).tokens,
    );
    const stages: Record<string, Energy> = {};
    for (const stage of this.outcome.stages) {
      stages[stage.name] = charge(stage.measurement, this.chargeContext(stage, stage.tokens, NO_STAGES));
    }
    const energy = charge(
      this.outcome.total.measurement,
      this.chargeContext(this.outcome.total, tokens, stages),
    );
    if (claimEnergy(this)) {
      const events = (this.entries as LedgerWindow).events;
      const [first, last] = [events[0], events[events.length - 1]] as [LedgerEvent, LedgerEvent];
      publishEnergy(this, energy, first.edge.tNs, last.edge.tNs);
    }
    return energy;
  }

  /** The one builder of what the rules need besides the measurement. */
  private chargeContext(
    span: SpanOutcome,
    tokens: number | null,
    stages: Readonly<Record<string, Energy>>,
  ): ChargeContext {
    return {
      backend: this.selection?.backend ?? "none",
      seconds: span.seconds,
      idleW: this.node.idleW,
      tokens,
      joulesPer1kHint: this.hint,
      contendedBy: this.contendedBy,
      contentionUnchecked: this.contentionUnchecked,
      shared: this.node.servingMatch !== null,
      stages,
      attribution: this.attribution,
      concurrency: span.concurrency,
    };
  }

  /**
   * Opens a window, runs fn, closes the window (also when fn throws, then rethrows) and returns
   * fn's value with what it cost.
   */
  async measure<T>(
    fn: (meter: Meter) => Promise<T> | T,
    measureOptions?: MeasureOptions<T>,
  ): Promise<{ value: T; energy: Energy }> {
    if (typeof fn !== "function")
      throw optionError("fn", `measure() needs a function, got ${describeValue(fn)}`);
    const options = checkOptions<MeasureOptions<T>>("options", measureOptions, TOKEN_OPTIONS);
    await this.open();
    let value: T;
    try {
      value = await fn(this);
    } finally {
      await this.close();
    }
    const tokens = typeof options.tokens === "function" ? (options.tokens(value) ?? null) : options.tokens;
    return { value, energy: this.result({ tokens: tokens ?? null }) };
  }

  /** `await using m = await Meter.forNode(node).open()` closes the window at the end of the block. */
  async [asyncDispose](): Promise<void> {
    if (this.state === "open" || this.state === "closing") await this.close();
  }
}

function seconds(from: Edge, to: Edge): number {
  return Number(to.tNs - from.tNs) / 1e9;
}
