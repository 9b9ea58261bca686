/**
 * Every backend, in order of preference. The first that can serve a card serves it; a card none
 * can serve is metered by none (estimated with a hint, else unknown). Each source's descriptor
 * comes from its own folder under src/sources/; adding one (another vendor's library, say) is that
 * folder and one line here.
 */

import { amdsmiCounterBackend, amdsmiSamplerBackend } from "../sources/native/amd.js";
import { nvmlCounterBackend, nvmlSamplerBackend } from "../sources/native/descriptor.js";
import { remoteAgentBackend } from "../sources/remote/descriptor.js";
import { simulatedBackend } from "../sources/simulated/descriptor.js";
import { amdSmiCliBackend, smiSamplerBackend } from "../sources/smi/descriptor.js";
import type { BackendDescriptor, CardTarget, LocalCapabilities } from "../track/descriptor.js";
import type { BackendName } from "../vocabulary/measurement.js";

const REGISTRY: readonly BackendDescriptor[] = [
  simulatedBackend,
  nvmlCounterBackend,
  nvmlSamplerBackend,
  amdsmiCounterBackend,
  amdsmiSamplerBackend,
  smiSamplerBackend,
  amdSmiCliBackend,
  remoteAgentBackend,
];

/** Changes whenever a descriptor's generation does: cached local choices made before are stale. */
export function registryGeneration(): number {
  let sum = 0;
  for (const d of REGISTRY) sum += d.generation?.() ?? 0;
  return sum;
}

/** The descriptor of `name`, or null for `none`. */
export function descriptorOf(name: BackendName): BackendDescriptor | null {
  return REGISTRY.find((d) => d.name === name) ?? null;
}

/** The first backend in the registry that can serve `card`, or null (none can). */
export function firstServing(card: CardTarget, caps: LocalCapabilities | null): BackendDescriptor | null {
  return REGISTRY.find((d) => d.canServe(card, caps)) ?? null;
}

/** Local GPU `index` as a card for the registry. */
function localCard(index: number): CardTarget {
  return { isLocal: true, gpuIndex: index, powerEndpoint: null, timeoutMs: 0 };
}

/** The backend a local Meter would use on GPU `index`, given what it offers (giul-probe's report). */
export function chooseLocalBackend(index: number, caps: LocalCapabilities): BackendName {
  return firstServing(localCard(index), caps)?.name ?? "none";
}
