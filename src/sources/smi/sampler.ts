/**
 * The smi_sampler's engine: one long-lived `nvidia-smi --query-gpu=… -lms <period>` child per
 * process (run by a {@link Supervisor}), shared by every card, its rows placed in time
 * ({@link RowPlacer}) and written into each card's {@link JsRing}. See ./descriptor.ts for the backend.
 */

import { JsRing } from "../../ring/js-ring.js";
import type { SampleRing } from "../../track/ring.js";
import { debug } from "../../vocabulary/debug.js";
import { fail, ok, type Result } from "../../vocabulary/measurement.js";
import { RowPlacer } from "./clock.js";
import { COUNTER_OF, type SmiCounters, type SmiDiagnostics, zeroCounters } from "./diagnostics.js";
import {
  choosePower,
  describeSmiError,
  MAX_LINE,
  parseLine,
  SMI_ERROR,
  type SmiErrorCode,
  type SmiLine,
  type SmiPower,
  type SmiQuery,
  smiArgs,
} from "./parse.js";
import { findNvidiaSmi } from "./path.js";
import { type ChildEnd, type ChildEvents, type SupervisedChild, Supervisor } from "./supervisor.js";

export interface SmiSamplerOptions {
  /** The nvidia-smi to run. Default: {@link findNvidiaSmi} of `env` (GIUL_NVIDIA_SMI, else PATH), at each start. */
  readonly path?: string;
  /** The child's environment, read at each start. Default: process.env (passed through). */
  readonly env?: NodeJS.ProcessEnv;
  /** CLOCK_MONOTONIC ns. Default: process.hrtime.bigint. */
  readonly clock?: () => bigint;
  /** The shortest loop period asked of nvidia-smi (ms). Default 50. */
  readonly minPeriodMs?: number;
  /** First restart delay after the child dies (ms), doubled per death in a row. Default 250. */
  readonly restartBaseMs?: number;
  /** Longest restart delay (ms). Default 30 000. */
  readonly restartMaxMs?: number;
  /** A child that prints nothing this long is stopped and restarted (ms). Default max(5 s, 20 periods). */
  readonly stallMs?: number;
  /** Run nvidia-smi under the /bin/sh watchdog. Default: where /bin/sh exists (not on Windows). */
  readonly watchdog?: boolean;
}

/** A child that lived this long before dying resets the backoff. */
const HEALTHY_MS = 10_000;
/** Until a card's first reading its ring reports at least this period, so that waits cover start-up. */
const STARTUP_PERIOD_MS = 250;
/** nvidia-smi's first output can take seconds (NVML initialisation without persistence mode). */
const FIRST_OUTPUT_MS = 15_000;
/** Bad rows before a card's first reading after which its windows are told why. */
const BAD_BEFORE_GOOD = 3;
type Role = "active" | "next" | "retired";

/** What the sampler keeps about one nvidia-smi child (the supervisor keeps the process). */
interface ChildState {
  readonly query: SmiQuery;
  readonly periodMs: number;
  role: Role;
  /** Index of the last row seen (-1: none), to tell iterations apart. */
  lastIndex: number;
  /** Iterations of the loop seen before the current one. */
  iteration: number;
  /** The iteration and time of the last row placed by its timestamp, or null. */
  lastStamped: { iteration: number; t: bigint } | null;
  rows: number;
  /** The first line of text that was not a row (the tool's own message). */
  message: string | null;
  invalidField: boolean;
  /** The indices of the first complete iteration (the cards nvidia-smi lists), or null. */
  listed: Set<number> | null;
  /** Indices seen in the iteration under way. */
  readonly seen: Set<number>;
}

type Child = SupervisedChild<ChildState>;

interface Card {
  readonly index: number;
  readonly ring: JsRing;
  /** Period asked by each open source (ms). */
  readonly requests: Map<object, number>;
  power: SmiPower | null;
  readings: number;
  badBeforeGood: number;
}

/**
 * One nvidia-smi child serving every card of the host. Cards are opened and closed by their
 * sources ({@link smiTrack}); the child runs while any card is open.
 */
export class SmiSampler {
  private readonly options: SmiSamplerOptions;
  private readonly clock: () => bigint;
  private readonly supervisor: Supervisor<ChildState>;
  private readonly cards = new Map<number, Card>();
  private active: Child | null = null;
  private next: Child | null = null;
  private query: SmiQuery = "instant";
  private lastStop: string | null = null;
  private lastPath: string | null = null;
  readonly counters: SmiCounters = zeroCounters();
  private readonly place = new RowPlacer(this.counters);
  private readonly events: ChildEvents<ChildState> = {
    lines: (child, lines, arrival, overlong) => this.onLines(child, lines, arrival, overlong),
    exit: (child, end) => this.onExit(child, end),
    stallLimitMs: (child) => this.stallLimitMs(child),
    stalled: () => {
      this.counters.stalls += 1;
    },
  };

  constructor(options: SmiSamplerOptions = {}) {
    this.options = options;
    this.clock = options.clock ?? process.hrtime.bigint;
    this.supervisor = new Supervisor({
      name: "nvidia-smi",
      watchdog: options.watchdog,
      watchdogName: "giul-smi-watchdog",
      restartBaseMs: options.restartBaseMs ?? 250,
      restartMaxMs: options.restartMaxMs ?? 30_000,
      healthyMs: HEALTHY_MS,
      maxLine: MAX_LINE,
      clock: this.clock,
    });
  }

  private get env(): NodeJS.ProcessEnv {
    return this.options.env ?? process.env;
  }

  /** The nvidia-smi to run, or why there is none. */
  resolvePath(): { path: string; reason: null } | { path: null; reason: string } {
    if (this.options.path !== undefined) return { path: this.options.path, reason: null };
    const found = findNvidiaSmi(this.env);
    return found.path !== null
      ? { path: found.path, reason: null }
      : { path: null, reason: found.reason ?? "" };
  }

  /**
   * A source opens card `index` asking for a period (ms): its ring, or why it cannot be read.
   * `owner` identifies the source (its requests are kept apart from other sources').
   */
  open(index: number, periodMs: number, owner: object): Result<SampleRing> {
    const where = this.resolvePath();
    if (where.path === null) return fail(`cannot run nvidia-smi: ${where.reason}`);
    let card = this.cards.get(index);
    if (card === undefined) {
      card = {
        index,
        ring: new JsRing({
          epochNs: this.clock(),
          periodNs: Math.max(this.effectivePeriod(periodMs), STARTUP_PERIOD_MS) * 1e6,
        }),
        requests: new Map(),
        power: null,
        readings: 0,
        badBeforeGood: 0,
      };
      this.cards.set(index, card);
    }
    card.requests.set(owner, periodMs);
    if (this.supervisor.restartPending && this.lastStop !== null) card.ring.fail(this.waitingReason());
    if (this.active !== null) this.checkListed(this.active);
    this.ensureRunning();
    return ok(card.ring);
  }

  /** A source asks for a (shorter) period. */
  setPeriod(index: number, periodMs: number, owner: object): void {
    const card = this.cards.get(index);
    if (card === undefined || !card.requests.has(owner)) return;
    card.requests.set(owner, periodMs);
    this.ensureRunning();
  }

  /** A source closes card `index`; the child stops with the last card. */
  close(index: number, owner: object): void {
    const card = this.cards.get(index);
    if (card === undefined) return;
    card.requests.delete(owner);
    if (card.requests.size > 0) return;
    this.cards.delete(index);
    if (this.cards.size === 0) this.stopAll();
  }

  /** The column card `index` reads, or null before its first reading. */
  powerOf(index: number): SmiPower | null {
    return this.cards.get(index)?.power ?? null;
  }

  describeError(code: number): string {
    if (code === SMI_ERROR.EXITED) return `nvidia-smi stopped (${this.lastStop ?? "no reason recorded"})`;
    return describeSmiError(code);
  }

  diagnostics(): SmiDiagnostics {
    const child = this.active;
    return {
      path: this.lastPath ?? this.resolvePath().path,
      running: child !== null && !child.exited,
      pid: child?.proc.pid ?? null,
      periodMs: child?.state.periodMs ?? null,
      query: this.query,
      lastStop: this.lastStop,
      failures: this.supervisor.failures,
      restartInMs: this.supervisor.restartPending ? this.supervisor.pendingDelayMs : null,
      counters: { ...this.counters },
      cards: [...this.cards.values()].map((c) => ({ index: c.index, power: c.power, readings: c.readings })),
    };
  }

  private effectivePeriod(requested: number): number {
    return Math.max(this.options.minPeriodMs ?? 50, Math.round(requested));
  }

  private desiredPeriod(): number {
    let shortest = Number.POSITIVE_INFINITY;
    for (const card of this.cards.values())
      for (const p of card.requests.values()) shortest = Math.min(shortest, p);
    return this.effectivePeriod(Number.isFinite(shortest) ? shortest : 1000);
  }

  private ensureRunning(): void {
    if (this.cards.size === 0 || this.supervisor.restartPending) return;
    const period = this.desiredPeriod();
    if (this.active === null) {
      if (this.next !== null) return;
      this.start("active", period);
    } else if (period < this.active.state.periodMs && this.next === null) {
      // A shorter period needs a new child: it takes over at its first row, so no gap opens.
      this.start("next", period);
    }
  }

  private start(role: Role, periodMs: number): void {
    const where = this.resolvePath();
    if (where.path === null) {
      this.lastStop = `cannot run nvidia-smi: ${where.reason}`;
      this.scheduleRestart();
      return;
    }
    this.lastPath = where.path;
    const args = smiArgs(this.query, periodMs);
    const state: ChildState = {
      query: this.query,
      periodMs,
      role,
      lastIndex: -1,
      iteration: 0,
      lastStamped: null,
      rows: 0,
      message: null,
      invalidField: false,
      listed: null,
      seen: new Set(),
    };
    const spawned = this.supervisor.spawn(where.path, args, this.env, state, this.events);
    if (!spawned.ok) {
      this.lastStop = spawned.reason;
      this.scheduleRestart();
      return;
    }
    const child = spawned.value;
    this.counters.starts += 1;
    if (role === "active") this.active = child;
    else this.next = child;
    debug("smi: started %s %s (pid %d, %s)", where.path, args.join(" "), child.proc.pid ?? -1, role);
  }

  /** How long the active child may print nothing (its first output can take seconds); others: unwatched. */
  private stallLimitMs(child: Child): number | null {
    if (child !== this.active) return null;
    const limit = this.options.stallMs ?? Math.max(5_000, 20 * child.state.periodMs);
    return child.state.rows === 0 ? Math.max(limit, FIRST_OUTPUT_MS) : limit;
  }

  /** A child that is being replaced or stopped: its output is no longer read, and it is asked to end. */
  private retire(child: Child): void {
    child.state.role = "retired";
    child.muted = true;
    child.stop();
  }

  /** Stops the child and forgets every card (their tracks then fail their windows). */
  shutdown(): void {
    for (const card of this.cards.values()) card.ring.fail("the nvidia-smi sampler was shut down");
    this.cards.clear();
    this.stopAll();
  }

  private stopAll(): void {
    this.supervisor.reset();
    for (const child of [this.active, this.next]) if (child !== null) this.retire(child);
    this.active = null;
    this.next = null;
  }

  private onLines(child: Child, lines: string[], arrival: bigint, overlong: number): void {
    this.counters.overlong += overlong;
    const parsed: SmiLine[] = lines.map((l) => parseLine(l, child.state.query));

    // Which iteration of the loop each row belongs to: a new one starts when the index does not
    // increase (nvidia-smi prints the cards in index order).
    const iteration: number[] = new Array(parsed.length).fill(child.state.iteration);
    const starts: boolean[] = new Array(parsed.length).fill(false);
    for (let i = 0; i < parsed.length; i++) {
      const line = parsed[i] as SmiLine;
      const index = line.kind === "row" ? line.index : line.kind === "malformed" ? line.index : null;
      if (index === null) continue;
      if (child.state.lastIndex < 0) starts[i] = true;
      else if (index <= child.state.lastIndex) {
        child.state.iteration += 1;
        starts[i] = true;
        if (child.state.listed === null) {
          child.state.listed = new Set(child.state.seen);
          this.checkListed(child);
        }
      }
      child.state.seen.add(index);
      child.state.lastIndex = index;
      iteration[i] = child.state.iteration;
    }
    if (child.state.role === "next" && parsed.some((l) => l.kind === "row")) this.promote(child);
    const periodNs = BigInt(child.state.periodMs) * 1_000_000n;

    for (let i = 0; i < parsed.length; i++) {
      const line = parsed[i] as SmiLine;
      switch (line.kind) {
        case "blank":
          this.counters.blank += 1;
          break;
        case "header":
          this.counters.headers += 1;
          break;
        case "invalid-field":
          this.counters.invalidField += 1;
          child.state.invalidField = true;
          break;
        case "message":
          this.counters.messages += 1;
          child.state.message ??= line.text;
          break;
        case "malformed": {
          this.counters.malformed += 1;
          const card = line.index === null ? undefined : this.cards.get(line.index);
          if (card !== undefined) {
            const it = iteration[i] ?? child.state.iteration;
            const t = this.place.unstamped(child.state, arrival, it, periodNs);
            this.bad(card, t, SMI_ERROR.MALFORMED, line.text, false);
          }
          break;
        }
        case "row": {
          this.counters.rows += 1;
          child.state.rows += 1;
          const card = this.cards.get(line.index);
          if (card === undefined) break;
          const it = iteration[i] ?? child.state.iteration;
          const t = this.place.row(child.state, line.stamp, arrival, it, starts[i] === true, periodNs);
          if (child.state.query === "averaged") card.power = "averaged";
          else card.power ??= choosePower(line);
          const cell = card.power === "averaged" ? line.average : (line.instant ?? line.average);
          if (cell.ok) this.good(card, t, cell.watts, child.state.periodMs);
          else this.bad(card, t, cell.code, cell.text, true);
          break;
        }
      }
    }
  }

  /** Cards that nvidia-smi does not list are told so at once rather than left to time out. */
  private checkListed(child: Child): void {
    const listed = child.state.listed;
    if (listed === null || child.state.role === "retired") return;
    for (const card of this.cards.values()) {
      if (listed.has(card.index)) continue;
      const which = [...listed].sort((a, b) => a - b).join(", ");
      card.ring.fail(`nvidia-smi lists no GPU ${card.index} (it lists ${which || "none"})`);
    }
  }

  private promote(child: Child): void {
    const old = this.active;
    this.active = child;
    this.next = null;
    child.state.role = "active";
    if (old !== null) this.retire(old);
    for (const card of this.cards.values()) card.ring.setPeriodNs(child.state.periodMs * 1e6);
  }

  private good(card: Card, t: bigint, watts: number, periodMs: number): void {
    card.ring.push(t, Number.NaN, watts * 1000, 0);
    card.readings += 1;
    card.badBeforeGood = 0;
    this.counters.readings += 1;
    if (card.readings === 1 || card.ring.failure() !== null) {
      card.ring.fail(null);
      card.ring.setPeriodNs(periodMs * 1e6);
    }
  }

  private bad(card: Card, t: bigint, code: SmiErrorCode, text: string, count: boolean): void {
    const counter = COUNTER_OF[code];
    if (count && counter !== undefined) this.counters[counter] += 1;
    if (card.readings > 0) {
      card.ring.push(t, Number.NaN, Number.NaN, code);
      return;
    }
    // Nothing read yet: no sample (an edge before the first reading fails as such), but say why.
    card.badBeforeGood += 1;
    if (card.badBeforeGood >= BAD_BEFORE_GOOD) {
      card.ring.fail(`nvidia-smi prints ${text || "nothing"} instead of GPU ${card.index}'s power`);
    }
  }

  private onExit(child: Child, end: ChildEnd): void {
    if (end.truncated) this.counters.truncated += 1;
    if (child.state.role === "retired") return;
    this.counters.exits += 1;
    const reason = this.supervisor.describeExit(child, end, child.state.message);
    debug("smi: %s", reason);
    if (child.state.role === "next") {
      // The faster child failed before taking over: keep the running one.
      this.next = null;
      return;
    }
    this.active = null;
    this.lastStop = reason;
    if (this.cards.size === 0) return;
    if (this.next !== null) {
      this.promote(this.next);
      this.openGaps();
      return;
    }
    this.openGaps();
    if (child.state.invalidField && child.state.query === "instant") {
      // The driver predates power.draw.instant: ask for power.draw alone, at once.
      this.query = "averaged";
      this.ensureRunning();
      return;
    }
    this.supervisor.forgiveIfHealthy(child, child.state.rows > 0);
    this.scheduleRestart();
  }

  /** Every card that has readings gets a fault sample now: the child's death is a gap. */
  private openGaps(): void {
    const t = this.place.arrived(this.clock());
    for (const card of this.cards.values()) {
      if (card.readings === 0 || card.ring.gapOpen()) continue;
      card.ring.push(t, Number.NaN, Number.NaN, SMI_ERROR.EXITED);
    }
  }

  private waitingReason(): string {
    return `${this.lastStop ?? "nvidia-smi stopped"}; restarting it with backoff`;
  }

  private scheduleRestart(): void {
    if (this.supervisor.restartPending || this.cards.size === 0) return;
    const delay = this.supervisor.scheduleRestart(() => this.ensureRunning());
    const why = `${this.lastStop ?? "nvidia-smi stopped"}; restarting it in ${delay} ms`;
    for (const card of this.cards.values()) {
      card.ring.fail(why);
      card.ring.setPeriodNs(Math.max(card.ring.periodNs(), STARTUP_PERIOD_MS * 1e6));
    }
  }
}
