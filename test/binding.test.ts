/**
 * Importing giul never throws, whatever the host lacks: no addon, a missing or corrupt addon
 * file, no libnvidia-ml. Each case runs the built package (dist/) in a child process with its own
 * environment, and reads the loader's verdict through `giul-probe --json`.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bindingShapeProblem, loadBindingFrom, packageRoot } from "../src/sources/native/binding.js";
import { GiulError, isGiulError } from "../src/vocabulary/errors.js";
import { ADDON, ROOT } from "./fakes/paths.js";
import { writeScenario } from "./fakes/scenario.js";

const DIST_ESM = join(ROOT, "dist", "index.js");
const DIST_CJS = join(ROOT, "dist", "index.cjs");
const PROBE = join(ROOT, "dist", "cli", "probe.js");

/** The parent's environment without anything that steers giul or the doubles. */
function baseEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("GIUL_") && key !== "NODE_OPTIONS") env[key] = value;
  }
  return env;
}

interface Ran {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function node(args: readonly string[], env: Readonly<Record<string, string>>): Ran {
  const result = spawnSync(process.execPath, args, {
    env: { ...baseEnv(), ...env },
    encoding: "utf8",
    timeout: 20_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

interface ProbeJson {
  addon: { loaded: boolean; path: string | null; reason: string | null; tried: string[] };
  nvml: { available: boolean; reason: string | null; code: string | null; driverVersion: string | null };
  devices: unknown[];
}

function probe(env: Readonly<Record<string, string>>): ProbeJson {
  const ran = node([PROBE, "--json"], env);
  expect(ran.stderr).toBe("");
  expect(ran.status).toBe(0);
  return JSON.parse(ran.stdout) as ProbeJson;
}

const importEsm = `const m = await import(${JSON.stringify(DIST_ESM)}); console.log(typeof m.GiulError);`;
const requireCjs = `const m = require(${JSON.stringify(DIST_CJS)}); console.log(typeof m.GiulError);`;

let tmp: string;
let corrupt: string;
let missing: string;

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "giul-binding-"));
  corrupt = join(tmp, "corrupt.node");
  writeFileSync(corrupt, Buffer.from("this is not an ELF shared object\n".repeat(64)));
  missing = join(tmp, "missing", "giul.node");
});

afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

const cases: ReadonlyArray<{ readonly name: string; readonly env: () => Record<string, string> }> = [
  { name: "GIUL_DISABLE_ADDON=1", env: () => ({ GIUL_DISABLE_ADDON: "1" }) },
  { name: "GIUL_ADDON_PATH at a missing file", env: () => ({ GIUL_ADDON_PATH: missing }) },
  { name: "GIUL_ADDON_PATH at a corrupt file", env: () => ({ GIUL_ADDON_PATH: corrupt }) },
  {
    name: "GIUL_NVML_LIBRARY=/nonexistent",
    env: () => ({ GIUL_NVML_LIBRARY: "/nonexistent/libnvidia-ml.so.1" }),
  },
];

describe("importing the package never throws", () => {
  for (const { name, env } of cases) {
    it(`ESM import and CJS require, with ${name}`, () => {
      for (const args of [
        ["--input-type=module", "-e", importEsm],
        ["-e", requireCjs],
      ]) {
        const ran = node(args, env());
        expect(ran.stderr).toBe("");
        expect(ran.status).toBe(0);
        expect(ran.stdout.trim()).toBe("function");
      }
    });
  }
});

describe("the addon loader's verdict", () => {
  it("loads the addon built in this checkout (build/Release/giul.node)", () => {
    const report = probe({ GIUL_NVML_LIBRARY: "/nonexistent/libnvidia-ml.so.1" });
    expect(report.addon).toMatchObject({ loaded: true, path: ADDON, reason: null });
  });

  it("the CommonJS build finds the package root (import.meta.url shim) and loads it too", () => {
    // The published CommonJS entry is the library alone (the CLIs are ESM), so the proof is a window
    // it opens on the NVML double: nvml_counter needs the addon.
    const sc = writeScenario({ devices: [{ name: "CommonJS" }] });
    try {
      const ran = node(
        [
          "-e",
          `const { Meter } = require(${JSON.stringify(DIST_CJS)});
Meter.forNode({ name: "cjs", gpuIndex: 0, idleW: 0 }).open().then(async (m) => {
  await m.close();
  console.log(m.backend);
});`,
        ],
        sc.env(),
      );
      expect(ran.stderr).toBe("");
      expect(ran.status).toBe(0);
      expect(ran.stdout.trim()).toBe("nvml_counter");
    } finally {
      sc.remove();
    }
  });

  it("GIUL_DISABLE_ADDON=1: not loaded, says so, tries nothing", () => {
    const report = probe({ GIUL_DISABLE_ADDON: "1" });
    expect(report.addon.loaded).toBe(false);
    expect(report.addon.tried).toEqual([]);
    expect(report.addon.reason).toContain("GIUL_DISABLE_ADDON=1");
    expect(report.nvml.available).toBe(false);
    expect(report.devices).toEqual([]);
  });

  it("GIUL_ADDON_PATH at a missing file: not loaded, names the file", () => {
    const report = probe({ GIUL_ADDON_PATH: missing });
    expect(report.addon.loaded).toBe(false);
    expect(report.addon.tried).toEqual([missing]);
    expect(report.addon.reason).toContain(missing);
    expect(report.addon.reason).toContain("does not exist");
  });

  it("GIUL_ADDON_PATH at a corrupt file: not loaded, names the file and how to fix it", () => {
    const report = probe({ GIUL_ADDON_PATH: corrupt });
    expect(report.addon.loaded).toBe(false);
    expect(report.addon.tried).toEqual([corrupt]);
    expect(report.addon.reason).toContain(corrupt);
    expect(report.addon.reason).toContain("failed to load");
    // This checkout builds with npm run build:native; an installed package with npm rebuild giul.
    expect(report.addon.reason).toContain("npm run build:native");
  });

  it("GIUL_NVML_LIBRARY=/nonexistent: the addon loads, NVML is unavailable with the reason", () => {
    const report = probe({ GIUL_NVML_LIBRARY: "/nonexistent/libnvidia-ml.so.1" });
    expect(report.addon.loaded).toBe(true);
    expect(report.nvml.available).toBe(false);
    expect(report.nvml.code).toBe("NVML_LIBRARY_NOT_FOUND");
    expect(report.nvml.reason).toContain("/nonexistent/libnvidia-ml.so.1");
    expect(report.nvml.driverVersion).toBeNull();
    expect(report.devices).toEqual([]);
  });
});

describe("loadBindingFrom (in process)", () => {
  it("finds the package root from src/", () => {
    expect(packageRoot()).toBe(ROOT);
  });

  it("a file that is not a shared object is a value, not a throw", () => {
    const result = loadBindingFrom({ addonPath: corrupt });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.tried).toEqual([corrupt]);
  });

  it.runIf(process.platform === "linux")(
    "a shared library that is not a Node addon is a value, not a throw",
    () => {
      // libc is a real ELF library that dlopen accepts but that registers no Node module: the one
      // this very process has mapped (so the test cannot quietly find none and pass).
      const libc = readFileSync("/proc/self/maps", "utf8")
        .split("\n")
        .map((line) => line.split(/\s+/)[5] ?? "")
        .find((path) => /\/libc(\.so\.6|-[\d.]+\.so)$/.test(path));
      expect(libc, "libc in /proc/self/maps").toBeDefined();
      if (libc === undefined) return;
      const result = loadBindingFrom({ addonPath: libc });
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.reason).toContain(libc);
    },
  );

  it("a root with neither build/ nor prebuilds/ lists the places it looked", () => {
    const result = loadBindingFrom({ root: tmp });
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.tried).toEqual([
        join(tmp, "build", "Release"),
        join(tmp, "build", "Debug"),
        join(tmp, "prebuilds", `${process.platform}-${process.arch}`),
      ]);
      expect(result.reason).toContain("npm rebuild giul");
    }
  });

  it("checks the exports against the contract", () => {
    expect(bindingShapeProblem(null)).toContain("null");
    expect(bindingShapeProblem({ nvmlInit: () => 0 })).toContain("deviceInfo (function)");
    expect(bindingShapeProblem({ nvmlInit: () => 0 })).not.toContain("nvmlInit");
    const fn = (): number => 0;
    const complete = {
      nvmlInit: fn,
      deviceInfo: fn,
      computeProcesses: fn,
      openSampler: fn,
      samplerThreads: fn,
      monotonicNs: fn,
      layout: {},
      flags: {},
      openCardLog: fn,
      cardLogLayout: {},
    };
    expect(bindingShapeProblem(complete)).toBeNull();
    expect(bindingShapeProblem({ ...complete, layout: null })).toContain("layout (object)");
    // An addon built before the host-wide event log is stale.
    const { openCardLog: _, cardLogLayout: __, ...beforeLog } = complete;
    expect(bindingShapeProblem(beforeLog)).toBe("it lacks openCardLog (function), cardLogLayout (object)");
  });
});

describe("GiulError", () => {
  it("carries code, field and cause", () => {
    const cause = new Error("inner");
    const error = new GiulError("INVALID_NODE", "idleW must be finite", { field: "idleW", cause });
    expect(error.code).toBe("INVALID_NODE");
    expect(error.field).toBe("idleW");
    expect(error.cause).toBe(cause);
    expect(error.name).toBe("GiulError");
    expect(error).toBeInstanceOf(Error);
    expect("field" in new GiulError("WINDOW_STATE", "closed")).toBe(false);
  });

  it("instanceof holds across two copies of the class (the ESM and CJS builds)", async () => {
    const esm = (await import(DIST_ESM)) as { GiulError: typeof GiulError };
    const cjs = createRequire(import.meta.url)(DIST_CJS) as { GiulError: typeof GiulError };
    expect(esm.GiulError).not.toBe(cjs.GiulError);
    const fromCjs = new cjs.GiulError("INVALID_OPTION", "bad", { field: "x" });
    expect(fromCjs instanceof esm.GiulError).toBe(true);
    expect(fromCjs instanceof GiulError).toBe(true);
    expect(isGiulError(fromCjs, "INVALID_OPTION")).toBe(true);
    expect(isGiulError(fromCjs, "INVALID_NODE")).toBe(false);
    expect(new Error("plain") instanceof esm.GiulError).toBe(false);
    expect({ code: "INVALID_NODE" } instanceof GiulError).toBe(false);
  });

  it("a subclass keeps the ordinary instanceof", () => {
    class Special extends GiulError {}
    expect(new Special("BACKEND_UNAVAILABLE", "x") instanceof Special).toBe(true);
    expect(new Special("BACKEND_UNAVAILABLE", "x") instanceof GiulError).toBe(true);
    expect(new GiulError("BACKEND_UNAVAILABLE", "x") instanceof Special).toBe(false);
  });
});
