import { type ResolvedNode, withFoundIndex } from "../rules/node.js";
import { type CardReader, vendorIndex } from "../track/card.js";
import type { BackendDescriptor, CardCapabilities } from "../track/descriptor.js";
import type { Track } from "../track/track.js";
import { Backoff } from "../vocabulary/backoff.js";
import { debug } from "../vocabulary/debug.js";
import { GiulError } from "../vocabulary/errors.js";
import { BACKEND_NAMES, type BackendName } from "../vocabulary/measurement.js";
import { indexOfUuid, localCapabilities } from "./capabilities.js";
import { noteCardInUse } from "./in-use.js";
import { findSlice, isSliceUuid, rememberSlice } from "./mig.js";
import { descriptorOf, firstServing, registryGeneration } from "./registry.js";

/**
 * The one place that picks a backend for a node: the first in the registry (./registry.ts) that
 * can serve it — nvml_counter → nvml_sampler → amdsmi_counter → amdsmi_sampler → smi_sampler for
 * a local card, remote_agent for a
 * node with an agent — else none. A card's support is probed once and cached (./capabilities.ts);
 * a card that could not be probed is probed again after a backoff, not on every request.
 */

export interface Selection {
  readonly backend: BackendName;
  /** The shared track of the card, or null for `none` (and for a backend that failed). */
  readonly track: Track | null;
  /** Why the node is metered this way, when it is not the best way (or not at all). */
  readonly reason: string | null;
  /** Reads the card's processes and state (contention, probeNode, giul-agent), when the backend can. */
  readonly reader?: CardReader | null;
  /** GIUL_BACKEND forced a backend the card cannot serve: why (a configuration error, not a fault). */
  readonly forcedUnavailable?: string;
  /** The power limit the card enforces (W), where NVML reported one when it was probed. */
  readonly powerLimitW?: number | null;
  /**
   * What the card is known by on this host (its UUID; a simulated card's name), by which its
   * windows share it with every process and copy of giul; null where none is known (a remote
   * agent's card: shared by the agent's clients through the agent).
   */
  readonly cardKey?: string | null;
  /** Why a local card has no UUID: its key is then its index, shared only within this environment. */
  readonly noKeyReason?: string | null;
  /** The node names a MIG slice of a card that is not in MIG mode: why (a configuration error). */
  readonly notASlice?: string;
  /** The node names a card by index on a host with both vendors' cards: why (a configuration error). */
  readonly ambiguousIndex?: string;
  /** The card is on a host with both vendors' cards (found by UUID): why an index would not do. */
  readonly mixedHost?: string;
}

/** The UUID of a selection's card, where it is one (not a simulated card's name nor an index). */
export function cardUuid(selection: Selection | null, node: ResolvedNode): string | null {
  if (selection === null || !node.isLocal || selection.backend === "simulated") return null;
  return (selection.noKeyReason ?? null) === null ? (selection.cardKey ?? null) : null;
}

/** A one-card node's card: its index (null where not known here) and UUID (where known). */
export function cardOf(
  selection: Selection | null,
  node: ResolvedNode,
): { readonly index: number | null; readonly uuid: string | null } {
  const index = nodeAtCard(node).gpuIndex;
  const uuid = cardUuid(selection, node) ?? node.cards[0]?.gpuUuid ?? null;
  return { index: index < 0 ? null : vendorIndex(index), uuid };
}

/** Forced backends already known not to work, by card: forNode can refuse them at once. */
const forcedFailures = new Map<string, string>();

/** Why GIUL_BACKEND's backend cannot serve this local card, when a probe has already shown it. */
export function knownForcedFailure(node: ResolvedNode, forced: BackendName): string | null {
  if (!node.isLocal) return null;
  return forcedFailures.get(`${nodeAtCard(node).gpuIndex}:${forced}`) ?? null;
}

/** Indices of local cards found by UUID; lookups that found none, with when to look again. */
const foundIndex = new Map<string, number>();
const notFound = new Map<
  string,
  { readonly retryAt: number; readonly reason: string; readonly refused: boolean }
>();

/** A card or slice named by UUID and not found (`refused`: a slice of a card not in MIG mode). */
function notFoundSelection(reason: string, refused: boolean): Selection {
  return { backend: "none", track: null, reason, ...(refused ? { notASlice: reason } : {}) };
}

/** The UUID a one-card local node names its card by, or null (named by index, or remote). */
function namedUuid(node: ResolvedNode): string | null {
  return node.isLocal && node.gpuIndex < 0 ? (node.cards[0]?.gpuUuid ?? null) : null;
}

/**
 * The node as the per-card parts of giul address it: a local card named by UUID, with the index
 * it was found at (the node itself while not found, and for every other node).
 */
export function nodeAtCard(node: ResolvedNode): ResolvedNode {
  const uuid = namedUuid(node);
  if (uuid === null) return node;
  const index = foundIndex.get(uuid);
  return index === undefined ? node : withFoundIndex(node, index);
}

/** select() of a local card named by UUID: found once among NVML's cards, then by its index. */
async function selectNamed(node: ResolvedNode, uuid: string, forced: BackendName | null): Promise<Selection> {
  if (!foundIndex.has(uuid)) {
    const failed = notFound.get(uuid);
    if (failed !== undefined && Date.now() < failed.retryAt)
      return notFoundSelection(failed.reason, failed.refused);
    const lookup = isSliceUuid(uuid) ? await findSlice(uuid) : await indexOfUuid(uuid);
    if (lookup.index === null) {
      const refused = "refused" in lookup && lookup.refused;
      notFound.set(uuid, { retryAt: Date.now() + 5_000, reason: lookup.reason, refused });
      return notFoundSelection(lookup.reason, refused);
    }
    notFound.delete(uuid);
    if ("partition" in lookup) rememberSlice(uuid, lookup.partition);
    foundIndex.set(uuid, lookup.index);
  }
  return select(nodeAtCard(node), forced);
}

interface CacheEntry {
  readonly selection: Promise<Selection>;
  /** Date.now() after which a failed probe is tried again. */
  retryAt: number;
  /** registryGeneration() when probed. */
  readonly generation: number;
  /** Failed probes of this card in a row: 5 s, 10 s, … up to 5 min before the next. */
  readonly backoff: Backoff;
  /** The selection once the probe has answered (what selectNow returns). */
  settled: Selection | null;
}

const cache = new Map<string, CacheEntry>();

/** The backend forced by GIUL_BACKEND (for diagnosis), or null. Throws on an unknown name. */
export function forcedBackend(env: NodeJS.ProcessEnv = process.env): BackendName | null {
  const raw = env.GIUL_BACKEND;
  if (raw === undefined || raw === "") return null;
  if (
    !(BACKEND_NAMES as readonly string[]).includes(raw) ||
    ["remote_agent", "simulated", "mixed"].includes(raw)
  ) {
    throw new GiulError(
      "INVALID_OPTION",
      `GIUL_BACKEND=${raw}: expected one of nvml_counter, nvml_sampler, amdsmi_counter, amdsmi_sampler, smi_sampler, amdsmi_cli, none`,
      { field: "GIUL_BACKEND" },
    );
  }
  return raw as BackendName;
}

/** The selection for a node: cached per card, so every window on a card shares one track. */
export function select(node: ResolvedNode, forced: BackendName | null): Promise<Selection> {
  const uuid = namedUuid(node);
  if (uuid !== null) {
    const at = nodeAtCard(node);
    return at === node ? selectNamed(node, uuid, forced) : select(at, forced);
  }
  const key = cacheKey(node, forced);
  const hit = cache.get(key);
  if (hit !== undefined && usable(node, hit)) {
    // The card of this index was found by a UUID on a host with both vendors': not for an index.
    const mixedHost = hit.settled?.mixedHost;
    return mixedHost !== undefined && !foundByUuid(node)
      ? Promise.resolve(ambiguous(mixedHost))
      : hit.selection;
  }

  const entry: CacheEntry = {
    selection: Promise.resolve(null as unknown as Selection),
    retryAt: 0,
    generation: registryGeneration(),
    backoff: hit ? hit.backoff : new Backoff(5_000, 300_000),
    settled: null,
  };
  const selection = probe(node, forced).then((sel) => {
    if (sel.track === null && sel.backend !== "none") {
      entry.retryAt = Date.now() + entry.backoff.fail();
    } else if (sel.track === null && sel.reason !== null && forced === null) {
      // `none` because nothing could be probed: look again later (a driver may come back).
      entry.retryAt = Date.now() + entry.backoff.fail();
    }
    debug("node %s: backend %s%s", node.name, sel.backend, sel.reason ? ` (${sel.reason})` : "");
    entry.settled = sel;
    // A refusal for an index on a mixed host is the node's, not the card's: a UUID finds it anew.
    if (sel.ambiguousIndex !== undefined && cache.get(key) === entry) cache.delete(key);
    return sel;
  });
  (entry as { selection: Promise<Selection> }).selection = selection;
  cache.set(key, entry);
  return selection;
}

/**
 * The selection select() would resolve with, when it is already known (the card probed, nothing
 * to look at again): lets a window open without a promise or a timer. Null otherwise.
 */
export function selectNow(node: ResolvedNode, forced: BackendName | null): Selection | null {
  if (namedUuid(node) !== null) {
    const at = nodeAtCard(node);
    if (at === node) return null;
    node = at;
  }
  const hit = cache.get(cacheKey(node, forced));
  if (hit === undefined || hit.settled === null || !usable(node, hit)) return null;
  const mixedHost = hit.settled.mixedHost;
  return mixedHost !== undefined && !foundByUuid(node) ? ambiguous(mixedHost) : hit.settled;
}

/** A local node whose card was named by UUID (and found at its index). */
function foundByUuid(node: ResolvedNode): boolean {
  return (node.cards[0]?.gpuUuid ?? null) !== null;
}

/** The refusal of a card named by index on a host with both vendors' cards. */
function ambiguous(reason: string): Selection {
  return { backend: "none", track: null, reason, ambiguousIndex: reason };
}

function cacheKey(node: ResolvedNode, forced: BackendName | null): string {
  return node.isLocal
    ? `local:${node.gpuIndex}:${forced ?? ""}`
    : `remote:${node.powerEndpoint ?? ""}:${node.timeoutMs}`;
}

/** A cached selection still stands: not due for another probe, not made stale by a descriptor. */
function usable(node: ResolvedNode, hit: CacheEntry): boolean {
  // A simulated card declared or withdrawn since (giul/testing) makes a local choice stale.
  const fresh = !node.isLocal || hit.generation === registryGeneration();
  return fresh && (hit.retryAt === 0 || Date.now() < hit.retryAt);
}

async function probe(node: ResolvedNode, forced: BackendName | null): Promise<Selection> {
  try {
    if (!node.isLocal) {
      const remote = firstServing(node, null);
      if (remote === null) {
        return { backend: "none", track: null, reason: "the node is not local and has no powerEndpoint" };
      }
      return open(remote, node, null);
    }
    const caps = await localCapabilities(node.gpuIndex);
    // A card found by its UUID is no longer ambiguous: the index is the one it was found at.
    const mixedHost = caps.ambiguousIndex;
    if (mixedHost !== undefined && !foundByUuid(node)) return ambiguous(mixedHost);
    const chosen = forced === null ? firstServing(node, caps) : descriptorOf(forced);
    if (forced !== null && forced !== "none" && !(chosen?.canServe(node, caps) ?? false)) {
      const why = caps.reason ?? `the card does not offer what ${forced} needs`;
      const reason = `GIUL_BACKEND=${forced} was forced, but it cannot serve card ${node.gpuIndex}: ${why}`;
      forcedFailures.set(`${node.gpuIndex}:${forced}`, reason);
      return { backend: forced, track: null, reason, forcedUnavailable: reason };
    }
    if (chosen === null) {
      return {
        backend: "none",
        track: null,
        reason: caps.reason ?? `no way to read card ${node.gpuIndex}'s power`,
      };
    }
    const opened = open(chosen, node, caps);
    return mixedHost === undefined ? opened : { ...opened, mixedHost };
  } catch (error) {
    // Metering never fails the caller: a probe that throws is a node we cannot meter.
    return { backend: "none", track: null, reason: `probing the card failed: ${String(error)}` };
  }
}

/** The selection of `backend` for the card: its track and reader, or `none` with why it could not open. */
function open(backend: BackendDescriptor, node: ResolvedNode, caps: CardCapabilities | null): Selection {
  const opened = backend.open(node, caps);
  if (!opened.ok) return { backend: "none", track: null, reason: opened.reason };
  // A die read through its partner's counter is not a card of its own to the exporters.
  if (node.isLocal && caps?.counterAt === undefined) {
    const known = {
      uuid: caps?.info?.uuid,
      name: caps?.info?.name,
      driverVersion: caps?.driverVersion,
      vendor: caps?.vendor,
    };
    noteCardInUse(node.gpuIndex, backend.name, opened.value.track.readings, known);
  }
  return {
    backend: backend.name,
    track: opened.value.track,
    reason: null,
    reader: opened.value.reader,
    powerLimitW: caps?.info?.powerLimitW ?? null,
    ...cardKeyOf(backend.name, node, caps),
  };
}

/** The card's key on this host (see Selection.cardKey). */
function cardKeyOf(
  backend: BackendName,
  node: ResolvedNode,
  caps: CardCapabilities | null,
): { cardKey: string | null; noKeyReason: string | null } {
  if (!node.isLocal) return { cardKey: null, noKeyReason: null };
  if (backend === "simulated") return { cardKey: `simulated-${node.gpuIndex}`, noKeyReason: null };
  const uuid = caps?.cardKey ?? caps?.info?.uuid ?? null;
  if (uuid !== null && uuid !== "") return { cardKey: uuid, noKeyReason: null };
  // Known by its index: the same card to every copy of giul in this environment, not to other
  // processes (CUDA_VISIBLE_DEVICES may number cards otherwise there).
  return {
    cardKey: `index-${node.gpuIndex}`,
    noKeyReason: `the card's UUID is not known (${caps?.reason ?? "NVML could not read it"})`,
  };
}
