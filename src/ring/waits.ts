import { emptySample, type Sample, type SampleRing } from "../track/ring.js";
import type { Finished } from "../track/track.js";
import { Backoff } from "../vocabulary/backoff.js";
import { type Check, fail, OK } from "../vocabulary/measurement.js";

/**
 * How long windows wait on a ring's sampler, and what is remembered when it does not answer
 * (RingTrack's waits: an opening edge needs a sample before it, a closing edge one after it).
 *
 * - A wait for the sample after an edge lasts at most {@link WAIT_PERIODS} periods of the sampler as
 *   observed over its last samples (never less than {@link WAIT_FLOOR_MS}, for scheduling noise,
 *   never more than {@link WAIT_CAP_MS}). A wait for the first sample of a ring lasts as long as the
 *   caller allows (the Meter: what is left of the node's `timeoutMs`).
 * - A wait that ends without a sample marks the sampler stalled. From then on nothing waits on it:
 *   windows opened or closed on it fail at once with the reason, until it samples again at a pace
 *   a window can wait for (two samples, at most {@link WAIT_CAP_MS} apart), or until a back-off
 *   period has passed (5 s, doubling to 5 min), after which one window waits again to look. A stuck
 *   source so costs one request at most once per back-off period, not every request.
 */

/** A wait for the next sample lasts at least this long (ms): a busy machine delays any thread. */
export const WAIT_FLOOR_MS = 500;
/** … at most this long whatever the sampler's period (ms). */
export const WAIT_CAP_MS = 2_000;
/** … and otherwise this many of the sampler's periods, as observed. */
export const WAIT_PERIODS = 8;
/** The back-off before a stalled sampler is waited on again (ms), doubled per stall in a row. */
export const STALL_RETRY_BASE_MS = 5_000;
export const STALL_RETRY_MAX_MS = 300_000;
/** A wait cut shorter than this by the caller does not mark the sampler stalled (ms). */
const STALL_MIN_WAIT_MS = 100;
/** How often waits past their deadline (edges waiting for the counter's next update) are timed (ms). */
const DEADLINE_RECHECK_MS = 50;
/** Intervals between the last samples over which the period is observed. */
const OBSERVED_INTERVALS = 8;

/** What the waits need of the track. */
export interface WaitHooks<E> {
  /** The running ring, or null. */
  ring(): SampleRing | null;
  /** Why no ring runs. */
  notRunning(): string;
  /** Tries to evaluate an edge from the samples present now: whether it is still pending. */
  pending(edge: E): boolean;
  /**
   * Whether a pending edge still lacks the sample after it (absent: always). An edge that has it
   * and waits for a later one (a fused counter's next update) does not make the sampler stalled.
   */
  awaitingSample?(edge: E): boolean;
  /**
   * Whether a pending edge waits only for the energy counter's next update (absent: never): while
   * every waiting edge does, the doorbell need ring only when the counter changes.
   */
  awaitingCounter?(edge: E): boolean;
  /**
   * A number that changes when the energy counter does (its changes read so far), or −1: waits
   * whose edges all wait for the counter are not looked at again until it changes.
   */
  counterProgress?(): number;
  /** Gives up on a pending edge, with why. */
  fail(edge: E, reason: string): void;
  /**
   * Where the running ring has a doorbell (see RingSource.doorbell): arms it, and with `read` asks
   * the sampler for a read now; true when it did (the waits are then told of each new sample by
   * {@link RingWaits.onSample} and only time the deadlines), false to poll the ring on a timer.
   */
  wake?(read: boolean, counterOnly: boolean): boolean;
}

interface Stall {
  /** What happened, for the windows' reasons. */
  readonly what: string;
  /** performance.now() before which nothing waits on the sampler again. */
  retryAt: number;
  /** The ring and its head when the stall was seen: recovery counts samples after it. */
  readonly ring: SampleRing | null;
  readonly head: number;
}

interface SettleWaiter<E> {
  readonly edges: readonly E[];
  readonly since: number;
  readonly deadline: number;
  readonly done: Finished;
  /** Its edges all wait for the counter's next update, as of this counterProgress (−1: not so). */
  counterAt: number;
}

interface ReadyWaiter {
  readonly since: number;
  readonly deadline: number;
  readonly done: (check: Check) => void;
}

export class RingWaits<E> {
  private settling: SettleWaiter<E>[] = [];
  private readying: ReadyWaiter[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** When the timer fires (performance.now ms). */
  private timerAt = Number.POSITIVE_INFINITY;
  /** A read was asked of the sampler and its doorbell has not rung since. */
  private readAsked = false;
  private stall: Stall | null = null;
  private readonly backoff = new Backoff(STALL_RETRY_BASE_MS, STALL_RETRY_MAX_MS);
  private readonly scratch: Sample = emptySample();
  /** periodMs's last answer, for its ring at its head. */
  private periodRing: SampleRing | null = null;
  private periodHead = -1;
  private periodNs = -1;
  private periodValue = 10;

  /** `now` is a monotonic clock in ms (performance.now); tests pass their own. */
  constructor(
    private readonly hooks: WaitHooks<E>,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Why the sampler is not waited on now (known stalled, back-off not over), or null. */
  stalled(): string | null {
    const ring = this.hooks.ring();
    if (ring !== null) this.checkRecovered(ring);
    const stall = this.stall;
    if (stall === null || this.now() >= stall.retryAt) return null;
    return this.stallReason(stall);
  }

  /**
   * Resolves when an edge taken now has a sample before it, or with why it cannot: at once when
   * the ring has samples (or the sampler is known stalled), else within `withinMs` (default: the
   * ring's start-up allowance).
   */
  ready(withinMs?: number): Promise<Check> {
    const now = this.readyNow();
    if (now !== null) return Promise.resolve(now);
    const ring = this.hooks.ring() as SampleRing;
    this.lookAgain();
    const since = this.now();
    const limit = Math.max(0, withinMs ?? startupWaitMs(ring));
    return new Promise((done) => {
      this.readying.push({ since, deadline: since + limit, done });
      this.schedule(ring, false, since + limit);
    });
  }

  /** What ready() resolves with at once, or null when it would wait for the ring's first sample. */
  readyNow(): Check | null {
    const ring = this.hooks.ring();
    if (ring === null) return fail(this.hooks.notRunning());
    const stalled = this.stalled();
    if (ring.head() > 0) return stalled === null ? OK : fail(stalled);
    const failure = ring.failure();
    if (failure !== null) return fail(failure);
    if (stalled !== null) return fail(stalled);
    return null;
  }

  /**
   * Waits for the samples that evaluate `edges` (already tried, still pending), at most the wait
   * bound; at once gives up on them when the sampler is known stalled. `done` is called when the
   * wait ends (in a microtask when the sampler is known stalled, else from a later sample or
   * timer), never from within this call.
   */
  settleThen(edges: readonly E[], done: Finished): void {
    const stalled = this.stalled();
    if (stalled !== null) {
      for (const e of edges) this.hooks.fail(e, stalled);
      queueMicrotask(() => done.finished());
      return;
    }
    this.lookAgain();
    const ring = this.hooks.ring();
    const now = this.now();
    const deadline = now + this.boundMs(ring);
    this.settling.push({ edges, since: now, deadline, done, counterAt: -1 });
    this.schedule(ring, true, deadline);
  }

  /**
   * The ring's doorbell rang: a sample was written. Looks at the waits now (the sampler's thread
   * asked for it, once per arming, so this is no busier than the samples).
   */
  onSample(): void {
    this.readAsked = false;
    if (this.settling.length > 0 || this.readying.length > 0) this.poll();
  }

  /** The longest a window waits for the sample after an edge now (ms). */
  boundMs(ring: SampleRing | null = this.hooks.ring()): number {
    return Math.min(WAIT_CAP_MS, Math.max(WAIT_FLOOR_MS, WAIT_PERIODS * this.periodMs(ring)));
  }

  /** The sampler's period (ms): as set, or as observed over its last samples when it is slower. */
  periodMs(ring: SampleRing | null): number {
    if (ring === null) return 10;
    const head = ring.head();
    const periodNs = ring.periodNs();
    // The same until the next sample: a crowd of closes between two samples reads it once.
    if (ring === this.periodRing && head === this.periodHead && periodNs === this.periodNs) {
      return this.periodValue;
    }
    const value = this.observePeriodMs(ring, head, periodNs / 1e6);
    this.periodRing = ring;
    this.periodHead = head;
    this.periodNs = periodNs;
    this.periodValue = value;
    return value;
  }

  private observePeriodMs(ring: SampleRing, head: number, nominal: number): number {
    const n = Math.min(OBSERVED_INTERVALS, head - 1, ring.capacity - 1);
    if (n < 1) return nominal;
    const s = this.scratch;
    if (!ring.read(head - 1, s)) return nominal;
    const last = s.t;
    if (!ring.read(head - 1 - n, s)) return nominal;
    return Math.max(nominal, (last - s.t) / n / 1e6);
  }

  /** After the back-off, this wait is the one that looks again; the next one waits a period more. */
  private lookAgain(): void {
    const stall = this.stall;
    if (stall !== null) stall.retryAt = this.now() + this.backoff.nextDelayMs();
  }

  /** A stalled sampler that samples again at a pace a window can wait for is trusted again. */
  private checkRecovered(ring: SampleRing): void {
    const stall = this.stall;
    if (stall === null) return;
    const head = ring.head();
    if (head - (stall.ring === ring ? stall.head : 0) < 2) return;
    const s = this.scratch;
    if (!ring.read(head - 1, s)) return;
    const last = s.t;
    if (!ring.read(head - 2, s) || last - s.t > WAIT_CAP_MS * 1e6) return;
    this.stall = null;
    this.backoff.reset();
  }

  private stallReason(stall: Stall): string {
    const seconds = Math.max(0, Math.ceil((stall.retryAt - this.now()) / 1000));
    return `the sampler stalled (${stall.what}): not waited on until it samples again (next look in ${seconds} s)`;
  }

  /** Marks the sampler stalled and gives up on every wait at once. */
  private declareStall(ring: SampleRing | null, what: string): void {
    const stall: Stall = {
      what,
      retryAt: this.now() + this.backoff.fail(),
      ring,
      head: ring?.head() ?? 0,
    };
    this.stall = stall;
    const reason = `the sampler stalled: ${what}`;
    for (const w of this.readying) w.done(fail(reason));
    this.readying = [];
    for (const w of this.settling) {
      for (const e of w.edges) if (this.hooks.pending(e)) this.hooks.fail(e, reason);
      w.done.finished();
    }
    this.settling = [];
  }

  /**
   * Makes sure the waits are looked at again: on the ring's doorbell where it has one (asking for a
   * read when an edge lacks the sample after it), with a timer only for the earliest deadline;
   * else on a timer every half period.
   */
  private schedule(
    ring: SampleRing | null,
    read: boolean,
    added = Number.NEGATIVE_INFINITY,
    /** The ring's head when the waits, all for the counter's next update, were looked at; else −1. */
    counterOnlyAt = -1,
  ): void {
    const wake = this.hooks.wake;
    if (wake !== undefined && ring !== null) {
      const asking = read && !this.readAsked;
      if (wake(asking, counterOnlyAt >= 0)) {
        // A sample written since the waits were looked at may have rung nobody: ring on the next.
        if (counterOnlyAt >= 0 && ring.head() !== counterOnlyAt) wake(false, false);
        if (asking) this.readAsked = true;
        this.armDeadline(added);
        return;
      }
    }
    if (this.timer !== null) return;
    const period = ring ? ring.periodNs() / 1e6 : 10;
    const delay = Math.max(1, Math.min(20, Math.ceil(period / 2)));
    this.setTimer(delay);
  }

  /**
   * A timer at the earliest deadline of the waits (for a sampler that stops ringing). `added`: the
   * deadline of a wait just added (−∞: look at every wait).
   */
  private armDeadline(added: number): void {
    const now = this.now();
    // A timer already set at or before the new wait's deadline fires first and looks again: a
    // crowd of closes costs O(1) each, not a walk of every wait.
    if (this.timer !== null && this.timerAt <= added) return;
    let at = Number.POSITIVE_INFINITY;
    for (const w of this.readying) at = Math.min(at, w.deadline);
    for (const w of this.settling) at = Math.min(at, w.deadline);
    // Past every deadline (edges waiting for the counter's next update): look now and then.
    if (at <= now) at = now + DEADLINE_RECHECK_MS;
    // Timers run on whole ms: one set for this deadline fires up to 1 ms after it, and serves.
    if (this.timer !== null && this.timerAt < at + 1) return;
    this.setTimer(Math.max(1, Math.ceil(at - now)));
  }

  private setTimer(delayMs: number): void {
    if (this.timer !== null) clearTimeout(this.timer);
    // Not unref'd: a caller awaiting close() must keep the process alive until it resolves.
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Number.POSITIVE_INFINITY;
      this.poll();
    }, delayMs);
    this.timerAt = this.now() + delayMs;
  }

  private poll(): void {
    const ring = this.hooks.ring();
    const head = ring?.head() ?? 0;
    const now = this.now();
    // Whether every waiting edge waits only for the counter's next update.
    let counterOnly = this.readying.length === 0 && this.hooks.awaitingCounter !== undefined;
    let stalled: string | null = null;
    // The waits kept are moved down in place (a crowd of windows polled at every counter change
    // would otherwise make two arrays a poll); one added meanwhile (by a `done`) is looked at too.
    const readying = this.readying;
    let keptReady = 0;
    for (let i = 0; i < readying.length; i++) {
      const w = readying[i] as ReadyWaiter;
      const failure = ring?.failure() ?? null;
      if (ring !== null && ring.head() > 0) w.done(OK);
      else if (ring === null) w.done(fail(this.hooks.notRunning()));
      else if (failure !== null) w.done(fail(failure));
      else if (now < w.deadline) readying[keptReady++] = w;
      else if (now - w.since >= STALL_MIN_WAIT_MS) {
        stalled ??= `it produced no sample within ${Math.round(now - w.since)} ms of starting`;
        readying[keptReady++] = w;
      } else {
        w.done(fail(`the sampler had no sample yet within ${Math.round(now - w.since)} ms`));
      }
    }
    readying.length = keptReady;
    const settling = this.settling;
    let kept = 0;
    // An edge still without the sample after it asks for another read (the one asked may have
    // begun before the edge was taken); one that has it waits for the next periodic sample.
    let readMore = false;
    const progress = this.hooks.counterProgress?.() ?? -1;
    for (let i = 0; i < settling.length; i++) {
      const w = settling[i] as SettleWaiter<E>;
      // Nothing new for edges that wait for the counter's next update: not looked at again, unless
      // they have waited as long as it may take.
      if (progress >= 0 && w.counterAt === progress && now - w.since < updateWaitMs(ring)) {
        settling[kept++] = w;
        continue;
      }
      let pending = false;
      let sampleless = false;
      let forCounter = true;
      for (const e of w.edges) {
        if (!this.hooks.pending(e)) continue;
        pending = true;
        if (this.hooks.awaitingSample?.(e) ?? true) sampleless = true;
        else if (!(this.hooks.awaitingCounter?.(e) ?? false)) forCounter = false;
      }
      w.counterAt = pending && !sampleless && forCounter ? progress : -1;
      if (!forCounter) counterOnly = false;
      if (sampleless) readMore = true;
      if (!pending) w.done.finished();
      else if (now < w.deadline) settling[kept++] = w;
      else if (!sampleless) {
        // Every edge has its sample after it: it waits for a later one that bounds it (the energy
        // counter's next update), as long as a few of the counter's steps, then gives up on it.
        const waitedMs = now - w.since;
        if (waitedMs < updateWaitMs(ring)) settling[kept++] = w;
        else {
          const ms = Math.round(waitedMs);
          for (const e of w.edges) {
            if (!this.hooks.pending(e)) continue;
            const what = this.hooks.awaitingCounter?.(e)
              ? "the energy counter did not update"
              : "no sample came as long after it as the power readings may lag";
            this.hooks.fail(e, `${what} within ${ms} ms after the edge: its energy there cannot be bounded`);
          }
          w.done.finished();
        }
      } else {
        stalled ??= `no sample came within ${Math.round(now - w.since)} ms after the edge`;
        settling[kept++] = w;
      }
    }
    settling.length = kept;
    if (stalled !== null) this.declareStall(ring, stalled);
    if (this.settling.length > 0 || this.readying.length > 0)
      this.schedule(ring, readMore, Number.NEGATIVE_INFINITY, counterOnly && !readMore ? head : -1);
    else if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
      this.timerAt = Number.POSITIVE_INFINITY;
    }
  }
}

/**
 * How long an edge that has its sample after it waits for a later one that bounds it (ms): the
 * counter's next update, or an integral's sample past the readings' lag (about two periods).
 */
function updateWaitMs(ring: SampleRing | null): number {
  if (ring === null) return WAIT_CAP_MS;
  return Math.max(WAIT_CAP_MS, (3 * ring.counterStepNs()) / 1e6, (4 * ring.periodNs()) / 1e6);
}

/** The wait for a ring's first sample when the caller sets none (ms). */
function startupWaitMs(ring: SampleRing): number {
  return Math.max(1_000, 20 * (ring.periodNs() / 1e6));
}
