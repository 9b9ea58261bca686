/**
 * What a window on a shared card (its node names a `servingMatch`, or a MIG slice) saw of the
 * card's other tenants: who was resident at its edges and, when watching, in between
 * (../contention.ts). On a MIG slice, also whether the slice was still there at the close (a
 * reconfigured card meters nothing of a slice that is gone), and which slice each tenant was on.
 */
import { contentionOver, type ProcessWatcher, watcherFor } from "../contention.js";
import type { CardLedger } from "../ledger/ledger.js";
import type { ResolvedNode } from "../rules/node.js";
import type { Selection } from "../select/index.js";
import { partitionOfNode } from "../select/mig.js";
import type { CardReader } from "../track/card.js";
import type {
  BackendName,
  CardSlices,
  ContendingProcess,
  Partition,
  ProcessRead,
  Result,
} from "../vocabulary/measurement.js";

/**
 * The witness of a window on `node`'s card, where the node names a serving process or a MIG slice
 * (its selection made); null where nothing is watched (a dedicated card).
 */
export function witnessFor(
  node: ResolvedNode,
  selection: Selection | null,
  openNs: bigint,
  watching: boolean,
  ledger: CardLedger,
): Witness | null {
  const slice = partitionOfNode(node);
  if (node.servingMatch === null && slice === null) return null;
  const backend = selection?.backend ?? "none";
  return new Witness(node, selection?.reader ?? null, backend, openNs, watching, slice, ledger.giulPids);
}

/** How long the close waits for a MIG listing (ms): past it, the slice is taken as present. */
const SLICES_TIMEOUT_MS = 5_000;

export class Witness {
  /** Tenants seen, once checked (null before, or when none could be read). */
  contendedBy: readonly ContendingProcess[] | null = null;
  /** Why contention could not be checked, or null. */
  unchecked: string | null = null;
  /** The slice the window was on was gone at its close: why it cannot be measured, or null. */
  gone: string | null = null;
  /** The card's process watcher (shared by every window on it), or null where none can be read. */
  readonly watcher: ProcessWatcher | null = null;
  private readonly atOpen: Promise<ProcessRead> | null = null;

  constructor(
    private readonly node: ResolvedNode,
    private readonly reader: CardReader | null,
    backend: BackendName,
    openNs: bigint,
    private readonly watching: boolean,
    /** The MIG slice the window is on, or null for a whole card. */
    readonly partition: Partition | null = null,
    /** The pids of the card's giul processes (a MIG slice's windows tell them from tenants). */
    private readonly giulPids: (() => readonly number[]) | null = null,
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
    const p = this.partition;
    const seen = contentionOver(
      this.node,
      watcher,
      this.atOpen,
      this.watching,
      openNs,
      closeNs,
      p,
      this.giulPids,
    );
    const slices = p === null ? null : readSlicesWithin(this.reader as CardReader);
    return Promise.all([seen, slices]).then(([seen, listed]) => {
      this.contendedBy = seen.contendedBy;
      if (seen.unchecked !== null) this.unchecked = seen.unchecked;
      if (p === null || listed === null || !listed.ok) return;
      const byGi = new Map(listed.value.slices.map((s) => [s.gpuInstanceId, s.uuid]));
      if (this.contendedBy !== null)
        this.contendedBy = this.contendedBy.map((t) => {
          const uuid = t.gpuInstanceId === undefined ? null : (byGi.get(t.gpuInstanceId) ?? null);
          return uuid === null ? t : { ...t, slice: uuid };
        });
      if (!listed.value.slices.some((s) => s.uuid === p.sliceUuid))
        this.gone =
          `MIG slice ${p.sliceUuid} was gone from ${p.cardUuid ?? "its card"} at the closing edge ` +
          "(MIG reconfigured): what the window drew on it cannot be told";
    });
  }
}

/** The reader's MIG listing, or null where it has none or it does not answer in time. */
function readSlicesWithin(reader: CardReader): Promise<Result<CardSlices> | null> {
  const read = reader.readSlices?.();
  if (read === undefined) return Promise.resolve(null);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((done) => {
    timer = setTimeout(() => done(null), SLICES_TIMEOUT_MS);
    timer.unref();
  });
  return Promise.race([read, late]).finally(() => clearTimeout(timer));
}
