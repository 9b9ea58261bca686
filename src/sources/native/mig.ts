/**
 * A card's MIG devices (slices) through the addon: the raw read, and the CardReader's view of it
 * (readSlices). Which slice a node names and what its windows weigh is ../../select/mig.ts's.
 */
import type { GiulBinding, MigInfo, NativeFailure } from "../../../binding.js";
import { type CardSlices, fail, ok, type Result } from "../../vocabulary/measurement.js";

/** A card's MIG devices as the addon reads them (null: an addon without MIG support). */
export async function readMig(
  binding: GiulBinding,
  index: number,
  keepAlive = true,
): Promise<MigInfo | NativeFailure | null> {
  if (binding.migDevices === undefined) return null;
  try {
    return await binding.migDevices(index, { keepAlive });
  } catch (error) {
    return { ok: false, code: "NVML_CALL_FAILED", nvmlReturn: null, reason: String(error) };
  }
}

/** A card's slices as the CardReader gives them (readSlices), from the addon's MIG read. */
export async function cardSlices(
  binding: GiulBinding,
  index: number,
  keepAlive = false,
): Promise<Result<CardSlices>> {
  const mig = await readMig(binding, index, keepAlive);
  if (mig === null) return fail("this build of the giul addon cannot read MIG devices");
  if (!mig.ok) return fail(mig.reason);
  return ok({
    enabled: mig.enabled,
    cardSlices: mig.cardSlices,
    slices: mig.slices.map((s) => ({
      uuid: s.uuid,
      profile: profileOf(s.name, s.slices, s.memoryTotalMib),
      gpuInstanceId: s.gpuInstanceId,
      computeInstanceId: s.computeInstanceId,
      slices: s.slices,
      memoryTotalMib: s.memoryTotalMib,
      memoryUsedMib: s.memoryUsedMib,
    })),
  });
}

/** The profile of a slice: from its name ("… MIG 3g.40gb"), else its slices and memory. */
export function profileOf(
  name: string | null,
  slices: number | null,
  memoryMib: number | null,
): string | null {
  const m = name === null ? null : /\bMIG\s+(\S+)$/.exec(name);
  if (m !== null) return m[1] as string;
  if (slices === null) return null;
  return memoryMib === null ? `${slices}g` : `${slices}g.${Math.round(memoryMib / 1024)}gb`;
}
