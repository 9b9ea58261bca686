/**
 * A window opened and never closed (a caller's bug) must not keep its card's sampler, its
 * contention watch or its weight on the card for the life of the process: when its Meter is
 * collected, what it held is released (./meter.ts hands each window here as it opens, and takes it
 * back as it closes).
 *
 * A FinalizationRegistry's weak cells and unregister tokens are dear for the collector, and almost
 * every window closes within a second, so a window is registered only once it has stayed open
 * across a whole sweep (1 to 2 s after it opened). Until then this list holds it (strongly, so an abandoned window is released up
 * to 2 s later than it would have been); a window that closes leaves the list at once, so nothing
 * closed is kept alive.
 */

import type { ProcessWatcher } from "../contention.js";
import type { CardLedger, LedgerWindow } from "../ledger/ledger.js";
import type { Track } from "../track/track.js";

/** How often windows still open are looked at (ms): one open across a whole sweep is registered. */
export const SWEEP_MS = 1000;

/** Leftovers.slot of a window registered with the FinalizationRegistry. */
const REGISTERED = -1;
/** Leftovers.slot of a window no longer watched (closed). */
const GONE = -2;

/**
 * What an abandoned window releases: its card's track, its contention watch, and its weight on the
 * card (closed in the ledger). One object per window, not a
 * closure and the scope it keeps. It holds what it releases, never the Meter.
 */
export class Leftovers {
  /** Where its Meter is in the watch's list, or REGISTERED, or GONE. */
  slot = GONE;
  /** The watch's sweep count when it was added. */
  since = 0;

  constructor(
    private readonly track: Track,
    private readonly watch: ProcessWatcher | null,
    private readonly ledger: CardLedger,
    private readonly entries: LedgerWindow,
  ) {}

  release(): void {
    if (this.entries.weight > 0) this.ledger.closeWindow(this.entries);
    this.track.release();
    this.watch?.unwatch();
  }
}

/** Every open window of this environment: collected unclosed, its leftovers are released. */
export class AbandonedWindows {
  /** Windows open since before the latest sweeps, not registered yet, and their leftovers. */
  private readonly meters: object[] = [];
  private readonly held: Leftovers[] = [];
  private sweeps = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly registry = new FinalizationRegistry<Leftovers>((held) => held.release());

  constructor(private readonly sweepMs: number = SWEEP_MS) {}

  /** Windows listed now (open, not registered yet). */
  get listed(): number {
    return this.meters.length;
  }

  /** `meter` opened: watched from now on, `leftovers` released if it is collected unclosed. */
  add(meter: object, leftovers: Leftovers): void {
    leftovers.slot = this.meters.length;
    leftovers.since = this.sweeps;
    this.meters.push(meter);
    this.held.push(leftovers);
    if (this.timer === null) {
      this.timer = setTimeout(() => this.sweep(), this.sweepMs);
      this.timer.unref();
    }
  }

  /** Its window is closing: no longer watched. Idempotent. */
  remove(leftovers: Leftovers): void {
    if (leftovers.slot === REGISTERED) this.registry.unregister(leftovers);
    else if (leftovers.slot >= 0) this.drop(leftovers.slot);
    leftovers.slot = GONE;
  }

  /** Registers the windows open across a whole sweep, and looks again later while any is listed. */
  sweep(): void {
    this.timer = null;
    const now = this.sweeps++;
    // From the end: drop() moves the last entry, already looked at, into the slot.
    for (let i = this.meters.length - 1; i >= 0; i--) {
      const held = this.held[i] as Leftovers;
      if (held.since >= now) continue;
      this.registry.register(this.meters[i] as object, held, held);
      this.drop(i);
      held.slot = REGISTERED;
    }
    if (this.meters.length > 0 && this.timer === null) {
      this.timer = setTimeout(() => this.sweep(), this.sweepMs);
      this.timer.unref();
    }
  }

  /** Takes slot `slot` out of the lists, the last entry moved into it. */
  private drop(slot: number): void {
    const last = this.meters.length - 1;
    if (slot !== last) {
      const moved = this.held[last] as Leftovers;
      this.meters[slot] = this.meters[last] as object;
      this.held[slot] = moved;
      moved.slot = slot;
    }
    this.meters.pop();
    this.held.pop();
  }
}

/** This environment's open windows. */
export const abandoned = new AbandonedWindows();
