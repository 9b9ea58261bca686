import type { CardInfo, CardSlices, CardState, ProcessRead, Result } from "../vocabulary/measurement.js";

/**
 * Reads a card's state for contention checks, probeNode and giul-agent, through whatever the
 * node's backend uses (NVML off the JS thread, nvidia-smi, the agent). Never rejects.
 */
export interface CardReader {
  /** Reads the compute processes now (the read starts when called). */
  readProcesses(): Promise<ProcessRead>;
  /** Reads the card's own values (name, memory, utilization), without its processes. */
  readInfo(): Promise<Result<CardInfo>>;
  /** Reads the values and the processes, or why either could not be read. */
  readState(): Promise<Result<CardState>>;
  /** Reads the card's MIG mode and slices (NVML only; absent where the backend cannot). */
  readSlices?(): Promise<Result<CardSlices>>;
}

/**
 * On a host with both NVIDIA and AMD cards, an AMD card found by its UUID is addressed inside giul
 * as AMD_ON_MIXED_HOST + its AMD SMI index (a node's own gpuIndex stops at 1023), so that no part
 * keyed by a card's index mistakes it for the NVIDIA card of the same number. Records show its
 * AMD SMI index.
 */
export const AMD_ON_MIXED_HOST = 1024;

/** The index a card's own vendor library numbers it by (AMD SMI's for an AMD card on a mixed host). */
export function vendorIndex(gpuIndex: number): number {
  return gpuIndex >= AMD_ON_MIXED_HOST ? gpuIndex - AMD_ON_MIXED_HOST : gpuIndex;
}
