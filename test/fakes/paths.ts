import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The package root (this file is test/fakes/paths.ts). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Where CMake puts the test doubles; GIUL_TEST_DOUBLES_DIR overrides (for a separate build dir). */
export const DOUBLES_DIR = process.env.GIUL_TEST_DOUBLES_DIR ?? join(ROOT, "build", "test-doubles");

/** The libnvidia-ml.so.1 test double with the current ABI. */
export const FAKE_NVML = join(DOUBLES_DIR, "current", "libnvidia-ml.so.1");
/** The same double built as an old driver (unversioned symbols only, no counter). */
export const FAKE_NVML_LEGACY = join(DOUBLES_DIR, "legacy", "libnvidia-ml.so.1");
/** The folder holding the nvidia-smi stand-in, to put first on PATH. */
export const FAKE_SMI_BIN = join(DOUBLES_DIR, "bin");
/** The addon as built in this checkout. */
export const ADDON = join(ROOT, "build", "Release", "giul.node");

export const haveDoubles = (): boolean => existsSync(FAKE_NVML);

/** The addon and the NVML double are built: the native path can be tested. */
export const nativeReady = (): boolean => haveDoubles() && existsSync(ADDON);
