/**
 * A window opened and never closed (a caller's bug) must not keep its card's sampler, its
 * contention watch or its weight on the card for the life of the process: when its Meter is
 * collected, what it held is released (./meter.ts registers each window as it opens, and
 * unregisters it as it closes).
 */
import type { Track } from "./backends/track.js";
import type { ProcessWatcher } from "./contention.js";
import type { CardLedger, LedgerWindow } from "./ledger.js";
import type { OffloadCard, OffloadedWindow } from "./offload/client.js";

/**
 * What an abandoned window releases: its card's track, its contention watch, and its weight on the
 * card (closed in the ledger, or through the accounting worker). One object per window, not a
 * closure and the scope it keeps. It holds what it releases, never the Meter.
 */
export class Leftovers {
  constructor(
    private readonly track: Track,
    private readonly watch: ProcessWatcher | null,
    private readonly ledger: CardLedger | null,
    private readonly entries: LedgerWindow | null,
    private readonly card: OffloadCard | null,
    private readonly remote: OffloadedWindow | null,
  ) {}

  release(): void {
    if (this.remote !== null) {
      if (this.remote.weight > 0) void (this.card as OffloadCard).close(this.remote);
    } else if (this.entries !== null && this.entries.weight > 0) {
      (this.ledger as CardLedger).closeWindow(this.entries);
    }
    this.track.release();
    this.watch?.unwatch();
  }
}

/** Every open window, by its Meter: collected unclosed, its leftovers are released. */
export const abandoned = new FinalizationRegistry<Leftovers>((held) => held.release());
