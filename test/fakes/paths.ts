import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The package root (this file is test/fakes/paths.ts). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Where CMake puts the test doubles; GIUL_TEST_DOUBLES_DIR overrides (for a separate build dir). */
export const DOUBLES_DIR = process.env.GIUL_TEST_DOUBLES_DIR ?? join(ROOT, "build", "test-doubles");

/** The libnvidia-ml.so.1 test double with the current ABI. */
export const FAKE_NVML = join(DOUBLES_DIR, "current", "libnvidia-ml.so.1");
/** The same double built as an old driver (unversioned symbols only, no counter). */
/** The libamd_smi double (AMD SMI 26.x; test/fakes/amdsmi/fake_amdsmi.c). */
export const FAKE_AMDSMI = join(DOUBLES_DIR, "amdsmi", "libamd_smi.so.26");
/** The NVML double's slot, pointed at a file that is not there: a host without NVIDIA's driver. */
export const NO_NVML = join(DOUBLES_DIR, "absent", "libnvidia-ml.so.1");

export const FAKE_NVML_LEGACY = join(DOUBLES_DIR, "legacy", "libnvidia-ml.so.1");
/** The folder holding the nvidia-smi stand-in, to put first on PATH. */
export const FAKE_SMI_BIN = join(DOUBLES_DIR, "bin");
/** The nvidia-smi stand-in. */
export const FAKE_SMI = join(FAKE_SMI_BIN, "nvidia-smi");
/** The amd-smi stand-in (test/fakes/smi/amd_smi.c), reading the libamd_smi double. */
export const FAKE_AMD_SMI = join(DOUBLES_DIR, "amd-bin", "amd-smi");
/** The small C reader that drives the NVML double without the addon. */
export const FAKE_NVML_READER = join(FAKE_SMI_BIN, "fake-nvml-read");
/** The addon as built in this checkout. */
export const ADDON = join(ROOT, "build", "Release", "giul.node");
/** The bundled package (tsup). */
export const DIST = join(ROOT, "dist", "index.js");

/**
 * True where the environment says this is a CI run (`CI` set to anything but "", "0" or "false").
 * There the build is part of the job, so a suite skipped for a missing artifact would hide a
 * failure: {@link built} throws instead of skipping.
 */
export const IN_CI = ((v) => v !== undefined && v !== "" && v !== "0" && v.toLowerCase() !== "false")(
  process.env.CI,
);

/**
 * Whether every one of `paths` exists, for `describe.runIf(built(...))`. Where one is missing the
 * suite is skipped with the reason printed — except in CI, where this throws, so the file fails
 * instead of passing with nothing run.
 */
export function built(paths: readonly string[], what = "the addon or the test doubles"): boolean {
  const missing = paths.filter((p) => !existsSync(p));
  if (missing.length === 0) return true;
  const message = `${what} not built (${missing.join(", ")}); run: npx cmake-js build --out build && npx tsup`;
  if (IN_CI) throw new Error(`CI is set, so this suite may not be skipped: ${message}`);
  console.warn(`skipping: ${message}`);
  return false;
}

/** The NVML double is built (throws in CI when it is not; see {@link built}). */
export const haveDoubles = (): boolean => built([FAKE_NVML], "the NVML test double");

/** The addon and the NVML double are built: the native path can be tested (throws in CI otherwise). */
export const nativeReady = (): boolean => built([FAKE_NVML, ADDON]);

export const amdReady = (): boolean => built([FAKE_AMDSMI, ADDON], "the addon or the libamd_smi double");

/** README.md and every page of docs/, in that order: where the examples are shown. */
export function readmeAndDocs(): string {
  const docs = join(ROOT, "docs");
  const pages = readdirSync(docs)
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => readFileSync(join(docs, f), "utf8"));
  return [readFileSync(join(ROOT, "README.md"), "utf8"), ...pages].join("\n");
}

/**
 * A program the user has (`prometheus`, `chromium`): `env` names it where set, else the first of
 * `names` on PATH. Where none is found the suite is skipped with the reason printed, except in CI,
 * where this throws (.ci/run installs them).
 */
export function program(names: readonly string[], env: string, what: string): string | null {
  const given = process.env[env];
  if (given !== undefined && given !== "") return given;
  for (const name of names) {
    const found = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).stdout.trim();
    if (found !== "") return found;
  }
  const message = `${what} not found (${names.join(" or ")} on PATH, or ${env}); on Debian: apt-get install ${names[0]}`;
  if (IN_CI) throw new Error(`CI is set, so this suite may not be skipped: ${message}`);
  console.warn(`skipping: ${message}`);
  return null;
}
