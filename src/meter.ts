import type { Edge, Track } from "./backends/track.js";
import { type ProcessWatcher, tenantsOf, watcherFor } from "./contention.js";
import { debug } from "./debug.js";
import { charge, type Energy } from "./energy.js";
import { GiulError } from "./errors.js";
import type { BackendName, ContendingProcess, ProcessRead, SpanMeasurement } from "./measurement.js";
import { type Node, type ResolvedNode, resolveNode } from "./node.js";
import { forcedBackend, knownForcedFailure, type Selection, select } from "./select/index.js";

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
}

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
  readonly edge: Edge;
  readonly tokens: number | null;
}

interface Outcome {
  readonly total: SpanMeasurement;
  readonly stages: readonly {
    name: string;
    measurement: SpanMeasurement;
    seconds: number;
    tokens: number | null;
  }[];
  readonly seconds: number;
}

const asyncDispose: typeof Symbol.asyncDispose =
  Symbol.asyncDispose ?? (Symbol.for("nodejs.asyncDispose") as typeof Symbol.asyncDispose);

const resolvedNodes = new WeakMap<Node, ResolvedNode>();

/**
 * A window opened and never closed (a caller's bug) must not keep its card's sampler, or its
 * contention watch, running for the life of the process: when the Meter is collected, what it
 * held is released. The cleanup holds the track and watcher, never the Meter.
 */
const abandoned = new FinalizationRegistry<() => void>((release) => release());
const NO_STAGES: Readonly<Record<string, Energy>> = Object.freeze({});

function optionError(field: string, message: string): GiulError {
  return new GiulError("INVALID_OPTION", `${field}: ${message}`, { field });
}

function checkTokens(field: string, tokens: unknown): number | null {
  if (tokens === undefined || tokens === null) return null;
  if (typeof tokens !== "number" || !Number.isFinite(tokens) || tokens < 0) {
    throw optionError(field, `expected a finite number ≥ 0, got ${String(tokens)}`);
  }
  return tokens;
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
  private state: State = "new";
  private watcher: ProcessWatcher | null = null;
  private openSnapshot: Promise<ProcessRead> | null = null;
  private contendedBy: readonly ContendingProcess[] | null = null;
  private contentionUnchecked: string | null = null;
  private selection: Selection | null = null;
  private track: Track | null = null;
  private openEdge: Edge | null = null;
  private closeEdge: Edge | null = null;
  private readonly marks: StageMark[] = [];
  private notReady: string | null = null;
  private syncFailure: string | null = null;
  private closing: Promise<void> | null = null;
  private outcome: Outcome | null = null;

  private constructor(node: ResolvedNode, options: MeterOptions, forced: BackendName | null) {
    this.node = node;
    const hint = options.joulesPer1kHint ?? null;
    if (hint !== null && (typeof hint !== "number" || !Number.isFinite(hint) || hint < 0)) {
      throw optionError(
        "joulesPer1kHint",
        `expected a finite number ≥ 0 (J per 1,000 tokens), got ${String(hint)}`,
      );
    }
    this.hint = hint;
    const sync = options.sync ?? null;
    if (sync !== null && typeof sync !== "function") {
      throw optionError("sync", `expected a function (sync or async), got ${typeof sync}`);
    }
    this.sync = sync;
    const periodMs = options.periodMs ?? 10;
    if (typeof periodMs !== "number" || !Number.isInteger(periodMs) || periodMs < 1 || periodMs > 1000) {
      throw optionError("periodMs", `expected an integer from 1 to 1000, got ${String(periodMs)}`);
    }
    this.periodMs = periodMs;
    const watch = options.watchContention ?? false;
    if (typeof watch !== "boolean")
      throw optionError("watchContention", `expected a boolean, got ${typeof watch}`);
    this.watchContention = watch;
    this.forced = forced;
  }

  /** A window on `node`'s card. Validates the node and options at once (throws GiulError). */
  static forNode(node: Node, options: MeterOptions = {}): Meter {
    let resolved = typeof node === "object" && node !== null ? resolvedNodes.get(node) : undefined;
    if (resolved === undefined) {
      resolved = resolveNode(node);
      if (Object.isFrozen(node)) resolvedNodes.set(node, resolved);
    }
    if (options === null || typeof options !== "object") {
      throw optionError("options", `expected an object, got ${String(options)}`);
    }
    const forced = forcedBackend();
    if (forced !== null) {
      const failure = knownForcedFailure(resolved, forced);
      if (failure !== null) throw new GiulError("BACKEND_UNAVAILABLE", failure, { field: "GIUL_BACKEND" });
    }
    return new Meter(resolved, options, forced);
  }

  /** The backend metering this window (known once open() has resolved). */
  get backend(): BackendName | null {
    return this.selection?.backend ?? null;
  }

  /**
   * CLOCK_MONOTONIC ns (the clock of `process.hrtime.bigint()`) of the window's edges: to line a
   * window up with traces, or to check a figure against another meter over the same instants.
   */
  edgeTimes(): { open: bigint | null; marks: { name: string; tNs: bigint }[]; close: bigint | null } {
    return {
      open: this.openEdge?.tNs ?? null,
      marks: this.marks.map((m) => ({ name: m.name, tNs: m.edge.tNs })),
      close: this.closeEdge?.tNs ?? null,
    };
  }

  /** Opens the window: the opening edge is taken when this resolves. Never rejects for the card's sake. */
  async open(): Promise<this> {
    if (this.state !== "new")
      throw new GiulError("WINDOW_STATE", `open(): the window is already ${this.state}`);
    this.state = "opening";
    try {
      this.selection = await select(this.node, this.forced);
      const track = this.selection.track;
      if (track !== null) {
        track.retain(this.periodMs);
        this.track = track;
        const ready = await track.ready();
        this.notReady = ready.ok ? null : ready.reason;
      }
    } catch (error) {
      // select() and ready() never reject; this is belt and braces for the caller's sake.
      this.notReady = `opening the window failed: ${String(error)}`;
      debug("open failed: %s", String(error));
    }
    const forcedUnavailable = this.selection?.forcedUnavailable;
    if (forcedUnavailable !== undefined) {
      // A diagnosis override that cannot work is a configuration error: say so, never fall back.
      this.state = "new";
      throw new GiulError("BACKEND_UNAVAILABLE", forcedUnavailable, { field: "GIUL_BACKEND" });
    }
    this.openEdge = this.track ? this.track.edge() : { tNs: process.hrtime.bigint() };
    if (this.node.servingMatch !== null) {
      // A shared card: witness who is resident at this edge (coalesced with every other window).
      const reader = this.selection?.reader ?? null;
      if (reader !== null) {
        this.watcher = watcherFor(reader, this.node.contentionIntervalMs);
        this.openSnapshot = this.watcher.after(this.openEdge.tNs);
        if (this.watchContention) this.watcher.watch();
      } else {
        this.contentionUnchecked = `contention could not be checked: the ${this.selection?.backend ?? "none"} backend cannot read the card's processes`;
      }
    }
    const heldTrack = this.track;
    const heldWatch = this.watchContention ? this.watcher : null;
    if (heldTrack !== null || heldWatch !== null) {
      abandoned.register(
        this,
        () => {
          heldTrack?.release();
          heldWatch?.unwatch();
        },
        this,
      );
    }
    this.state = "open";
    return this;
  }

  /**
   * Ends the current stage, naming it, and starts the next. The total is never the sum of stages:
   * time after the last mark still counts in the total.
   */
  mark(name: string, options: MarkOptions = {}): void {
    if (this.state !== "open") {
      throw new GiulError(
        "WINDOW_STATE",
        `mark(${JSON.stringify(name)}): the window is ${this.state}, not open`,
      );
    }
    if (typeof name !== "string" || name.length === 0) {
      throw optionError("name", `mark() needs a non-empty stage name, got ${String(name)}`);
    }
    if (this.marks.some((m) => m.name === name)) {
      throw optionError("name", `stage ${JSON.stringify(name)} was already marked in this window`);
    }
    const tokens = checkTokens("tokens", options.tokens);
    const edge = this.track ? this.track.edge() : { tNs: process.hrtime.bigint() };
    this.marks.push({ name, edge, tokens });
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

  private async finish(): Promise<void> {
    if (this.sync) {
      try {
        await this.sync();
      } catch (error) {
        this.syncFailure = `the sync hook failed, so the card's work may not be finished: ${String(error)}`;
      }
    }
    abandoned.unregister(this);
    const track = this.track;
    const closeEdge = track ? track.edge() : { tNs: process.hrtime.bigint() };
    this.closeEdge = closeEdge;
    const openEdge = this.openEdge as Edge;
    const contention = this.watcher ? this.checkContention(this.watcher, openEdge, closeEdge) : null;
    try {
      if (track) await track.settle([openEdge, ...this.marks.map((m) => m.edge), closeEdge]);
      if (contention) await contention;
      this.outcome = this.evaluate(track, openEdge, closeEdge);
    } catch (error) {
      const reason = `evaluating the window failed: ${String(error)}`;
      this.outcome = { total: { ok: false, reason }, stages: [], seconds: seconds(openEdge, closeEdge) };
    } finally {
      track?.release();
      this.state = "closed";
    }
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

  private evaluate(track: Track | null, openEdge: Edge, closeEdge: Edge): Outcome {
    const failure =
      this.syncFailure ?? this.notReady ?? (track ? null : (this.selection?.reason ?? "no backend"));
    const measure = (from: Edge, to: Edge): SpanMeasurement =>
      failure !== null || track === null
        ? { ok: false, reason: failure ?? "no backend" }
        : track.span(from, to);
    const stages: Outcome["stages"][number][] = [];
    let from = openEdge;
    for (const mark of this.marks) {
      stages.push({
        name: mark.name,
        measurement: measure(from, mark.edge),
        seconds: seconds(from, mark.edge),
        tokens: mark.tokens,
      });
      from = mark.edge;
    }
    // The total is measured over the whole window, never summed from stages.
    return { total: measure(openEdge, closeEdge), stages, seconds: seconds(openEdge, closeEdge) };
  }

  /** What the window cost. Call after close(). Cheap: the rules are applied to what close() read. */
  result(options: ResultOptions = {}): Energy {
    if (this.state !== "closed" || this.outcome === null) {
      throw new GiulError("WINDOW_STATE", `result(): the window is ${this.state}; await close() first`);
    }
    const tokens = checkTokens("tokens", options.tokens);
    const backend = this.selection?.backend ?? "none";
    const idleW = this.node.idleW;
    const hint = this.hint;
    const stages: Record<string, Energy> = {};
    for (const stage of this.outcome.stages) {
      stages[stage.name] = charge(stage.measurement, {
        backend,
        seconds: stage.seconds,
        idleW,
        tokens: stage.tokens,
        joulesPer1kHint: hint,
        contendedBy: this.contendedBy,
        contentionUnchecked: this.contentionUnchecked,
        shared: this.node.servingMatch !== null,
        stages: NO_STAGES,
      });
    }
    return charge(this.outcome.total, {
      backend,
      seconds: this.outcome.seconds,
      idleW,
      tokens,
      joulesPer1kHint: hint,
      contendedBy: this.contendedBy,
      contentionUnchecked: this.contentionUnchecked,
      shared: this.node.servingMatch !== null,
      stages,
    });
  }

  /**
   * Opens a window, runs fn, closes the window (also when fn throws, then rethrows) and returns
   * fn's value with what it cost.
   */
  async measure<T>(
    fn: (meter: Meter) => Promise<T> | T,
    options: MeasureOptions<T> = {},
  ): Promise<{ value: T; energy: Energy }> {
    if (typeof fn !== "function") throw optionError("fn", `measure() needs a function, got ${typeof fn}`);
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
