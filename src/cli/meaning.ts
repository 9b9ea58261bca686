import type { BackendName } from "../vocabulary/measurement.js";

/** One line on what a backend means for a person reading the probe. */
export const BACKEND_MEANING: Readonly<Record<BackendName, string>> = {
  nvml_counter: "reads the card's own energy counter at each window's edges (the most accurate)",
  nvml_sampler: "no energy counter: integrates NVML power readings taken on a native sampling thread",
  amdsmi_counter: "reads the AMD card's own energy counter (AMD SMI) at each window's edges",
  amdsmi_sampler: "AMD card without a usable counter: integrates AMD SMI socket power on a native thread",
  amdsmi_cli: "no addon or AMD SMI library: reads the counter as amd-smi prints it, once a second",
  smi_sampler: "no NVML: integrates power read from a long-lived nvidia-smi (coarser)",
  remote_agent: "asks a giul-agent on the GPU's host over HTTP",
  simulated: "a simulated card (giul/testing): no hardware is measured",
  mixed: "a window over several cards measured by different backends (each card's is listed)",
  none: "cannot measure this card: figures will be estimated (with a hint) or unknown",
};
