/**
 * Which of the per-card ledger's events have had their edges settled (./ledger.ts settleThrough):
 * each close hands the track the edges of the events no earlier close handed it, in one settle
 * call, and then waits until every call up to its own event has finished — a frontier moved over
 * the calls in order, not a chain of promises, so that a crowd of closes costs O(1) each.
 */
import type { Finished } from "../track/track.js";

/** One track.settle() call: the newest event it covers, and whether it has finished. */
class SettleCall implements Finished {
  done = false;
  constructor(
    private readonly frontier: { moveSoon(): void },
    readonly through: number,
  ) {}

  /** From anywhere: the frontier moves in a microtask after, never within the call. */
  finished(): void {
    this.done = true;
    this.frontier.moveSoon();
  }
}

/**
 * The frontier, waited on: `W`, what waits, says which event it waits for; `onReached`
 * is called with each once the frontier has passed it.
 */
export class SettleFrontier<W extends { readonly event: { readonly seq: number } }> {
  /** The calls in flight, oldest first from `callHead`. */
  private calls: SettleCall[] = [];
  private callHead = 0;
  /** The newest event through which every call has finished. */
  private settledSeq = -1;
  /**
   * What waits for the frontier to reach its seq, in seq order from `waitHead`. The waiters
   * themselves, not a closure and a record each: a crowd of closing windows kept those alive.
   */
  private waiters: W[] = [];
  private waitHead = 0;
  /** A microtask is queued to move the frontier. */
  private advancing = false;
  private readonly advanceSoon = (): void => {
    this.advancing = false;
    this.advance();
  };

  constructor(private readonly onReached: (waiter: W) => void) {}

  /** A settle call covering the events through `seq` began: `settling` ends when it has finished. */
  add(seq: number, settling: Promise<unknown>): void {
    const call = this.begin(seq);
    const finished = (): void => call.finished();
    settling.then(finished, finished);
  }

  /**
   * A settle call covering the events through `seq` begins: tell what this returns once it has
   * finished (its finished(), from anywhere).
   */
  begin(seq: number): Finished {
    const call = new SettleCall(this, seq);
    this.calls.push(call);
    return call;
  }

  /** A call finished: the frontier moves in a microtask. */
  moveSoon(): void {
    if (this.advancing) return;
    this.advancing = true;
    queueMicrotask(this.advanceSoon);
  }

  /** Whether every call through `seq` has finished. */
  reached(seq: number): boolean {
    return this.settledSeq >= seq;
  }

  /**
   * Hands `waiter` to onReached once every call through its seq has finished (never at once: ask
   * reached() first).
   */
  whenReached(waiter: W): void {
    const waiters = this.waiters;
    const seq = waiter.event.seq;
    let at = waiters.length;
    while (at > this.waitHead && (waiters[at - 1] as W).event.seq > seq) at -= 1;
    if (at === waiters.length) waiters.push(waiter);
    else waiters.splice(at, 0, waiter);
  }

  /** Moves the frontier over the finished calls, oldest first, and wakes who it passed. */
  private advance(): void {
    const calls = this.calls;
    while (this.callHead < calls.length && (calls[this.callHead] as SettleCall).done) {
      this.settledSeq = (calls[this.callHead] as SettleCall).through;
      this.callHead += 1;
    }
    if (this.callHead === calls.length) {
      calls.length = 0;
      this.callHead = 0;
    }
    const waiters = this.waiters;
    while (this.waitHead < waiters.length && (waiters[this.waitHead] as W).event.seq <= this.settledSeq) {
      const waiter = waiters[this.waitHead] as W;
      this.waitHead += 1;
      this.onReached(waiter);
    }
    if (this.waitHead === waiters.length) {
      waiters.length = 0;
      this.waitHead = 0;
    }
  }
}
