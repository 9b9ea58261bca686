/**
 * Where the vendors' tools are: the nvidia-smi that the smi_sampler runs (GIUL_NVIDIA_SMI when set,
 * else the first on PATH) and the amd-smi that amdsmi_cli runs (GIUL_AMD_SMI, PATH, /opt/rocm/bin).
 * Found without running them.
 */
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, isAbsolute, join, resolve } from "node:path";

export interface SmiStatus {
  /** The nvidia-smi that would be run (GIUL_NVIDIA_SMI, else the first on PATH), or null. */
  readonly path: string | null;
  /** Why there is none, or null. */
  readonly reason: string | null;
}

function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Finds nvidia-smi without running it: GIUL_NVIDIA_SMI when set, else a search of PATH. */
export function findNvidiaSmi(env: NodeJS.ProcessEnv = process.env): SmiStatus {
  return findTool("nvidia-smi", "GIUL_NVIDIA_SMI", env);
}

/** Finds AMD's amd-smi the same way: GIUL_AMD_SMI when set, else PATH, else ROCm's /opt/rocm/bin. */
export function findAmdSmi(env: NodeJS.ProcessEnv = process.env): SmiStatus {
  const found = findTool("amd-smi", "GIUL_AMD_SMI", env);
  if (found.path !== null || env.GIUL_AMD_SMI) return found;
  return isExecutableFile("/opt/rocm/bin/amd-smi") ? { path: "/opt/rocm/bin/amd-smi", reason: null } : found;
}

function findTool(name: string, variable: string, env: NodeJS.ProcessEnv): SmiStatus {
  const override = env[variable];
  if (override !== undefined && override !== "") {
    const path = resolve(override);
    return isExecutableFile(path)
      ? { path, reason: null }
      : { path: null, reason: `${variable}=${override} is not an executable file` };
  }
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (dir === "" || !isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    if (isExecutableFile(candidate)) return { path: candidate, reason: null };
  }
  return { path: null, reason: `${name} is not on PATH` };
}
