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
