/**
 * What a window on a shared card (its node names a `servingMatch`) saw of the card's other
 * tenants: who was resident at its edges and, when watching, in between (../contention.ts).
 */
import { contentionOver, type ProcessWatcher, watcherFor } from "../contention.js";
import type { ResolvedNode } from "../rules/node.js";
import type { CardReader } from "../track/card.js";
import type { BackendName, ContendingProcess, ProcessRead } from "../vocabulary/measurement.js";

export class Witness {
  /** Tenants seen, once checked (null before, or when none could be read). */
  contendedBy: readonly ContendingProcess[] | null = null;
  /** Why contention could not be checked, or null. */
  unchecked: string | null = null;
  /** The card's process watcher (shared by every window on it), or null where none can be read. */
  readonly watcher: ProcessWatcher | null = null;
  private readonly atOpen: Promise<ProcessRead> | null = null;

  constructor(
    private readonly node: ResolvedNode,
    reader: CardReader | null,
    backend: BackendName,
    openNs: bigint,
    private readonly watching: boolean,
  ) {
    if (reader === null) {
      this.unchecked = `contention could not be checked: the ${backend} backend cannot read the card's processes`;
      return;
    }
    // Who is resident at the opening edge (coalesced with every other window on the card).
    this.watcher = watcherFor(reader, node.contentionIntervalMs);
    this.atOpen = this.watcher.after(openNs);
    if (watching) this.watcher.watch();
  }

  /** The watch this window holds (released if it is abandoned), or null. */
  held(): ProcessWatcher | null {
    return this.watching ? this.watcher : null;
  }

  /** Tenants at the two edges (and, when watching, in between); null where none can be read. Never rejects. */
  check(openNs: bigint, closeNs: bigint): Promise<void> | null {
    const watcher = this.watcher;
    if (watcher === null) return null;
    return contentionOver(this.node, watcher, this.atOpen, this.watching, openNs, closeNs).then((seen) => {
      this.contendedBy = seen.contendedBy;
      if (seen.unchecked !== null) this.unchecked = seen.unchecked;
    });
  }
}
