/**
 * Which of the per-card ledger's events have had their edges settled (./ledger.ts settleThrough):
 * each close hands the track the edges of the events no earlier close handed it, in one settle
 * call, and then waits until every call up to its own event has finished — a frontier moved over
 * the calls in order, not a chain of promises, so that a crowd of closes costs O(1) each.
 */

/** One track.settle() call: the newest event it covers, and whether it has finished. */
interface SettleCall {
  readonly through: number;
  done: boolean;
}

/** A close waiting for every call through `seq` to finish. */
interface SettleWaiter {
  readonly seq: number;
  readonly done: () => void;
}

export class SettleFrontier {
  /** The calls in flight, oldest first from `callHead`. */
  private calls: SettleCall[] = [];
  private callHead = 0;
  /** The newest event through which every call has finished. */
  private settledSeq = -1;
  /** The closes waiting for the frontier to reach theirs, by seq from `waitHead`. */
  private waiters: SettleWaiter[] = [];
  private waitHead = 0;
  /** A microtask is queued to move the frontier. */
  private advancing = false;
  private readonly advanceSoon = (): void => {
    this.advancing = false;
    this.advance();
  };

  /** A settle call covering the events through `seq` began: `settling` ends when it has finished. */
  add(seq: number, settling: Promise<unknown>): void {
    const finished = this.begin(seq);
    settling.then(finished, finished);
  }

  /**
   * A settle call covering the events through `seq` begins: call what this returns once it has
   * finished (from anywhere: the frontier moves in a microtask after, never within the call).
   */
  begin(seq: number): () => void {
    const call: SettleCall = { through: seq, done: false };
    this.calls.push(call);
    return () => {
      call.done = true;
      if (this.advancing) return;
      this.advancing = true;
      queueMicrotask(this.advanceSoon);
    };
  }

  /** Whether every call through `seq` has finished. */
  reached(seq: number): boolean {
    return this.settledSeq >= seq;
  }

  /**
   * Calls `done` once every call through `seq` has finished (never at once: ask reached() first).
   * A callback, not a promise: a crowd of closing windows each kept a promise, its resolvers and
   * their context alive here.
   */
  whenReached(seq: number, done: () => void): void {
    const waiters = this.waiters;
    let at = waiters.length;
    while (at > this.waitHead && (waiters[at - 1] as SettleWaiter).seq > seq) at -= 1;
    if (at === waiters.length) waiters.push({ seq, done });
    else waiters.splice(at, 0, { seq, done });
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
    while (
      this.waitHead < waiters.length &&
      (waiters[this.waitHead] as SettleWaiter).seq <= this.settledSeq
    ) {
      (waiters[this.waitHead] as SettleWaiter).done();
      this.waitHead += 1;
    }
    if (this.waitHead === waiters.length) {
      waiters.length = 0;
      this.waitHead = 0;
    }
  }
}
