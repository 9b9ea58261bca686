import type { BackendName } from "../measurement.js";

/** What a local card offers, as probed once (see src/host.ts). */
export interface LocalCapabilities {
  /** The addon loaded and NVML initialised. */
  readonly nvml: boolean;
  /** nvmlDeviceGetTotalEnergyConsumption answers on this card. */
  readonly energyCounter: boolean;
  /** NVML reads power on this card (field 186 or nvmlDeviceGetPowerUsage). */
  readonly nvmlPower: boolean;
  /** An nvidia-smi that reads this card's power was found. */
  readonly smi: boolean;
}

/**
 * The order of preference for a local card: the counter, then NVML power integrated on the
 * native thread, then nvidia-smi, else none. Pure: the one rule, used by select.ts and giul-probe.
 */
export function chooseLocalBackend(caps: LocalCapabilities): BackendName {
  if (caps.nvml && caps.energyCounter) return "nvml_counter";
  if (caps.nvml && caps.nvmlPower) return "nvml_sampler";
  if (caps.smi) return "smi_sampler";
  return "none";
}
