/**
 * The environment's side of the accounting worker (./worker.ts): where a window on a native card
 * appends its events to the card's event log, saying whose they are, and gets what it measured
 * back, so that the per-card ledger's work (the edges' fused values and bounds, the shares) is not
 * done on this event loop.
 *
 * A window appends four events (open, two marks, close) as it would anyway; a close also pokes the
 * worker, once however many close before it looks; the outcomes come back in batches. Where no
 * worker can run (a bundle without its file, an environment that cannot start threads, or the
 * worker failing), the windows are accounted here as before: nothing depends on the worker but
 * where the work is done.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import {
  type EventLog,
  type EventLogEntry,
  emptyLogEntry,
  type SharedLog,
  type Track,
} from "../backends/track.js";
import { packageRoot } from "../binding.js";
import { debug } from "../debug.js";
import type { Attribution } from "../energy.js";
import { GiulError } from "../errors.js";
import { idleConflict } from "../ledger.js";
import type { Outcome } from "../meter-measure.js";
import { decodeOutcomes, failedOutcome, type PackedOutcome } from "./codec.js";
import {
  KIND_CLOSE,
  KIND_MARK,
  KIND_OPEN_EXCLUSIVE,
  KIND_OPEN_SHARED,
  KIND_WEIGHT,
  type TrackSpec,
} from "./kinds.js";
import { type FromWorker, POKE_FLAG, type ToWorker } from "./protocol.js";

/** A track whose windows the worker can account: the native sampler's, with its event log. */
export interface OffloadableTrack extends Track {
  spec(): TrackSpec | null;
  accountedElsewhere(): void;
  sharedLog(): SharedLog | null;
}

/** What waits for an offloaded window's outcome (an object: a crowd of closures kept their scopes). */
export interface OutcomeWaiter {
  /** The window's outcome: as the worker sent it (its stages in the order of its marks), or a failure. */
  received(outcome: Outcome | PackedOutcome): void;
}

/** One window followed by the worker: its number, and the instants of its events (ns, the log's). */
export class OffloadedWindow {
  readonly owner: number;
  weight: number;
  /**
   * Each event's instant, CLOCK_MONOTONIC ns − the log's epoch: the first `count` slots. Room for
   * four (an open, two marks, a close) from the start: an array grown by push() takes room for 17
   * at once, kept as long as the window is open.
   */
  readonly times: number[] = new Array<number>(4);
  /** Events so far. */
  count = 0;
  /**
   * The window's own weight after each event, once it has changed (null while every event has the
   * weight it opened with: most windows never change it).
   */
  weights: number[] | null = null;
  /** The weight it opened with. */
  readonly initial: number;
  /** What its close hands the outcome to while it waits for the worker (see OffloadClient.outcomeThen). */
  done: OutcomeWaiter | null = null;
  constructor(owner: number, weight: number) {
    this.owner = owner;
    this.weight = weight;
    this.initial = weight;
  }

  /** The index of its newest event. */
  get last(): number {
    return this.count - 1;
  }
}

/** The worker's view of one card from this environment: appends with the window's tags. */
export class OffloadCard {
  constructor(
    private readonly client: OffloadClient,
    readonly log: EventLog,
    readonly epochNs: bigint,
    /** Its number in the worker's messages. */
    readonly id: number,
  ) {}

  /** Opens a window (throws GiulError naming idleW on a conflicting idle floor), or null. */
  open(weight: number, idleW: number, attribution: Attribution): OffloadedWindow | null {
    const w = new OffloadedWindow(this.client.nextOwner(), weight);
    const kind = attribution === "exclusive" ? KIND_OPEN_EXCLUSIVE : KIND_OPEN_SHARED;
    const t = this.append(weight, 1, idleW, w.owner, weight, kind);
    if (t === -1) throw idleConflict(idleW, this.log.idleW());
    if (!this.stamp(w, t, weight)) return null;
    return w;
  }

  mark(w: OffloadedWindow): boolean {
    return this.stamp(w, this.append(0, 0, Number.NaN, w.owner, w.weight, KIND_MARK), w.weight);
  }

  setWeight(w: OffloadedWindow, weight: number): boolean {
    const delta = weight - w.weight;
    w.weight = weight;
    // Every event so far had the opening weight.
    w.weights ??= Array.from({ length: w.count }, () => w.initial);
    return this.stamp(w, this.append(delta, 0, Number.NaN, w.owner, weight, KIND_WEIGHT), weight);
  }

  /**
   * Closes the window: `done` gets what it measured once the worker has it, never from within
   * this call. A callback, not a promise: a crowd of closing windows each kept a promise, its
   * reaction and the suspended frame awaiting it alive.
   */
  close(w: OffloadedWindow, done: OutcomeWaiter): void {
    const delta = -w.weight;
    w.weight = 0;
    const appended = this.stamp(w, this.append(delta, -1, Number.NaN, w.owner, 0, KIND_CLOSE), 0);
    if (appended) this.client.outcomeThen(w, done);
    else {
      const failed = failedOutcome("the window's closing event could not be appended to the card's log");
      queueMicrotask(() => done.received(failed));
    }
  }

  /**
   * Appends an event with the window's tags: its instant (the entry's `t`), or −1 (an open's
   * conflicting idle floor) or another negative number when it was not appended. The native log
   * says the instant at once; another is read back.
   */
  private append(dw: number, dc: number, idleW: number, owner: number, own: number, kind: number): number {
    const log = this.log;
    if (log.appendStamped !== undefined) return log.appendStamped(dw, dc, idleW, owner, own, kind);
    const seq = log.append(dw, dc, idleW, owner, own, kind);
    if (seq < 0) return seq;
    const entry = this.client.scratch;
    return log.read(seq, entry) ? entry.t : -3;
  }

  /** Records the event's instant `t`, false when it was not appended (t < 0). */
  private stamp(w: OffloadedWindow, t: number, weight: number): boolean {
    if (t < 0) return false;
    w.times[w.count++] = t;
    w.weights?.push(weight);
    return true;
  }
}

/** How often windows still waiting on the worker are looked at (ms; see OffloadClient.watch). */
const WATCH_MS = 15_000;

/** Where the worker's file is looked for: GIUL_OFFLOAD_WORKER, or next to giul's bundle (dist/). */
export function workerPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.GIUL_OFFLOAD_WORKER || join(packageRoot(), "dist", "offload-worker.js");
}

/** The worker's file, or null where it is not there. */
function workerFile(): string | null {
  const path = workerPath();
  return existsSync(path) ? path : null;
}

/**
 * Where windows' arithmetic is to run: on the window's own thread, on the accounting worker, or
 * (`auto`, the default) on its own thread until its card is crowded (see {@link CROWD_WINDOWS}).
 */
export type Accounting = "auto" | "thread" | "worker";

/**
 * GIUL_ACCOUNTING's choice: "auto" (also empty or unset, the default), "thread" or "worker".
 * Throws a GiulError naming GIUL_ACCOUNTING for any other value.
 */
export function accountingMode(env: NodeJS.ProcessEnv = process.env): Accounting {
  const mode = env.GIUL_ACCOUNTING;
  if (mode === undefined || mode === "" || mode === "auto") return "auto";
  if (mode === "thread" || mode === "worker") return mode;
  throw new GiulError(
    "INVALID_OPTION",
    `GIUL_ACCOUNTING=${mode}: expected "auto" (the default: on the window's thread, on a worker thread ` +
      `while its card is crowded), "thread" (always on the window's thread) or "worker" (always on a worker thread)`,
    { field: "GIUL_ACCOUNTING" },
  );
}

/**
 * Under `auto`, a window opened while at least this many windows are open on its card (in the whole
 * process) is accounted by the worker, and so is every window opened on a native card for
 * CROWD_HOLD_MS after that. Below it, a window's own thread does its arithmetic. Measured on a
 * shared 2-core machine (bench/RESULTS.md, "A crowd's arithmetic off the event loop by default"):
 * with 100 or 300 windows open the worker saved the event loop little or nothing and cost the
 * process twice the CPU and `close()` a longer wait; from about 1,000 it saves a quarter of the
 * event loop's time per window, at 10,000 more than half, where the window's own thread can no
 * longer keep up.
 */
export const CROWD_WINDOWS = 512;
/** How long a crowd, once seen, keeps sending new windows to the worker (ms): crowds come in waves. */
export const CROWD_HOLD_MS = 1000;

export class OffloadClient {
  readonly scratch: EventLogEntry = emptyLogEntry();
  private readonly worker: Worker;
  private readonly flags: Int32Array;
  /** Windows waiting for their outcome, by number. */
  private readonly waiting = new Map<number, OffloadedWindow>();
  private readonly cards = new WeakMap<Track, OffloadCard | null>();
  private owners = 0;
  private cardCount = 0;
  private referenced = false;
  private watchdog: NodeJS.Timeout | null = null;
  /** Why the worker is gone, once it is. */
  dead: string | null = null;
  /** Outcomes received for windows waiting on them. */
  received = 0;
  /** The worker has the addon and NVML: windows opened from now on are accounted there. */
  ready = false;

  constructor(file: string) {
    const flags = new SharedArrayBuffer(4);
    this.flags = new Int32Array(flags);
    // No flags of this process (an --input-type, a loader): the worker's file is plain ESM.
    this.worker = new Worker(file, { workerData: { flags }, execArgv: [] });
    this.worker.on("message", (message: FromWorker) => this.receive(message));
    this.worker.on("error", (error) => this.die(`the accounting worker failed: ${String(error)}`));
    this.worker.on("exit", (code) => this.die(`the accounting worker exited (code ${code})`));
    // After the listeners: adding a "message" listener refs the worker's port again.
    this.worker.unref();
  }

  nextOwner(): number {
    this.owners += 1;
    return this.owners;
  }

  /** The worker's view of a track's card, or null when its windows cannot be offloaded. */
  cardFor(track: Track, periodMs: number): OffloadCard | null {
    // Until the worker has the addon and NVML, windows are accounted here: one that fails to start
    // costs no window its measurement.
    if (this.dead !== null || !this.ready) return null;
    const t = track as Partial<OffloadableTrack>;
    const shared = t.sharedLog?.() ?? null;
    const known = this.cards.get(track);
    // Known, and through the same reference (a track whose sampler stopped and started again
    // appends through a new one, with a new id: the worker is told to follow that instead).
    if (known === null || (known !== undefined && known.log === shared?.log)) return known;
    let card: OffloadCard | null = null;
    const spec = t.spec?.() ?? null;
    const ref = shared?.log.refId;
    const epochNs = shared?.log.epochNs;
    if (spec !== null && shared !== null && ref !== undefined && epochNs !== undefined) {
      this.cardCount += 1;
      this.post({
        type: "card",
        card: this.cardCount,
        spec,
        periodMs,
        ref,
        from: shared.log.published(),
        replaces: known?.id ?? null,
      });
      (track as OffloadableTrack).accountedElsewhere();
      card = new OffloadCard(this, shared.log, epochNs, this.cardCount);
    }
    // A track without a running ring now may have one later: only a kind that never can is kept.
    if (card !== null || spec === null) this.cards.set(track, card);
    return card;
  }

  /** Hands `done` what window `owner` measured once the worker posts it (never from within this call). */
  outcomeThen(w: OffloadedWindow, done: OutcomeWaiter): void {
    if (this.dead !== null) {
      const failed = failedOutcome(this.dead);
      queueMicrotask(() => done.received(failed));
      return;
    }
    w.done = done;
    this.waiting.set(w.owner, w);
    if (!this.referenced) {
      // A close awaited keeps the process alive until it resolves, as it does in this thread.
      this.referenced = true;
      this.worker.ref();
    }
    this.watch();
    // One poke until the worker takes it, however many windows close meanwhile. Looked at before
    // it is swapped: the flag's word is the worker's too, and a compare-and-swap takes it from the
    // worker's core even when it fails (while the worker is busy, for almost every close).
    if (
      Atomics.load(this.flags, POKE_FLAG) === 0 &&
      Atomics.compareExchange(this.flags, POKE_FLAG, 0, 1) === 0
    )
      this.post({ type: "poke" });
  }

  /**
   * Every WATCH_MS while windows wait: those that already waited at the previous look get no
   * outcome now, with the reason. A close never waits on the worker for ever (it answers within
   * seconds: the same waits as in this thread, bounded).
   */
  private watch(): void {
    if (this.watchdog !== null) return;
    let seen = this.owners;
    const look = (): void => {
      const late = `the accounting worker gave no outcome within ${WATCH_MS / 1000} s of the window's close`;
      for (const [owner, w] of this.waiting) {
        if (owner > seen) continue;
        this.waiting.delete(owner);
        resolve(w, failedOutcome(late));
      }
      seen = this.owners;
      this.settled();
    };
    // Outcomes are handed over from a microtask (see receive).
    this.watchdog = setInterval(() => queueMicrotask(look), WATCH_MS);
    this.watchdog.unref();
  }

  /** Nothing waits: the worker no longer holds the process open, nor the watchdog runs. */
  private settled(): void {
    if (this.waiting.size > 0) return;
    if (this.referenced) {
      this.referenced = false;
      this.worker.unref();
    }
    if (this.watchdog !== null) clearInterval(this.watchdog);
    this.watchdog = null;
  }

  private post(message: ToWorker): void {
    this.worker.postMessage(message);
  }

  private receive(message: FromWorker): void {
    if (message.type === "failed") {
      this.die(message.reason);
      return;
    }
    if (message.type === "ready") {
      this.ready = true;
      return;
    }
    // Handed over from a microtask, as the ledger hands over a close on the window's own thread
    // (ledger-settle.ts): a caller's `await m.close(); m.result({ tokens })` then runs before the
    // giul:energy record of a window whose result() nobody asked for is published (next tick,
    // without tokens). From this message's callback itself, every window of the batch was
    // published without its tokens, and its record charged twice.
    queueMicrotask(() => this.deliver(message.numbers, message.strings));
  }

  /** Hands each window of a batch its outcome. */
  private deliver(numbers: Float64Array, strings: readonly string[]): void {
    const waiting = this.waiting;
    decodeOutcomes(
      numbers,
      strings,
      // A window dropped unclosed: nobody waits.
      (owner) => {
        const w = waiting.get(owner);
        if (w !== undefined) waiting.delete(owner);
        return w;
      },
      (w, outcome) => {
        this.received += 1;
        resolve(w, outcome);
      },
    );
    this.settled();
  }

  private die(reason: string): void {
    if (this.dead !== null) return;
    this.dead = reason;
    debug("offload: %s", reason);
    const outcome = failedOutcome(reason);
    const waited = [...this.waiting.values()];
    this.waiting.clear();
    // From a microtask, as every outcome (see receive).
    if (waited.length > 0)
      queueMicrotask(() => {
        for (const w of waited) resolve(w, outcome);
      });
    this.settled();
    // Windows from now on are accounted on this thread: the worker's isolate is not kept.
    void this.worker.terminate().catch(() => {});
  }
}

/** Resolves a window's close with `outcome` (once: the resolver is dropped). */
function resolve(w: OffloadedWindow, outcome: Outcome | PackedOutcome): void {
  const done = w.done;
  w.done = null;
  done?.received(outcome);
}

/** GIUL_ACCOUNTING's choice, read at the first window. */
let mode: Accounting | undefined;
/** This environment's worker: undefined until one is started (or could not be). */
let client: OffloadClient | null | undefined;
/** GIUL_ACCOUNTING's value, when it is none that giul knows: every window's open() says so. */
let misconfigured: GiulError | null = null;
/** Under `auto`: until when (performance.now() ms) new windows go to the worker; 0 before any crowd. */
let crowdUntil = 0;

/** GIUL_ACCOUNTING's choice, read once (throws a GiulError naming it for a value giul does not know). */
function accounting(): Accounting {
  if (misconfigured !== null) throw misconfigured;
  if (mode !== undefined) return mode;
  try {
    mode = accountingMode();
  } catch (error) {
    misconfigured = error as GiulError;
    throw error;
  }
  return mode;
}

/**
 * Where a window opening now on `track` is accounted: the worker's view of its card, or null for
 * the window's own thread (GIUL_ACCOUNTING=thread; under `auto` a card not crowded; a track the
 * worker cannot follow; a worker not ready or gone). Throws a GiulError naming GIUL_ACCOUNTING for
 * a value giul does not know.
 */
export function offloadCardFor(track: Track, periodMs: number): OffloadCard | null {
  const chosen = accounting();
  if (chosen === "thread" || (chosen === "auto" && !crowded(track))) return null;
  return offloadClient()?.cardFor(track, periodMs) ?? null;
}

/** Under `auto`: whether `track`'s card is crowded now, or was within CROWD_HOLD_MS. */
function crowded(track: Track): boolean {
  // Windows open on the card in the whole process, this one not yet counted (a native log's).
  const open = (track as Partial<OffloadableTrack>).sharedLog?.()?.log.openCount?.() ?? 0;
  if (open >= CROWD_WINDOWS) {
    crowdUntil = performance.now() + CROWD_HOLD_MS;
    return true;
  }
  return crowdUntil !== 0 && performance.now() < crowdUntil;
}

/**
 * This environment's accounting worker, started at the first call that needs one
 * (GIUL_ACCOUNTING=worker: the first window; `auto`: the first crowded card), or null where windows
 * are accounted here: GIUL_ACCOUNTING=thread, no crowd yet under `auto`, or no worker can run.
 * Throws a GiulError naming GIUL_ACCOUNTING for a value giul does not know (read once).
 */
export function offloadClient(): OffloadClient | null {
  const chosen = accounting();
  if (client !== undefined) return client?.dead === null ? client : null;
  if (chosen === "thread" || (chosen === "auto" && crowdUntil === 0)) return null;
  client = null;
  const file = workerFile();
  if (file === null) {
    debug("offload: no worker file; windows are accounted on this thread");
    return null;
  }
  try {
    client = new OffloadClient(file);
  } catch (error) {
    debug("offload: the worker did not start (%s); windows are accounted on this thread", String(error));
    client = null;
  }
  return client;
}
