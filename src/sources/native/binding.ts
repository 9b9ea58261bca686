/**
 * The one module that loads the addon. Everything else in src/ gets the addon from here, typed by
 * binding.d.ts, or learns why there is none. Loading never throws: a missing, corrupt or foreign
 * binary is a value with a reason, and giul carries on with its pure-TS paths.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { GiulBinding, NativeFailureCode } from "../../../binding.js";
import { debug } from "../../vocabulary/debug.js";
import type { NativeErrorCode } from "../../vocabulary/errors.js";

// errors.ts mirrors the addon's failure codes; this fails to compile when the lists drift apart.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const codesMatch: Same<NativeFailureCode, NativeErrorCode> = true;
void codesMatch;

export type BindingLoad =
  | { readonly ok: true; readonly binding: GiulBinding; readonly path: string }
  | { readonly ok: false; readonly reason: string; readonly tried: readonly string[] };

/** What the loader reads from the process; a parameter so that tests can pass their own. */
export interface LoaderEnv {
  /** `GIUL_ADDON_PATH`: load this file and nothing else. */
  readonly addonPath?: string | undefined;
  /** `GIUL_DISABLE_ADDON=1`: do not load the addon at all. */
  readonly disabled?: boolean;
  /** The package root (holding build/ and prebuilds/). */
  readonly root?: string;
}

const requireHere = createRequire(import.meta.url);

const FALLBACK =
  "giul carries on without it: GPU energy then comes from nvidia-smi or a remote giul-agent where one is configured";
/** How to build the addon where none loads; scripts/install.cjs prints the same command. */
const BUILD_FROM_SOURCE = "`npm install --save-dev cmake-js@8 node-addon-api@8 && npm rebuild giul`";

/** The advice for a package installed as a dependency, or for a development checkout of it. */
function rebuildAdvice(root: string = packageRoot()): string {
  return existsSync(join(root, "src")) && existsSync(join(root, "test"))
    ? "Run `npm run build:native` to build it"
    : `To build it from source, with cmake and a C++20 compiler on PATH, run ${BUILD_FROM_SOURCE}`;
}

/** This package's version (package.json), or "unknown" where it cannot be read. */
export function packageVersion(): string {
  try {
    const parsed: unknown = JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8"));
    const version = (parsed as { version?: unknown }).version;
    return typeof version === "string" ? version : "unknown";
  } catch {
    return "unknown";
  }
}

/**
 * The package root: the nearest directory above this file whose package.json names "giul"
 * (dist/, dist/cli/ and src/ all sit one or two levels below it).
 */
export function packageRoot(from: string = fileURLToPath(import.meta.url)): string {
  let dir = dirname(from);
  for (;;) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest)) {
      try {
        const parsed: unknown = JSON.parse(readFileSync(manifest, "utf8"));
        if (typeof parsed === "object" && parsed !== null && (parsed as { name?: unknown }).name === "giul") {
          return dir;
        }
      } catch {
        // Not ours, or unreadable: keep walking up.
      }
    }
    const parent = dirname(dir);
    if (parent === dir) return resolve(dirname(from), "..");
    dir = parent;
  }
}

/** The exports the contract requires, and of what type. */
const REQUIRED: ReadonlyArray<readonly [keyof GiulBinding, "function" | "object"]> = [
  ["nvmlInit", "function"],
  ["deviceInfo", "function"],
  ["computeProcesses", "function"],
  ["openSampler", "function"],
  ["samplerThreads", "function"],
  ["monotonicNs", "function"],
  ["layout", "object"],
  ["flags", "object"],
  // Added with the host-wide event log: an addon built before it lacks these.
  ["openCardLog", "function"],
  ["cardLogLayout", "object"],
];

/** What is wrong with a loaded module as a GiulBinding, or null when it has the contract's shape. */
export function bindingShapeProblem(loaded: unknown): string | null {
  if ((typeof loaded !== "object" && typeof loaded !== "function") || loaded === null) {
    return `it exports ${loaded === null ? "null" : typeof loaded}, not an object`;
  }
  const exports = loaded as Record<string, unknown>;
  const wrong = REQUIRED.filter(([key, type]) => typeof exports[key] !== type || exports[key] === null).map(
    ([key, type]) => `${key} (${type})`,
  );
  return wrong.length === 0 ? null : `it lacks ${wrong.join(", ")}`;
}

function message(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split("\n")[0] ?? text;
}

function tryLoad(path: string, tried: readonly string[], root: string): BindingLoad {
  let loaded: unknown;
  try {
    loaded = requireHere(path);
  } catch (error) {
    return {
      ok: false,
      reason: `The giul addon at ${path} failed to load (${message(error)}). ${rebuildAdvice(root)}; ${FALLBACK}.`,
      tried,
    };
  }
  const problem = bindingShapeProblem(loaded);
  if (problem !== null) {
    return {
      ok: false,
      reason: `${path} loaded but is not a giul addon of this version: ${problem}. ${rebuildAdvice(root)}; ${FALLBACK}.`,
      tried,
    };
  }
  return { ok: true, binding: loaded as GiulBinding, path };
}

interface NodeGypBuild {
  resolve(dir: string): string;
}

/** Loads the addon as `env` says, without caching. Never throws. */
export function loadBindingFrom(env: LoaderEnv = {}): BindingLoad {
  if (env.disabled === true) {
    return {
      ok: false,
      reason: `The giul addon is disabled by GIUL_DISABLE_ADDON=1; ${FALLBACK}.`,
      tried: [],
    };
  }
  if (env.addonPath !== undefined && env.addonPath !== "") {
    const path = resolve(env.addonPath);
    if (!existsSync(path)) {
      return {
        ok: false,
        reason: `GIUL_ADDON_PATH names ${path}, which does not exist. Unset GIUL_ADDON_PATH or point it at a built giul.node; ${FALLBACK}.`,
        tried: [path],
      };
    }
    return tryLoad(path, [path], env.root ?? packageRoot());
  }
  const root = env.root ?? packageRoot();
  const tried = [
    join(root, "build", "Release"),
    join(root, "build", "Debug"),
    join(root, "prebuilds", `${process.platform}-${process.arch}`),
  ];
  let path: string;
  try {
    const nodeGypBuild = requireHere("node-gyp-build") as NodeGypBuild;
    path = nodeGypBuild.resolve(root);
  } catch (error) {
    return {
      ok: false,
      reason: `No giul addon was found for ${process.platform}-${process.arch} (looked in ${tried.join(", ")}: ${message(error)}). ${rebuildAdvice(root)}; ${FALLBACK}.`,
      tried,
    };
  }
  return tryLoad(path, [path], root);
}

/** The process environment as the loader reads it. */
export function loaderEnvFromProcess(env: NodeJS.ProcessEnv = process.env): LoaderEnv {
  return { addonPath: env.GIUL_ADDON_PATH, disabled: env.GIUL_DISABLE_ADDON === "1" };
}

/**
 * What is wrong with GIUL_DISABLE_ADDON, or null. Only 1 disables the addon; 0, empty and unset
 * load it. The loader never throws, so it takes any other value (`true`, say) as not 1: giul-probe
 * refuses it instead of reporting a host the user did not mean.
 */
export function disableAddonProblem(value: string | undefined): string | null {
  if (value === undefined || value === "" || value === "0" || value === "1") return null;
  return `GIUL_DISABLE_ADDON=${value}: expected 1 (do not load the addon) or 0; giul loads the addon unless it is 1`;
}

let cached: BindingLoad | undefined;

/** The addon, loaded once per process (from GIUL_ADDON_PATH, build/ or prebuilds/). Never throws. */
export function loadBinding(): BindingLoad {
  if (cached === undefined) {
    cached = loadBindingFrom(loaderEnvFromProcess());
    if (cached.ok) debug("addon loaded from %s", cached.path);
    else debug("addon not loaded: %s", cached.reason);
  }
  return cached;
}
