/**
 * MIG slices. A slice has no sensor: NVML answers power and energy for the whole card only. A Node
 * naming a slice by its UUID (`MIG-…`, or the older `MIG-GPU-<card UUID>/<gi>/<ci>`) is metered on
 * the card the slice is on, its windows charged their share of it (../meter: weighted by the
 * slice's GPU-instance slices out of the card's). Slices are found among NVML's cards' MIG devices
 * (nvmlDeviceGetMigDeviceHandleByIndex), as `nvidia-smi -L` lists them.
 */
import type { MigInfo } from "../../binding.js";
import type { ResolvedNode } from "../rules/node.js";
import { profileOf, readMig } from "../sources/native/mig.js";
import type { CardReader } from "../track/card.js";
import { type CardState, fail, ok, type Partition, type Result } from "../vocabulary/measurement.js";
import { defaultHostDeps, localCapabilities, nvmlState } from "./capabilities.js";

export type { Partition } from "../vocabulary/measurement.js";

/** Whether a UUID names a MIG slice rather than a card. */
export function isSliceUuid(uuid: string): boolean {
  return /^MIG-/i.test(uuid);
}

/** The older form, `MIG-GPU-<card UUID>/<gi>/<ci>`: its card and instance ids; null for others. */
export function legacySliceUuid(uuid: string): { cardUuid: string; gi: number; ci: number } | null {
  const m = /^MIG-(GPU-[0-9a-f-]+)\/(\d+)\/(\d+)$/i.exec(uuid);
  return m === null ? null : { cardUuid: m[1] as string, gi: Number(m[2]), ci: Number(m[3]) };
}

/** A slice found: the card's index, and what a window on it is (or why it cannot be metered). */
export type SliceLookup =
  | { readonly index: number; readonly partition: Partition }
  | { readonly index: null; readonly reason: string; readonly refused: boolean };

/**
 * Finds the slice a UUID names among this host's cards. Not found: why, the UUID named (as for a
 * card). `refused`: the UUID names a card that is not in MIG mode (a configuration error).
 */
export async function findSlice(uuid: string): Promise<SliceLookup> {
  const nvml = await nvmlState(defaultHostDeps, false);
  if (nvml.binding === null || !nvml.status.available) {
    const why =
      nvml.binding === null ? "the giul addon is not loaded" : `NVML is unavailable: ${nvml.status.reason}`;
    return {
      index: null,
      refused: false,
      reason: `MIG slice ${uuid} is named by UUID, which NVML finds, and ${why}`,
    };
  }
  const legacy = legacySliceUuid(uuid);
  const seen: string[] = [];
  for (let index = 0; index < nvml.status.deviceCount; index++) {
    const cardUuid = (await localCapabilities(index)).info?.uuid ?? null;
    const onCard =
      legacy !== null && cardUuid !== null && cardUuid.toLowerCase() === legacy.cardUuid.toLowerCase();
    const mig = await readMig(nvml.binding, index, false);
    if (mig === null) {
      return {
        index: null,
        refused: false,
        reason: `MIG slice ${uuid}: this build of the giul addon cannot read MIG devices`,
      };
    }
    if (!mig.ok || !mig.enabled) {
      if (onCard)
        return {
          index: null,
          refused: true,
          reason: `gpuUuid ${uuid} names a MIG slice of GPU ${index} (${cardUuid}), which is not in MIG mode${mig.ok ? "" : `: ${mig.reason}`}; name the card itself (gpuUuid "${cardUuid}" or gpuIndex ${index})`,
        };
      continue;
    }
    for (const s of mig.slices) {
      const match =
        legacy !== null
          ? onCard && s.gpuInstanceId === legacy.gi && s.computeInstanceId === legacy.ci
          : s.uuid !== null && s.uuid.toLowerCase() === uuid.toLowerCase();
      if (match) return { index, partition: partitionOf(s, mig, cardUuid) };
      seen.push(`${s.uuid ?? "?"} on GPU ${index}`);
    }
  }
  return {
    index: null,
    refused: false,
    reason: `no MIG slice on this host has UUID ${uuid} (NVML's slices: ${seen.length > 0 ? seen.join(", ") : "none"})`,
  };
}

function partitionOf(s: MigInfo["slices"][number], mig: MigInfo, cardUuid: string | null): Partition {
  return Object.freeze({
    kind: "mig",
    profile: profileOf(s.name, s.slices, s.memoryTotalMib),
    sliceUuid: s.uuid ?? "",
    cardUuid,
    // A slice whose attributes cannot be read weighs one slice; a card whose count cannot, 7.
    slices: s.slices ?? 1,
    cardSlices: mig.cardSlices ?? 7,
    gpuInstanceId: s.gpuInstanceId,
    computeInstanceId: s.computeInstanceId,
  });
}

/** Slices found, by the UUID a node names them by (lower case). */
const found = new Map<string, Partition>();

/** Records a slice found for `uuid` (select/index.ts, once it has looked it up). */
export function rememberSlice(uuid: string, partition: Partition): void {
  found.set(uuid.toLowerCase(), partition);
}

/** The slice a one-card local node names, once found; null for a card, a remote node, or not yet. */
export function partitionOfNode(node: ResolvedNode): Partition | null {
  if (!node.isLocal || node.cards.length !== 1) return null;
  const uuid = node.cards[0]?.gpuUuid ?? null;
  return uuid === null || !isSliceUuid(uuid) ? null : (found.get(uuid.toLowerCase()) ?? null);
}

/** What a window on a slice weighs on its card's ledger: its weight times the slice's share. */
export function sliceShare(partition: Partition | null): number {
  return partition === null ? 1 : partition.slices / partition.cardSlices;
}

/** The plain word a slice's record carries: it has no sensor, and the figure is its share. */
export function partitionNote(p: Partition): string {
  const card = p.cardUuid ?? "its card";
  return (
    `MIG slice ${p.sliceUuid}${p.profile === null ? "" : ` (${p.profile})`} has no power sensor of its own: ` +
    `this is its share of ${card}, weighted ${p.slices} of ${p.cardSlices} slices`
  );
}

/**
 * A card's state as a slice sees it (probeNode on a slice): the slice's memory and the processes
 * on its GPU instance; the card's utilization (NVML has none per slice: null in MIG mode anyway).
 */
export async function sliceState(
  card: CardState,
  p: Partition,
  reader: CardReader,
): Promise<Result<CardState>> {
  const listed = (await reader.readSlices?.()) ?? fail("the backend cannot list MIG slices");
  if (!listed.ok) return listed;
  const slice = listed.value.slices.find((s) => s.uuid === p.sliceUuid);
  if (slice === undefined) return fail(`MIG slice ${p.sliceUuid} is gone from ${p.cardUuid ?? "its card"}`);
  const total = slice.memoryTotalMib;
  const used = slice.memoryUsedMib;
  return ok({
    ...card,
    memoryTotalMib: total,
    memoryUsedMib: used,
    memoryFreeMib: total === null || used === null ? null : Math.max(0, total - used),
    computeApps: card.computeApps.filter((a) => a.gpuInstanceId === p.gpuInstanceId),
  });
}
