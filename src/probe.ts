import { type Node, resolveNode } from "./rules/node.js";
import { forcedBackend, select } from "./select/index.js";
import { partitionOfNode, sliceState } from "./select/mig.js";
import { debug } from "./vocabulary/debug.js";
import { GiulError } from "./vocabulary/errors.js";
import { type CardState, type Failure, fail, type Result } from "./vocabulary/measurement.js";

/** A card's state, for callers deciding whether to spend something on it. */
export interface NodeState {
  readonly memoryFreeMib: number | null;
  readonly memoryUsedMib: number | null;
  readonly memoryTotalMib: number | null;
  readonly utilizationPct: number | null;
  readonly computeApps: readonly {
    readonly pid: number;
    readonly usedMib: number | null;
    readonly name: string | null;
  }[];
}

export interface ProbeOptions {
  /** Give up after this many ms and resolve null. Default 2000. */
  readonly timeoutMs?: number;
}

/**
 * Reads a node's card through the backend a Meter would use (NVML off the JS thread, nvidia-smi, or
 * the node's giul-agent). Resolves null when the card cannot be read — unknown, not fine. Never
 * rejects for the card's sake; only an invalid node or option throws.
 */
export async function probeNode(node: Node, options: ProbeOptions = {}): Promise<NodeState | null> {
  const resolved = resolveNode(node);
  const timeoutMs = options.timeoutMs ?? 2000;
  if (typeof timeoutMs !== "number" || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new GiulError(
      "INVALID_OPTION",
      `timeoutMs: expected a number of ms > 0, got ${String(timeoutMs)}`,
      {
        field: "timeoutMs",
      },
    );
  }
  const forced = forcedBackend();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Failure>((resolve) => {
    timer = setTimeout(() => resolve(fail(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    const read = (async (): Promise<Result<CardState>> => {
      const selection = await select(resolved, forced);
      const reader = selection.reader ?? null;
      if (reader === null)
        return fail(selection.reason ?? `the ${selection.backend} backend cannot read the card`);
      const state = await reader.readState();
      const slice = partitionOfNode(resolved);
      return slice === null || !state.ok ? state : sliceState(state.value, slice, reader);
    })();
    const got = await Promise.race([read, timeout]);
    if (!got.ok) {
      debug("probeNode %s: %s", resolved.name, got.reason);
      return null;
    }
    const state = got.value;
    return Object.freeze({
      memoryFreeMib: state.memoryFreeMib,
      memoryUsedMib: state.memoryUsedMib,
      memoryTotalMib: state.memoryTotalMib,
      utilizationPct: state.utilizationPct,
      computeApps: Object.freeze(
        state.computeApps.map((p) => Object.freeze({ pid: p.pid, usedMib: p.usedMib, name: p.name })),
      ),
    });
  } catch (error) {
    debug("probeNode %s failed: %s", resolved.name, String(error));
    return null;
  } finally {
    clearTimeout(timer);
  }
}

/** Whether a server that sizes its pool as a fraction of total memory would start on the card. */
export interface PoolFit {
  /** true: fits; false: it would not start; null: the card's memory is unknown. */
  readonly fits: boolean | null;
  /** What the server would ask for: fraction × total (MiB), or null when unknown. */
  readonly requestedMib: number | null;
  readonly freeMib: number | null;
  /** How much is missing (MiB); 0 when it fits, null when unknown. */
  readonly shortfallMib: number | null;
  /** For a person, naming the shortfall. */
  readonly reason: string;
}

/**
 * vLLM sizes its pool as `gpu_memory_utilization` × total memory and refuses to start when that
 * exceeds what is free, so a wake into a card with a tenant crash-loops until a timeout. This says
 * in microseconds, from a {@link probeNode} result, whether it would fit and by how much it falls short.
 */
export function poolFits(state: NodeState | null, gpuMemoryUtilization: number): PoolFit {
  if (
    typeof gpuMemoryUtilization !== "number" ||
    !Number.isFinite(gpuMemoryUtilization) ||
    gpuMemoryUtilization <= 0 ||
    gpuMemoryUtilization > 1
  ) {
    throw new GiulError(
      "INVALID_OPTION",
      `gpuMemoryUtilization: expected a fraction in (0, 1], got ${String(gpuMemoryUtilization)}`,
      { field: "gpuMemoryUtilization" },
    );
  }
  if (state === null || state.memoryTotalMib === null || state.memoryFreeMib === null) {
    return {
      fits: null,
      requestedMib: state?.memoryTotalMib != null ? state.memoryTotalMib * gpuMemoryUtilization : null,
      freeMib: state?.memoryFreeMib ?? null,
      shortfallMib: null,
      reason: "the card's memory could not be read: unknown, not fine",
    };
  }
  const requestedMib = state.memoryTotalMib * gpuMemoryUtilization;
  const shortfallMib = Math.max(0, Math.ceil(requestedMib - state.memoryFreeMib));
  const tenants = state.computeApps
    .filter((p) => p.usedMib !== null)
    .map((p) => `${p.name ?? "?"} (pid ${p.pid}, ${p.usedMib} MiB)`)
    .join(", ");
  return {
    fits: shortfallMib === 0,
    requestedMib,
    freeMib: state.memoryFreeMib,
    shortfallMib,
    reason:
      shortfallMib === 0
        ? `fits: ${Math.ceil(requestedMib)} MiB requested, ${state.memoryFreeMib} MiB free`
        : `short by ${shortfallMib} MiB: ${Math.ceil(requestedMib)} MiB requested (${gpuMemoryUtilization} × ${state.memoryTotalMib} MiB), ${state.memoryFreeMib} MiB free${tenants ? `; resident: ${tenants}` : ""}`,
  };
}
