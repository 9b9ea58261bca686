/**
 * Long-lived child processes, supervised: a tool that prints a line per reading for as long as it
 * runs (nvidia-smi's `-lms` loop, say). What it prints is split into lines and handed to the
 * owner; everything about keeping it running is here, and nothing about what it prints.
 *
 * A child
 * - never keeps this process alive (the child and its pipes are unref'd);
 * - never outlives it, even after SIGKILL: it runs under a small `/bin/sh` watchdog that waits for
 *   end-of-file on its stdin, a pipe only this process holds open; when the process dies, the
 *   kernel closes it and the watchdog stops the child at once (TERM, then KILL after a second). A
 *   child that writes would also die of SIGPIPE, but one stuck in a driver call writes nothing,
 *   hence the watchdog. Without /bin/sh (Windows) only the broken pipe and an exit handler remain;
 * - is stopped when it prints nothing for longer than its owner allows (a stall);
 * - is restarted by its owner after a delay that doubles with each death in a row, reset when a
 *   child lived long enough and did its work.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { Backoff } from "../../vocabulary/backoff.js";
import { fail, ok, type Result } from "../../vocabulary/measurement.js";

/**
 * The watchdog: runs the command in the background and stops it as soon as its own stdin (a pipe
 * whose only writer is this process) reaches end-of-file, i.e. when this process closes it or
 * dies. Exits with the command's status.
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

/** A child asked to stop that has not exited after this long is killed (ms). */
const KILL_AFTER_MS = 2_000;
/** How often children are checked for a stall (ms). */
const STALL_CHECK_MS = 1_000;

/**
 * Splits a stream of text into complete lines. What follows the last newline is held until the
 * next chunk; at the end of the stream it is a truncated line ({@link LineSplitter.rest}). A line
 * longer than `maxLine` characters is dropped (and counted), without holding it in memory.
 */
export class LineSplitter {
  private partial = "";
  /** Lines dropped for being longer than `maxLine`. */
  overlong = 0;
  private skipping = false;

  constructor(private readonly maxLine: number) {}

  push(chunk: string): string[] {
    const lines: string[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf("\n", start);
      if (nl < 0) break;
      // The end of an over-long line is dropped with it.
      if (this.skipping) this.skipping = false;
      else lines.push(this.partial + chunk.slice(start, nl));
      this.partial = "";
      start = nl + 1;
    }
    if (!this.skipping) {
      this.partial += chunk.slice(start);
      if (this.partial.length > this.maxLine) {
        this.overlong += 1;
        this.partial = "";
        this.skipping = true;
      }
    }
    return lines;
  }

  /** The unterminated text at the end of the stream (a truncated line), or "" (and resets). */
  rest(): string {
    const rest = this.skipping ? "" : this.partial;
    this.partial = "";
    this.skipping = false;
    return rest;
  }
}

/** How a child ended. */
export interface ChildEnd {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** Its output ended in the middle of a line (cut off by the exit). */
  readonly truncated: boolean;
}

/** What a child's owner is told. `T` is the owner's own state of the child. */
export interface ChildEvents<T> {
  /**
   * The complete lines of a chunk of stdout, when the chunk arrived (CLOCK_MONOTONIC ns), and the
   * lines the chunk dropped for being too long.
   */
  lines(child: SupervisedChild<T>, lines: string[], arrivalNs: bigint, overlong: number): void;
  /** The child ended (exited, was killed, or could not be started); told once. */
  exit(child: SupervisedChild<T>, end: ChildEnd): void;
  /** How long the child may print nothing before it is stopped (ms), or null: not watched now. */
  stallLimitMs(child: SupervisedChild<T>): number | null;
  /** The child was found silent for `silentMs` and is being stopped. */
  stalled(child: SupervisedChild<T>, silentMs: number): void;
}

export class SupervisedChild<T> {
  /** performance.now() when started, and when it last printed anything. */
  readonly startedAt: number;
  lastOutputAt: number;
  /** The last 1000 characters of its stderr (and a spawn error). */
  stderr = "";
  /** Why it was stopped for printing nothing, or null. */
  stalled: string | null = null;
  exited = false;
  /** Its output is no longer delivered (it is being replaced or stopped). */
  muted = false;
  private killTimer: NodeJS.Timeout | null = null;
  private readonly splitter: LineSplitter;

  constructor(
    readonly proc: ChildProcess,
    /** The owner's state of this child. */
    readonly state: T,
    private readonly watchdog: boolean,
    maxLine: number,
  ) {
    this.startedAt = performance.now();
    this.lastOutputAt = this.startedAt;
    this.splitter = new LineSplitter(maxLine);
  }

  /** Asks the child to end (closing the watchdog's stdin, else SIGTERM), and kills it if it does not. */
  stop(): void {
    if (this.exited) return;
    if (this.watchdog) this.proc.stdin?.destroy();
    else this.proc.kill("SIGTERM");
    if (this.killTimer === null) {
      this.killTimer = setTimeout(() => {
        this.proc.kill("SIGKILL");
        this.proc.stdout?.destroy();
      }, KILL_AFTER_MS);
      this.killTimer.unref();
    }
  }

  /** Splits a chunk of stdout; null when the child is muted. */
  split(chunk: string): { lines: string[]; overlong: number } | null {
    this.lastOutputAt = performance.now();
    if (this.muted) return null;
    const lines = this.splitter.push(chunk);
    const overlong = this.splitter.overlong;
    this.splitter.overlong = 0;
    return { lines, overlong };
  }

  /** Marks the child ended: stops its kill timer and closes its stdin; whether its output was cut off. */
  end(): boolean {
    this.exited = true;
    if (this.killTimer !== null) clearTimeout(this.killTimer);
    this.killTimer = null;
    this.proc.stdin?.destroy();
    return this.splitter.rest().trim() !== "";
  }
}

export interface SupervisorOptions {
  /** What the children are, for messages ("nvidia-smi"). */
  readonly name: string;
  /** Run each child under the /bin/sh watchdog. Default: where /bin/sh exists (not on Windows). */
  readonly watchdog?: boolean | undefined;
  /** The watchdog shell's name in process listings (its `$0`). */
  readonly watchdogName: string;
  /** First restart delay after a death (ms), doubled per death in a row. */
  readonly restartBaseMs: number;
  /** Longest restart delay (ms). */
  readonly restartMaxMs: number;
  /** A child that lived this long (and did its work) before dying resets the backoff (ms). */
  readonly healthyMs: number;
  /** Longest line of output kept (characters). */
  readonly maxLine: number;
  /** CLOCK_MONOTONIC ns, read when a chunk of output arrives. Default: process.hrtime.bigint. */
  readonly clock?: () => bigint;
}

function unrefHandle(stream: unknown): void {
  const s = stream as { unref?: unknown } | null;
  if (s !== null && typeof s === "object" && typeof s.unref === "function") (s.unref as () => void).call(s);
}

function lastLine(text: string): string | null {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  return lines.length > 0 ? (lines[lines.length - 1] as string).slice(0, 300) : null;
}

/** Starts children, watches them for stalls, and paces their restarts. */
export class Supervisor<T> {
  readonly watchdog: boolean;
  private readonly options: SupervisorOptions;
  private readonly clock: () => bigint;
  private readonly restarts: Backoff;
  private readonly live = new Map<SupervisedChild<T>, ChildEvents<T>>();
  private restartTimer: NodeJS.Timeout | null = null;
  private stallTimer: NodeJS.Timeout | null = null;
  private exitHook: (() => void) | null = null;
  /** The delay of the last restart scheduled (ms). */
  pendingDelayMs = 0;

  constructor(options: SupervisorOptions) {
    this.options = options;
    this.clock = options.clock ?? process.hrtime.bigint;
    this.restarts = new Backoff(options.restartBaseMs, options.restartMaxMs);
    this.watchdog = options.watchdog ?? (process.platform !== "win32" && existsSync("/bin/sh"));
  }

  /** Deaths in a row (the backoff's exponent). */
  get failures(): number {
    return this.restarts.failures;
  }

  /** A restart is scheduled and has not run yet. */
  get restartPending(): boolean {
    return this.restartTimer !== null;
  }

  /** Starts `path args` with `env`; `state` is the owner's, handed back with every event. */
  spawn(
    path: string,
    args: readonly string[],
    env: NodeJS.ProcessEnv,
    state: T,
    events: ChildEvents<T>,
  ): Result<SupervisedChild<T>> {
    let proc: ChildProcess;
    try {
      proc = this.watchdog
        ? spawn("/bin/sh", ["-c", WATCHDOG, this.options.watchdogName, path, ...args], {
            env,
            stdio: ["pipe", "pipe", "pipe"],
          })
        : spawn(path, args, { env, stdio: ["ignore", "pipe", "pipe"], windowsHide: true });
    } catch (error) {
      return fail(`cannot run ${path}: ${error instanceof Error ? error.message : String(error)}`);
    }
    const child = new SupervisedChild(proc, state, this.watchdog, this.options.maxLine);
    this.live.set(child, events);
    proc.unref();
    unrefHandle(proc.stdin);
    unrefHandle(proc.stdout);
    unrefHandle(proc.stderr);
    proc.stdin?.on("error", () => {});
    proc.stdout?.setEncoding("utf8");
    proc.stdout?.on("data", (chunk: string) => {
      const arrival = this.clock();
      const got = child.split(chunk);
      if (got !== null) events.lines(child, got.lines, arrival, got.overlong);
    });
    proc.stderr?.setEncoding("utf8");
    proc.stderr?.on("data", (chunk: string) => {
      child.stderr = (child.stderr + chunk).slice(-1000);
    });
    proc.on("error", (error) => {
      child.stderr = `${child.stderr}\n${error.message}`.trim();
      this.ended(child, null, null);
    });
    proc.on("close", (code, signal) => this.ended(child, code, signal));
    if (!this.watchdog && this.exitHook === null) {
      this.exitHook = () => {
        for (const c of this.live.keys()) if (!c.exited) c.proc.kill("SIGKILL");
      };
      process.on("exit", this.exitHook);
    }
    if (this.stallTimer === null) {
      this.stallTimer = setInterval(() => this.checkStalls(), STALL_CHECK_MS);
      this.stallTimer.unref();
    }
    return ok(child);
  }

  private ended(child: SupervisedChild<T>, code: number | null, signal: NodeJS.Signals | null): void {
    if (child.exited) return;
    const events = this.live.get(child);
    this.live.delete(child);
    if (this.live.size === 0) this.idle();
    const truncated = child.end();
    events?.exit(child, { code, signal, truncated });
  }

  /** No child runs: no stall check, no exit handler. */
  private idle(): void {
    if (this.stallTimer !== null) clearInterval(this.stallTimer);
    this.stallTimer = null;
    if (this.exitHook !== null) {
      process.removeListener("exit", this.exitHook);
      this.exitHook = null;
    }
  }

  private checkStalls(): void {
    for (const [child, events] of this.live) {
      if (child.exited || child.stalled !== null) continue;
      const limit = events.stallLimitMs(child);
      if (limit === null) continue;
      const silentMs = performance.now() - child.lastOutputAt;
      if (silentMs < limit) continue;
      events.stalled(child, silentMs);
      child.stalled = `${this.options.name} printed nothing for ${Math.round(silentMs)} ms and was stopped`;
      child.stop();
    }
  }

  /**
   * Why a child ended, for a person: its stall, else how it ended and what it said (`message`,
   * the owner's pick of its output, else the last line of its stderr unless it was killed).
   */
  describeExit(child: SupervisedChild<T>, end: ChildEnd, message: string | null): string {
    if (child.stalled !== null) return child.stalled;
    const { code, signal } = end;
    let how: string;
    if (signal !== null) how = `was killed by ${signal}`;
    else if (code === null) how = "could not be started";
    else if (this.watchdog && code > 128 && code < 160) how = `was killed by signal ${code - 128}`;
    else if (this.watchdog && code === 127) how = "could not be run (not found)";
    else how = `exited with code ${code}`;
    // The shell's own "Killed" adds nothing to a death by signal.
    const killed = signal !== null || (this.watchdog && code !== null && code > 128 && code < 160);
    const said = message ?? (killed ? null : lastLine(child.stderr));
    return `${this.options.name} ${how}${said ? `: ${said}` : ""}`;
  }

  /** A child that died after living `healthyMs` and doing its work (`didWork`) resets the backoff. */
  forgiveIfHealthy(child: SupervisedChild<T>, didWork: boolean): void {
    if (performance.now() - child.startedAt >= this.options.healthyMs && didWork) this.restarts.reset();
  }

  /**
   * Schedules `run` after the backoff's next delay and counts a death; returns the delay (ms), or
   * null when a restart is already pending.
   */
  scheduleRestart(run: () => void): number | null {
    if (this.restartTimer !== null) return null;
    const delay = this.restarts.fail();
    this.pendingDelayMs = delay;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      run();
    }, delay);
    this.restartTimer.unref();
    return delay;
  }

  /** Cancels a pending restart and forgets the deaths in a row. */
  reset(): void {
    if (this.restartTimer !== null) clearTimeout(this.restartTimer);
    this.restartTimer = null;
    this.restarts.reset();
  }
}
