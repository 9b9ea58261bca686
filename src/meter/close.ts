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
 * The close of a window over several cards: one promise for all its parts, settled once every
 * part's CloseWait has finished (rejected with the first failure of giul's own).
 */
export class PartsClosing {
  readonly promise: Promise<void>;
  private readonly resolve: () => void;
  private readonly reject: (error: unknown) => void;
  private failure: { error: unknown } | null = null;

  constructor(private left: number) {
    this.promise = new Promise<void>(captureResolvers);
    this.resolve = resolved;
    this.reject = rejected;
    resolved = NOOP;
    rejected = NOOP;
  }

  /** One part finished (`thrown`: what its measuring threw). */
  done(thrown: { error: unknown } | null): void {
    if (thrown !== null && this.failure === null) this.failure = thrown;
    this.left -= 1;
    if (this.left > 0) return;
    if (this.failure === null) this.resolve();
    else this.reject(this.failure.error);
  }
}

export class CloseWait implements Accounted {
  /** Accounted once: a second call (accounting threw after the waiter was taken) is ignored. */
  private arrivedOnce = false;

  /** close()'s promise, settled by this waiter. */
  readonly promise: Promise<void>;
  private readonly resolve: () => void;
  private readonly reject: (error: unknown) => void;

  constructor(
    private readonly window: Closing,
    readonly event: LedgerEvent,
    private readonly concurrency: Concurrency,
    /** The contention check still to await (it never rejects: a failure is giul's own). */
    private readonly contention: Promise<void> | null,
    /** A part of a window over several cards: the close of all its parts, told instead. */
    private readonly parts: PartsClosing | null = null,
  ) {
    if (parts !== null) {
      this.promise = parts.promise;
      this.resolve = NOOP;
      this.reject = NOOP;
      return;
    }
    this.promise = new Promise<void>(captureResolvers);
    this.resolve = resolved;
    this.reject = rejected;
    resolved = NOOP;
    rejected = NOOP;
  }

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
      if (this.parts !== null) this.parts.done(null);
      else this.resolve();
    } catch (error) {
      if (this.parts !== null) this.parts.done({ error });
      else this.reject(error);
    }
  }
}
