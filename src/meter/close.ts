/**
 * A close waiting for its window's events to be accounted (CardLedger.settleThen): then its
 * contention check, then the window measures itself, once, and close()'s promise settles. One
 * object per close, not a chain of promises and closures kept alive by a crowd of closing windows.
 */

import type { Accounted, LedgerEvent } from "../ledger/ledger.js";
import type { Concurrency } from "../rules/energy.js";

/** The window being closed (the Meter). */
export interface Closing {
  measured(closeEvent: LedgerEvent, concurrency: Concurrency, thrown: { error: unknown } | null): void;
}

const NOOP = (): void => {};
let resolved: () => void = NOOP;
let rejected: (error: unknown) => void = NOOP;
/** Hands a new promise's resolvers over without an executor closure of its own. */
function captureResolvers(resolve: () => void, reject: (error: unknown) => void): void {
  resolved = resolve;
  rejected = reject;
}

/**
 * close()'s promise: settled once each of the window's `left` card windows is measured (one, or one
 * per card of a window over several cards), rejected with the first failure of giul's own.
 */
export class CloseCountdown {
  readonly promise: Promise<void>;
  private readonly resolve: () => void;
  private readonly reject: (error: unknown) => void;
  private failure: { error: unknown } | null = null;

  constructor(
    private left: number,
    /** Told once every card window is measured, before the promise settles (the Meter). */
    private readonly owner: { closed(): void } | null = null,
  ) {
    this.promise = new Promise<void>(captureResolvers);
    this.resolve = resolved;
    this.reject = rejected;
    resolved = NOOP;
    rejected = NOOP;
  }

  /** One card window finished (`thrown`: what its measuring threw). */
  done(thrown: { error: unknown } | null): void {
    if (thrown !== null && this.failure === null) this.failure = thrown;
    this.left -= 1;
    if (this.left > 0) return;
    this.owner?.closed();
    if (this.failure === null) this.resolve();
    else this.reject(this.failure.error);
  }
}

export class CloseWait implements Accounted {
  /** Accounted once: a second call (accounting threw after the waiter was taken) is ignored. */
  private arrivedOnce = false;

  constructor(
    private readonly window: Closing,
    readonly event: LedgerEvent,
    private readonly concurrency: Concurrency,
    /** The contention check still to await (it never rejects: a failure is giul's own). */
    private readonly contention: Promise<void> | null,
    /** close()'s promise, told once this card window is measured. */
    private readonly countdown: CloseCountdown,
  ) {}

  accounted(thrown: { error: unknown } | null): void {
    if (this.arrivedOnce) return;
    this.arrivedOnce = true;
    if (this.contention === null || thrown !== null) this.finish(thrown);
    else
      this.contention.then(
        () => this.finish(null),
        (error: unknown) => this.finish({ error }),
      );
  }

  private finish(thrown: { error: unknown } | null): void {
    try {
      this.window.measured(this.event, this.concurrency, thrown);
    } catch (error) {
      this.countdown.done({ error });
      return;
    }
    this.countdown.done(null);
  }
}
