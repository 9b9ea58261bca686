/**
 * The artifact, as a user gets it: `npm pack`, installed into a fresh project with no build step.
 *
 * - With the prebuild (`npm run prebuild`): the addon loads from prebuilds/linux-x64 with no
 *   build/ present, and reads the NVML double.
 * - Without prebuilds and with no cmake on PATH: the install completes, says giul runs on its
 *   pure-TS paths, and the package imports and reports the addon as unavailable.
 * - ESM import, CommonJS require and the types work from a consumer; publint finds no problem.
 *
 * The prebuild is made in a staging copy of the package, never in this checkout's build/.
 * Slow (a native build and two installs).
 */
import { type SpawnSyncOptions, spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "./fakes/paths.js";
import { writeScenario } from "./fakes/scenario.js";

const SLOW = 300_000;
const TSC = join(ROOT, "node_modules", "typescript", "bin", "tsc");
const PUBLINT = join(ROOT, "node_modules", "publint", "src", "cli.js");

interface Ran {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The parent's environment without npm's lifecycle variables or anything that steers giul. */
function cleanEnv(extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith("GIUL_") || key.toLowerCase().startsWith("npm_") || key === "INIT_CWD") continue;
    if (key === "NODE_OPTIONS") continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

function sh(command: string, args: readonly string[], options: SpawnSyncOptions = {}): Ran {
  const result = spawnSync(command, args, { encoding: "utf8", timeout: SLOW, env: cleanEnv(), ...options });
  const ran = { status: result.status, stdout: String(result.stdout), stderr: String(result.stderr) };
  if (result.error) throw new Error(`${command} ${args.join(" ")}: ${result.error.message}`);
  return ran;
}

function ok(ran: Ran, what: string): Ran {
  if (ran.status !== 0) throw new Error(`${what} exited ${ran.status}\n${ran.stdout}\n${ran.stderr}`);
  return ran;
}

/** `npm pack` in `dir` without lifecycle scripts (dist/ is already built); returns the tarball. */
function pack(dir: string, destination: string, name: string): string {
  const out = ok(
    sh("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", destination], { cwd: dir }),
    "npm pack",
  );
  const file = out.stdout.trim().split("\n").pop() ?? "";
  const tarball = join(destination, name);
  cpSync(join(destination, file), tarball);
  rmSync(join(destination, file));
  return tarball;
}

function tarList(tarball: string): string[] {
  return ok(sh("tar", ["tzf", tarball]), "tar")
    .stdout.trim()
    .split("\n");
}

function consumer(dir: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({ name: "consumer", version: "1.0.0", private: true }),
  );
}

function npmInstall(dir: string, tarball: string, env: NodeJS.ProcessEnv = cleanEnv()): Ran {
  return sh(
    "npm",
    [
      "install",
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
      "--foreground-scripts",
      "--ignore-scripts=false",
      tarball,
    ],
    { cwd: dir, env },
  );
}

interface ProbeJson {
  addon: { loaded: boolean; path: string | null; reason: string | null };
  nvml: { available: boolean };
  devices: Array<{ index: number; name: string | null; backend: string }>;
}

function probeJson(project: string, env: Readonly<Record<string, string>>): ProbeJson {
  const ran = ok(
    sh(join(project, "node_modules", ".bin", "giul-probe"), ["--json"], { cwd: project, env: cleanEnv(env) }),
    "giul-probe",
  );
  return JSON.parse(ran.stdout) as ProbeJson;
}

const importBoth = (project: string): void => {
  const esm = sh(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      'const m = await import("giul"); console.log(typeof m.GiulError, typeof m.Meter);',
    ],
    {
      cwd: project,
    },
  );
  expect(esm.stderr).toBe("");
  expect(esm.stdout.trim()).toBe("function function");
  const cjs = sh(
    process.execPath,
    ["-e", 'const m = require("giul"); console.log(typeof m.GiulError, typeof m.Meter);'],
    {
      cwd: project,
    },
  );
  expect(cjs.stderr).toBe("");
  expect(cjs.stdout.trim()).toBe("function function");
};

let work: string;
let stage: string;
let withPrebuild: string;
let withoutPrebuild: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "giul-package-"));
  stage = join(work, "stage");
  mkdirSync(stage);
  for (const entry of ["package.json", "CMakeLists.txt", "binding.d.ts", "native", "scripts", "dist"]) {
    cpSync(join(ROOT, entry), join(stage, entry), { recursive: true });
  }
  symlinkSync(join(ROOT, "node_modules"), join(stage, "node_modules"), "dir");
  withoutPrebuild = pack(stage, work, "giul-without-prebuild.tgz");
  ok(sh("npm", ["run", "prebuild"], { cwd: stage }), "npm run prebuild");
  withPrebuild = pack(stage, work, "giul-with-prebuild.tgz");
}, SLOW);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe("npm run prebuild", () => {
  it("produces prebuilds/linux-x64/giul.node, shipped in the tarball without build/", () => {
    expect(existsSync(join(stage, "prebuilds", `${process.platform}-${process.arch}`, "giul.node"))).toBe(
      true,
    );
    const files = tarList(withPrebuild);
    expect(files).toContain(`package/prebuilds/${process.platform}-${process.arch}/giul.node`);
    expect(files.some((f) => f.startsWith("package/build/"))).toBe(false);
    expect(files).toContain("package/dist/index.d.ts");
    expect(files).toContain("package/dist/index.d.cts");
    // The exporters' subpath entries (giul/otel, giul/prometheus): ESM, CommonJS and types.
    for (const entry of ["otel", "prometheus"]) {
      for (const ext of ["js", "cjs", "d.ts", "d.cts"])
        expect(files).toContain(`package/dist/${entry}.${ext}`);
    }
  });
});

describe("installed from the tarball with its prebuild", () => {
  let project: string;
  beforeAll(() => {
    project = join(work, "with-prebuild");
    consumer(project);
    ok(npmInstall(project, withPrebuild), "npm install (with prebuild)");
  }, SLOW);

  it("builds nothing and loads the addon from prebuilds/", () => {
    const installed = join(project, "node_modules", "giul");
    expect(existsSync(join(installed, "build"))).toBe(false);
    const sc = writeScenario({ devices: [{ name: "Packed A" }, { name: "Packed B", counter: false }] });
    try {
      const report = probeJson(project, sc.env());
      expect(report.addon.loaded).toBe(true);
      expect(report.addon.path).toBe(
        join(installed, "prebuilds", `${process.platform}-${process.arch}`, "giul.node"),
      );
      expect(report.nvml.available).toBe(true);
      expect(report.devices.map((d) => [d.name, d.backend])).toEqual([
        ["Packed A", "nvml_counter"],
        ["Packed B", "nvml_sampler"],
      ]);
    } finally {
      sc.remove();
    }
  });

  it("imports as ESM and requires as CommonJS", () => {
    importBoth(project);
  });

  it("type-checks from an ESM and a CommonJS consumer", () => {
    writeFileSync(
      join(project, "esm.mts"),
      'import { GiulError, type GiulErrorCode } from "giul";\n' +
        'const code: GiulErrorCode = "INVALID_NODE";\n' +
        'export const e: GiulError = new GiulError(code, "x", { field: "idleW" });\n' +
        "export const f: string | undefined = e.field;\n",
    );
    writeFileSync(
      join(project, "cjs.cts"),
      'import giul = require("giul");\nexport const e: giul.GiulError = new giul.GiulError("WINDOW_STATE", "x");\n',
    );
    const ran = sh(
      process.execPath,
      [
        TSC,
        "--noEmit",
        "--strict",
        "--module",
        "nodenext",
        "--moduleResolution",
        "nodenext",
        "--target",
        "es2022",
        "--typeRoots",
        join(ROOT, "node_modules", "@types"),
        "--types",
        "node",
        "esm.mts",
        "cjs.cts",
      ],
      { cwd: project },
    );
    expect(`${ran.stdout}${ran.stderr}`).toBe("");
    expect(ran.status).toBe(0);
    // The published types do not lean on the internal addon contract.
    const dts = readFileSync(join(project, "node_modules", "giul", "dist", "index.d.ts"), "utf8");
    expect(dts).not.toMatch(/from\s+["'][./]*binding(\.js|\.d\.ts)?["']/);
  });
});

describe("installed from a tarball without prebuilds, with no cmake on PATH", () => {
  let project: string;
  let install: Ran;
  beforeAll(() => {
    project = join(work, "without-prebuild");
    consumer(project);
    // A PATH holding only node and sh: no cmake, no compiler.
    const bin = join(work, "bin");
    mkdirSync(bin, { recursive: true });
    symlinkSync(process.execPath, join(bin, "node"));
    symlinkSync("/bin/sh", join(bin, "sh"));
    const npmCli = ok(sh("npm", ["prefix", "-g"]), "npm prefix").stdout.trim();
    const npm = join(npmCli, "lib", "node_modules", "npm", "bin", "npm-cli.js");
    const env = cleanEnv({ PATH: bin });
    const result = spawnSync(
      process.execPath,
      [
        npm,
        "install",
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        "--foreground-scripts",
        "--ignore-scripts=false",
        withoutPrebuild,
      ],
      { cwd: project, env, encoding: "utf8", timeout: SLOW },
    );
    install = { status: result.status, stdout: String(result.stdout), stderr: String(result.stderr) };
  }, SLOW);

  it("the tarball holds no prebuild", () => {
    expect(tarList(withoutPrebuild).some((f) => f.includes("prebuilds/"))).toBe(false);
  });

  it("completes, saying that giul runs on its pure-TS paths", () => {
    expect(install.status, `${install.stdout}\n${install.stderr}`).toBe(0);
    expect(`${install.stdout}${install.stderr}`).toMatch(/giul: no prebuilt addon .* pure-TS paths/);
    const installed = join(project, "node_modules", "giul");
    expect(existsSync(join(installed, "build"))).toBe(false);
  });

  it("imports, and reports the addon unavailable with how to fix it", () => {
    importBoth(project);
    const report = probeJson(project, {});
    expect(report.addon.loaded).toBe(false);
    expect(report.addon.reason).toContain("npm rebuild giul");
    expect(report.nvml.available).toBe(false);
    expect(report.devices).toEqual([]);
  });
});

describe("publint", () => {
  it("finds no error or warning in the package (with its prebuild)", () => {
    const ran = sh(process.execPath, [PUBLINT, "--strict"], { cwd: stage });
    expect(ran.status, `${ran.stdout}\n${ran.stderr}`).toBe(0);
  });
});
