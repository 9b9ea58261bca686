/**
 * Every backend, in order of preference. The first that can serve a card serves it; a card none
 * can serve is metered by none (estimated with a hint, else unknown). Each backend's descriptor
 * comes from its own file under src/backends/; adding one (another vendor's library, say) is that
 * file and one line here.
 */

import { nvmlCounterBackend, nvmlSamplerBackend } from "../sources/native/descriptor.js";
import { remoteAgentBackend } from "../sources/remote/descriptor.js";
import { simulatedBackend } from "../sources/simulated/descriptor.js";
import { smiSamplerBackend } from "../sources/smi/descriptor.js";
import type { BackendDescriptor, CardTarget, LocalCapabilities } from "../track/descriptor.js";
import type { BackendName } from "../vocabulary/measurement.js";

const REGISTRY: readonly BackendDescriptor[] = [
  simulatedBackend,
  nvmlCounterBackend,
  nvmlSamplerBackend,
  smiSamplerBackend,
  remoteAgentBackend,
];

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
