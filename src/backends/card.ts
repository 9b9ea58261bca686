/** A process resident on a card. Unreadable values are null, never 0. */
export interface ProcessInfo {
  readonly pid: number;
  readonly name: string | null;
  readonly usedMib: number | null;
}

/** One read of a card's compute processes. `tNs` is when the read started (CLOCK_MONOTONIC). */
export type ProcessRead =
  | { readonly ok: true; readonly tNs: bigint; readonly processes: readonly ProcessInfo[] }
  | { readonly ok: false; readonly tNs: bigint; readonly reason: string };

/** What probeNode reports about a card. */
export interface CardState {
  readonly memoryFreeMib: number | null;
  readonly memoryUsedMib: number | null;
  readonly memoryTotalMib: number | null;
  readonly utilizationPct: number | null;
  readonly computeApps: readonly ProcessInfo[];
}

/**
 * Reads a card's state for contention checks and probeNode, through whatever the node's backend
 * uses (NVML off the JS thread, nvidia-smi, the agent). Never rejects.
 */
export interface CardReader {
  /** Reads the compute processes now (the read starts when called). */
  readProcesses(): Promise<ProcessRead>;
  /** Reads memory, utilization and processes; a string says why it could not. */
  readState(): Promise<CardState | string>;
}
