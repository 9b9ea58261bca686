/**
 * Where the nvidia-smi that the smi_sampler runs is: GIUL_NVIDIA_SMI when set, else the first on
 * PATH. Found without running it (the sampler and its card reader run it).
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
  const override = env.GIUL_NVIDIA_SMI;
  if (override !== undefined && override !== "") {
    const path = resolve(override);
    return isExecutableFile(path)
      ? { path, reason: null }
      : { path: null, reason: `GIUL_NVIDIA_SMI=${override} is not an executable file` };
  }
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (dir === "" || !isAbsolute(dir)) continue;
    const candidate = join(dir, "nvidia-smi");
    if (isExecutableFile(candidate)) return { path: candidate, reason: null };
  }
  return { path: null, reason: "nvidia-smi is not on PATH" };
}
