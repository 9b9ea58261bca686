import type { CardState, ProcessRead, Result } from "../measurement.js";

/**
 * Reads a card's state for contention checks and probeNode, through whatever the node's backend
 * uses (NVML off the JS thread, nvidia-smi, the agent). Never rejects.
 */
export interface CardReader {
  /** Reads the compute processes now (the read starts when called). */
  readProcesses(): Promise<ProcessRead>;
  /** Reads memory, utilization and processes, or why it could not. */
  readState(): Promise<Result<CardState>>;
}
