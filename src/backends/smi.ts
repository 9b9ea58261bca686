/**
 * The `smi_sampler` backend: power read by one long-lived `nvidia-smi --query-gpu=… -lms <period>`
 * child per process, shared by every window on every card, for hosts where the addon or NVML
 * cannot be used. It only produces samples: each card's readings go into a {@link JsRing}, and the
 * window arithmetic is RingTrack's, the same code as the native sampler's (column "integral").
 *
 * The child
 * - starts when the first window opens (first `retain`) and stops when the last card's track
 *   closes its source (RingTrack keeps a source open a while after the last window);
 * - never keeps the process alive (the child and its pipes are unref'd);
 * - never outlives the process, even after SIGKILL: it runs under a small `/bin/sh` watchdog
 *   that waits for end-of-file on its stdin, a pipe only this process holds open; when the
 *   process dies, the kernel closes it and the watchdog stops nvidia-smi at once (TERM, then
 *   KILL after a second). nvidia-smi would also die of SIGPIPE on its next write, but a tool
 *   stuck in a driver call writes nothing, hence the watchdog. Without /bin/sh (Windows) only
 *   the broken pipe and an exit handler remain.
 * - is restarted with exponential backoff when it dies; nvidia-smi that prints nothing for a
 *   while is stopped and restarted.
 *
 * Readings. `power.draw.instant` is queried where the driver knows the field (R535+), with
 * `power.draw` beside it; a driver that rejects the field gets `index,power.draw` only. Each card
 * uses the column that has a number on its first row: instantaneous power if it answers, else
 * `power.draw` (a one-second average on Ampere and newer: RingSource.averagedPower, which puts the
 * caveat on the Energy record). A token (`[N/A]`, `[GPU is lost]`, …), a garbled row, or the child
 * dying is never a reading: the card's ring gets a sample with NaN power and an error code, which
 * JsRing counts as a fault (READ_FAILED) and across which its integral does not bridge (JsRing
 * also closes the gap, so that an edge taken inside it sees the fault). A window over a gap fails
 * with the reason ("a read failed: nvidia-smi printed [GPU is lost]", "nvidia-smi stopped
 * (exited with code 9: NVIDIA-SMI has failed because …)").
 *
 * Timestamps. A row is placed at the instant nvidia-smi took the reading, not when this process
 * got to read it ({@link SmiClock}, ./smi-clock.ts, maps nvidia-smi's own timestamp onto
 * CLOCK_MONOTONIC).
 *
 * A row without a usable timestamp (a replayed capture, `[N/A]`, garbage) falls back: placed on
 * the period grid after the last row that had one (never after its arrival), or with none, at its
 * arrival, with bunching corrected: when several iterations arrive in one chunk, iteration j of n
 * is stamped (n − 1 − j) periods before the arrival, so the samples keep their spacing instead of
 * piling up on one instant. The times written into a ring never go back.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { Backoff } from "../backoff.js";
import { debug } from "../debug.js";
import { fail, ok, type Result } from "../measurement.js";
import { JsRing } from "./js-ring.js";
import type { RingSource, SampleRing } from "./ring.js";
import { RingTrack } from "./ring-track.js";
import { SmiClock } from "./smi-clock.js";
import {
  choosePower,
  describeSmiError,
  LineSplitter,
  parseLine,
  SMI_ERROR,
  type SmiErrorCode,
  type SmiLine,
  type SmiPower,
  type SmiQuery,
  smiArgs,
} from "./smi-parse.js";
import { findNvidiaSmi } from "./smi-path.js";

export { querySmiOnce, type SmiPower, type SmiProbe, type SmiProbeDevice } from "./smi-parse.js";

/** What the sampler counted since it was made (for diagnostics and tests). */
export interface SmiCounters {
  /** Card rows parsed (of any card, watched or not). */
  rows: number;
  /** Readings written into a card's ring. */
  readings: number;
  /** Rows whose power was a token or garbled, by kind. */
  notAvailable: number;
  notSupported: number;
  unknownError: number;
  gpuLost: number;
  resetRequired: number;
  noPermission: number;
  otherToken: number;
  malformed: number;
  /** A line cut off by the child's exit. */
  truncated: number;
  /** Lines longer than any nvidia-smi row (dropped). */
  overlong: number;
  blank: number;
  headers: number;
  /** Lines of text that are not rows (a driver failure message, say). */
  messages: number;
  /** `Field "power.draw.instant" is not a valid field to query.` */
  invalidField: number;
  /** Children started, and those that ended without being asked to. */
  starts: number;
  exits: number;
  /** Children stopped for printing nothing for too long. */
  stalls: number;
  /** Rows placed by nvidia-smi's own timestamp, and those placed without one (missing or bad). */
  stamped: number;
  unstamped: number;
  /** Rows whose timestamp did not parse. */
  badStamps: number;
  /** Steps of the wall clock seen in the timestamps (the offset estimate restarted). */
  clockSteps: number;
}

export interface SmiCardDiagnostics {
  readonly index: number;
  /** The column this card's readings come from, or null before its first reading. */
  readonly power: SmiPower | null;
  readonly readings: number;
}

export interface SmiDiagnostics {
  /** The nvidia-smi run (or to be run), or null when none is found. */
  readonly path: string | null;
  readonly running: boolean;
  /** The pid of the child (the watchdog shell where there is one). */
  readonly pid: number | null;
  /** The child's loop period (ms), or null. */
  readonly periodMs: number | null;
  /** The query in use: with `power.draw.instant`, or `power.draw` only (an older driver). */
  readonly query: SmiQuery;
  /** Why the last child stopped, or null. */
  readonly lastStop: string | null;
  /** Deaths in a row (the backoff exponent). */
  readonly failures: number;
  /** The delay of the restart now pending (ms), or null. */
  readonly restartInMs: number | null;
  readonly counters: Readonly<SmiCounters>;
  readonly cards: readonly SmiCardDiagnostics[];
}

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
/** Iterations after the last stamped row for which an unstamped row is placed on its grid. */
const GRID_ITERATIONS = 5;
/**
 * The watchdog: runs nvidia-smi in the background and stops it as soon as its own stdin (a pipe
 * whose only writer is this process) reaches end-of-file, i.e. when this process closes it or
 * dies. Exits with nvidia-smi's status.
 */
const WATCHDOG = [
  "exec 3<&0",
  '"$@" </dev/null 3<&- &',
  "c=$!",
  '{ while read -r line; do :; done; kill -TERM "$c" 2>/dev/null; sleep 1; kill -KILL "$c" 2>/dev/null; } <&3 >/dev/null 2>&1 &',
  "w=$!",
  "exec 3<&-",
  'wait "$c"',
  "s=$?",
  'kill "$w" 2>/dev/null',
  'exit "$s"',
].join("\n");

type Role = "active" | "next" | "retired";

interface Child {
  readonly proc: ChildProcess;
  readonly query: SmiQuery;
  readonly periodMs: number;
  readonly splitter: LineSplitter;
  readonly startedAt: number;
  role: Role;
  lastOutputAt: number;
  /** Index of the last row seen (-1: none), to tell iterations apart. */
  lastIndex: number;
  /** Iterations of the loop seen before the current one. */
  iteration: number;
  /** The iteration and time of the last row placed by its timestamp, or null. */
  lastStamped: { iteration: number; t: bigint } | null;
  rows: number;
  /** The first line of text that was not a row (the tool's own message). */
  message: string | null;
  stderr: string;
  invalidField: boolean;
  stalled: string | null;
  /** The indices of the first complete iteration (the cards nvidia-smi lists), or null. */
  listed: Set<number> | null;
  /** Indices seen in the iteration under way. */
  readonly seen: Set<number>;
  exited: boolean;
  killTimer: NodeJS.Timeout | null;
}

interface Card {
  readonly index: number;
  readonly ring: JsRing;
  /** Period asked by each open source (ms). */
  readonly requests: Map<object, number>;
  power: SmiPower | null;
  readings: number;
  badBeforeGood: number;
}

function zeroCounters(): SmiCounters {
  return {
    rows: 0,
    readings: 0,
    notAvailable: 0,
    notSupported: 0,
    unknownError: 0,
    gpuLost: 0,
    resetRequired: 0,
    noPermission: 0,
    otherToken: 0,
    malformed: 0,
    truncated: 0,
    overlong: 0,
    blank: 0,
    headers: 0,
    messages: 0,
    invalidField: 0,
    starts: 0,
    exits: 0,
    stalls: 0,
    stamped: 0,
    unstamped: 0,
    badStamps: 0,
    clockSteps: 0,
  };
}

const COUNTER_OF: Readonly<Record<number, keyof SmiCounters>> = {
  [SMI_ERROR.NOT_AVAILABLE]: "notAvailable",
  [SMI_ERROR.NOT_SUPPORTED]: "notSupported",
  [SMI_ERROR.UNKNOWN_ERROR]: "unknownError",
  [SMI_ERROR.GPU_LOST]: "gpuLost",
  [SMI_ERROR.RESET_REQUIRED]: "resetRequired",
  [SMI_ERROR.NO_PERMISSION]: "noPermission",
  [SMI_ERROR.OTHER_TOKEN]: "otherToken",
  [SMI_ERROR.MALFORMED]: "malformed",
};

function unrefHandle(stream: unknown): void {
  const s = stream as { unref?: unknown } | null;
  if (s !== null && typeof s === "object" && typeof s.unref === "function") (s.unref as () => void).call(s);
}

/**
 * One nvidia-smi child serving every card of the host. Cards are opened and closed by their
 * sources ({@link smiTrack}); the child runs while any card is open.
 */
export class SmiSampler {
  private readonly options: SmiSamplerOptions;
  private readonly clock: () => bigint;
  private readonly watchdog: boolean;
  private readonly cards = new Map<number, Card>();
  private active: Child | null = null;
  private next: Child | null = null;
  private query: SmiQuery = "instant";
  /** Deaths in a row, and the delay before the next restart. */
  private readonly restarts: Backoff;
  private restartTimer: NodeJS.Timeout | null = null;
  private stallTimer: NodeJS.Timeout | null = null;
  private lastStop: string | null = null;
  private lastPath: string | null = null;
  private lastStamp = 0n;
  private readonly wall = new SmiClock();
  private pendingDelayMs = 0;
  private exitHook: (() => void) | null = null;
  readonly counters: SmiCounters = zeroCounters();

  constructor(options: SmiSamplerOptions = {}) {
    this.options = options;
    this.restarts = new Backoff(options.restartBaseMs ?? 250, options.restartMaxMs ?? 30_000);
    this.clock = options.clock ?? process.hrtime.bigint;
    this.watchdog = options.watchdog ?? (process.platform !== "win32" && existsSync("/bin/sh"));
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
    if (this.restartTimer !== null && this.lastStop !== null) card.ring.fail(this.waitingReason());
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
      periodMs: child?.periodMs ?? null,
      query: this.query,
      lastStop: this.lastStop,
      failures: this.restarts.failures,
      restartInMs: this.restartTimer !== null ? this.pendingDelayMs : null,
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
    if (this.cards.size === 0 || this.restartTimer !== null) return;
    const period = this.desiredPeriod();
    if (this.active === null) {
      if (this.next !== null) return;
      this.start("active", period);
    } else if (period < this.active.periodMs && this.next === null) {
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
    let proc: ChildProcess;
    try {
      proc = this.watchdog
        ? spawn("/bin/sh", ["-c", WATCHDOG, "giul-smi-watchdog", where.path, ...args], {
            env: this.env,
            stdio: ["pipe", "pipe", "pipe"],
          })
        : spawn(where.path, args, { env: this.env, stdio: ["ignore", "pipe", "pipe"], windowsHide: true });
    } catch (error) {
      this.lastStop = `cannot run ${where.path}: ${error instanceof Error ? error.message : String(error)}`;
      this.scheduleRestart();
      return;
    }
    const now = performance.now();
    const child: Child = {
      proc,
      query: this.query,
      periodMs,
      splitter: new LineSplitter(),
      startedAt: now,
      role,
      lastOutputAt: now,
      lastIndex: -1,
      iteration: 0,
      lastStamped: null,
      rows: 0,
      message: null,
      stderr: "",
      invalidField: false,
      stalled: null,
      listed: null,
      seen: new Set(),
      exited: false,
      killTimer: null,
    };
    this.counters.starts += 1;
    if (role === "active") this.active = child;
    else this.next = child;
    debug("smi: started %s %s (pid %d, %s)", where.path, args.join(" "), proc.pid ?? -1, role);

    proc.unref();
    unrefHandle(proc.stdin);
    unrefHandle(proc.stdout);
    unrefHandle(proc.stderr);
    proc.stdin?.on("error", () => {});
    proc.stdout?.setEncoding("utf8");
    proc.stdout?.on("data", (chunk: string) => this.onData(child, chunk));
    proc.stderr?.setEncoding("utf8");
    proc.stderr?.on("data", (chunk: string) => {
      child.stderr = (child.stderr + chunk).slice(-1000);
    });
    proc.on("error", (error) => {
      child.stderr = `${child.stderr}\n${error.message}`.trim();
      this.onExit(child, null, null);
    });
    proc.on("close", (code, signal) => this.onExit(child, code, signal));
    if (!this.watchdog && this.exitHook === null) {
      this.exitHook = () => {
        for (const c of [this.active, this.next]) if (c !== null && !c.exited) c.proc.kill("SIGKILL");
      };
      process.on("exit", this.exitHook);
    }
    this.armStallTimer();
  }

  private armStallTimer(): void {
    if (this.stallTimer !== null) return;
    this.stallTimer = setInterval(() => this.checkStall(), 1_000);
    this.stallTimer.unref();
  }

  private checkStall(): void {
    const child = this.active;
    if (child === null || child.exited || child.stalled !== null) return;
    const limit = this.options.stallMs ?? Math.max(5_000, 20 * child.periodMs);
    const silentMs = performance.now() - child.lastOutputAt;
    if (silentMs < (child.rows === 0 ? Math.max(limit, FIRST_OUTPUT_MS) : limit)) return;
    this.counters.stalls += 1;
    child.stalled = `nvidia-smi printed nothing for ${Math.round(silentMs)} ms and was stopped`;
    this.stop(child);
  }

  /** Asks a child to end (closing the watchdog's stdin), and kills it if it does not. */
  private stop(child: Child): void {
    if (child.exited) return;
    if (this.watchdog) child.proc.stdin?.destroy();
    else child.proc.kill("SIGTERM");
    if (child.killTimer === null) {
      child.killTimer = setTimeout(() => {
        child.proc.kill("SIGKILL");
        child.proc.stdout?.destroy();
      }, 2_000);
      child.killTimer.unref();
    }
  }

  /** Stops the child and forgets every card (their tracks then fail their windows). */
  shutdown(): void {
    for (const card of this.cards.values()) card.ring.fail("the nvidia-smi sampler was shut down");
    this.cards.clear();
    this.stopAll();
  }

  private stopAll(): void {
    if (this.restartTimer !== null) clearTimeout(this.restartTimer);
    this.restartTimer = null;
    if (this.stallTimer !== null) clearInterval(this.stallTimer);
    this.stallTimer = null;
    for (const child of [this.active, this.next]) {
      if (child === null) continue;
      child.role = "retired";
      this.stop(child);
    }
    this.active = null;
    this.next = null;
    this.restarts.reset();
    if (this.exitHook !== null) {
      process.removeListener("exit", this.exitHook);
      this.exitHook = null;
    }
  }

  private onData(child: Child, chunk: string): void {
    const arrival = this.clock();
    child.lastOutputAt = performance.now();
    if (child.role === "retired") return;
    const lines = child.splitter.push(chunk);
    if (child.splitter.overlong > 0) {
      this.counters.overlong += child.splitter.overlong;
      child.splitter.overlong = 0;
    }
    const parsed: SmiLine[] = lines.map((l) => parseLine(l, child.query));

    // Which iteration of the loop each row belongs to: a new one starts when the index does not
    // increase (nvidia-smi prints the cards in index order).
    const iteration: number[] = new Array(parsed.length).fill(child.iteration);
    const starts: boolean[] = new Array(parsed.length).fill(false);
    for (let i = 0; i < parsed.length; i++) {
      const line = parsed[i] as SmiLine;
      const index = line.kind === "row" ? line.index : line.kind === "malformed" ? line.index : null;
      if (index === null) continue;
      if (child.lastIndex < 0) starts[i] = true;
      else if (index <= child.lastIndex) {
        child.iteration += 1;
        starts[i] = true;
        if (child.listed === null) {
          child.listed = new Set(child.seen);
          this.checkListed(child);
        }
      }
      child.seen.add(index);
      child.lastIndex = index;
      iteration[i] = child.iteration;
    }
    if (child.role === "next" && parsed.some((l) => l.kind === "row")) this.promote(child);
    const periodNs = BigInt(child.periodMs) * 1_000_000n;

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
          child.invalidField = true;
          break;
        case "message":
          this.counters.messages += 1;
          child.message ??= line.text;
          break;
        case "malformed": {
          this.counters.malformed += 1;
          const card = line.index === null ? undefined : this.cards.get(line.index);
          if (card !== undefined) {
            const t = this.unstamped(child, arrival, iteration[i] ?? child.iteration, periodNs);
            this.bad(card, t, SMI_ERROR.MALFORMED, line.text, false);
          }
          break;
        }
        case "row": {
          this.counters.rows += 1;
          child.rows += 1;
          const card = this.cards.get(line.index);
          if (card === undefined) break;
          const t = this.rowTime(
            child,
            line,
            arrival,
            iteration[i] ?? child.iteration,
            starts[i] === true,
            periodNs,
          );
          if (child.query === "averaged") card.power = "averaged";
          else card.power ??= choosePower(line);
          const cell = card.power === "averaged" ? line.average : (line.instant ?? line.average);
          if (cell.ok) this.good(card, t, cell.watts, child.periodMs);
          else this.bad(card, t, cell.code, cell.text, true);
          break;
        }
      }
    }
  }

  /** The instant of a card's row: nvidia-smi's timestamp where it has a good one, else a fallback. */
  private rowTime(
    child: Child,
    line: Extract<SmiLine, { kind: "row" }>,
    arrival: bigint,
    iteration: number,
    starts: boolean,
    periodNs: bigint,
  ): bigint {
    const stamp = line.stamp;
    if (stamp === null || !stamp.ok) {
      if (stamp !== null) this.counters.badStamps += 1;
      return this.unstamped(child, arrival, iteration, periodNs);
    }
    if (child.lastStamped === null) this.wall.newStream();
    const steps = this.wall.steps;
    const t = this.wall.map(arrival, stamp.wallMs, starts, periodNs);
    if (this.wall.steps !== steps) {
      this.counters.clockSteps += 1;
      debug("smi: the wall clock stepped; offset estimate restarted");
    }
    this.counters.stamped += 1;
    child.lastStamped = { iteration, t };
    return this.monotone(t);
  }

  /**
   * The instant of a row without a usable timestamp: on the period grid after the child's last
   * stamped row (not after the arrival), or, with none, `back` periods before the arrival, `back`
   * being the iterations after it in the same chunk.
   */
  private unstamped(child: Child, arrival: bigint, iteration: number, periodNs: bigint): bigint {
    this.counters.unstamped += 1;
    const last = child.lastStamped;
    // The grid holds for a few iterations only: nvidia-smi sleeps a period after each query, so
    // its iterations are a little longer than the period and the grid falls behind.
    if (last !== null && iteration - last.iteration <= GRID_ITERATIONS) {
      const t = last.t + BigInt(iteration - last.iteration) * periodNs;
      return this.monotone(t < arrival ? t : arrival);
    }
    return this.stamp(arrival, child.iteration - iteration, periodNs);
  }

  /** The instant of a row `back` iterations before the last one of a chunk that arrived at `arrival`. */
  private stamp(arrival: bigint, back: number, periodNs: bigint): bigint {
    return this.monotone(arrival - BigInt(back) * periodNs);
  }

  /** `t`, or the last time written if that is later: a ring's times never go back. */
  private monotone(t: bigint): bigint {
    if (t < this.lastStamp) t = this.lastStamp;
    this.lastStamp = t;
    return t;
  }

  /** Cards that nvidia-smi does not list are told so at once rather than left to time out. */
  private checkListed(child: Child): void {
    const listed = child.listed;
    if (listed === null || child.role === "retired") return;
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
    child.role = "active";
    if (old !== null) {
      old.role = "retired";
      this.stop(old);
    }
    for (const card of this.cards.values()) card.ring.setPeriodNs(child.periodMs * 1e6);
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

  private onExit(child: Child, code: number | null, signal: NodeJS.Signals | null): void {
    if (child.exited) return;
    child.exited = true;
    if (child.killTimer !== null) clearTimeout(child.killTimer);
    child.killTimer = null;
    child.proc.stdin?.destroy();
    const rest = child.splitter.rest();
    if (rest.trim() !== "") this.counters.truncated += 1;
    if (child.role === "retired") return;
    this.counters.exits += 1;
    const reason = this.exitReason(child, code, signal);
    debug("smi: %s", reason);
    if (child.role === "next") {
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
    if (child.invalidField && child.query === "instant") {
      // The driver predates power.draw.instant: ask for power.draw alone, at once.
      this.query = "averaged";
      this.ensureRunning();
      return;
    }
    if (performance.now() - child.startedAt >= HEALTHY_MS && child.rows > 0) this.restarts.reset();
    this.scheduleRestart();
  }

  /** Every card that has readings gets a fault sample now: the child's death is a gap. */
  private openGaps(): void {
    const t = this.stamp(this.clock(), 0, 0n);
    for (const card of this.cards.values()) {
      if (card.readings === 0 || card.ring.gapOpen()) continue;
      card.ring.push(t, Number.NaN, Number.NaN, SMI_ERROR.EXITED);
    }
  }

  private waitingReason(): string {
    return `${this.lastStop ?? "nvidia-smi stopped"}; restarting it with backoff`;
  }

  private scheduleRestart(): void {
    if (this.restartTimer !== null || this.cards.size === 0) return;
    const delay = this.restarts.fail();
    this.pendingDelayMs = delay;
    const why = `${this.lastStop ?? "nvidia-smi stopped"}; restarting it in ${delay} ms`;
    for (const card of this.cards.values()) {
      card.ring.fail(why);
      card.ring.setPeriodNs(Math.max(card.ring.periodNs(), STARTUP_PERIOD_MS * 1e6));
    }
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      this.ensureRunning();
    }, delay);
    this.restartTimer.unref();
  }

  private exitReason(child: Child, code: number | null, signal: NodeJS.Signals | null): string {
    if (child.stalled !== null) return child.stalled;
    let how: string;
    if (signal !== null) how = `was killed by ${signal}`;
    else if (code === null) how = "could not be started";
    else if (this.watchdog && code > 128 && code < 160) how = `was killed by signal ${code - 128}`;
    else if (this.watchdog && code === 127) how = "could not be run (not found)";
    else how = `exited with code ${code}`;
    // The shell's own "Killed" adds nothing to a death by signal.
    const killed = signal !== null || (this.watchdog && code !== null && code > 128 && code < 160);
    const said = child.message ?? (killed ? null : lastLine(child.stderr));
    return `nvidia-smi ${how}${said ? `: ${said}` : ""}`;
  }
}

function lastLine(text: string): string | null {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  return lines.length > 0 ? (lines[lines.length - 1] as string).slice(0, 300) : null;
}

class SmiSource implements RingSource {
  readonly column = "integral" as const;

  constructor(
    private readonly sampler: SmiSampler,
    private readonly index: number,
  ) {}

  /** power.draw (a trailing average on Ampere+) rather than power.draw.instant. */
  get averagedPower(): boolean {
    return this.sampler.powerOf(this.index) === "averaged";
  }

  open(periodMs: number): Result<SampleRing> {
    return this.sampler.open(this.index, periodMs, this);
  }

  setPeriod(periodMs: number): void {
    this.sampler.setPeriod(this.index, periodMs, this);
  }

  close(): void {
    this.sampler.close(this.index, this);
  }

  describeError(code: number): string {
    return this.sampler.describeError(code);
  }
}

let shared: SmiSampler | null = null;

/** The process's nvidia-smi sampler (one child for every card), made on first use. */
export function sharedSmiSampler(): SmiSampler {
  shared ??= new SmiSampler();
  return shared;
}

/**
 * A track over card `index`'s power as nvidia-smi reports it, through the process's shared
 * sampler (or `sampler`, for tests). The child starts at the track's first `retain`.
 */
export function smiTrack(index: number, sampler: SmiSampler = sharedSmiSampler()): RingTrack {
  return new RingTrack("smi_sampler", new SmiSource(sampler, index));
}
