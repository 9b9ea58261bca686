/**
 * The artifact, as a user gets it: the tarball `npm pack` makes (its prepack builds dist/ and both
 * prebuilds; test/fakes/packed.ts), installed into fresh projects.
 *
 * - The tarball holds exactly what a consumer runs or builds from, within a size budget, with both
 *   prebuilds; its manifest asks a consumer to run no script but `install`.
 * - Each prebuild needs glibc ≤ 2.28 and no libstdc++ of the machine it lands on (readelf).
 * - Installed on this machine (linux-x64 here; the release workflow also runs it on arm64): nothing is compiled, the addon loads from prebuilds/ and meters a window
 *   against the NVML double; ESM import, CommonJS require and the types work.
 * - Where no prebuild matches (the prebuilds removed, as on a platform without one): the install
 *   still succeeds and says in one line what works, giul-probe gives the same advice, and following
 *   it builds the addon from source.
 * - publint --strict and are-the-types-wrong find nothing.
 *
 * The linux-arm64 prebuild is installed and run under qemu in arm64.qemu.test.ts. Slow (a pack, a
 * source build, several installs).
 */
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cleanEnv,
  consumer,
  consumerWorkDir,
  meterWindow,
  ok,
  packedTarball,
  probeJson,
  type Ran,
  SLOW,
  sh,
  tarList,
} from "./fakes/packed.js";
import { ROOT } from "./fakes/paths.js";
import { writeScenario } from "./fakes/scenario.js";

const TSC = join(ROOT, "node_modules", "typescript", "bin", "tsc");
const PUBLINT = join(ROOT, "node_modules", "publint", "src", "cli.js");
const ATTW = join(ROOT, "node_modules", "@arethetypeswrong", "cli", "dist", "index.js");

interface PrebuildFacts {
  machine: string;
  versions: Record<string, string[]>;
  needed: string[];
  unversioned: string[];
  exported: string[];
}
const check = createRequire(import.meta.url)("../scripts/check-prebuilds.cjs") as {
  TARGETS: Record<string, string>;
  compareVersions(a: string, b: string): number;
  inspect(file: string): PrebuildFacts;
  problems(facts: PrebuildFacts, target: string): string[];
};

/** This machine's prebuild folder. */
const HOST = `${process.platform}-${process.arch}`;

/**
 * The most a tarball may weigh: packed (gzip) and unpacked, in bytes. A few kB above today's for
 * the next feature, not for a regression (the history of this budget is in git).
 */
const BUDGET = { packed: 835_000, unpacked: 2_380_000 };

let tarball: string;
let work: string;
let unpacked: string;

beforeAll(async () => {
  tarball = await packedTarball();
  work = consumerWorkDir("giul-package-");
  unpacked = join(work, "unpacked");
  mkdirSync(unpacked);
  ok(sh("tar", ["xzf", tarball, "-C", unpacked]), "tar");
  unpacked = join(unpacked, "package");
}, SLOW);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

function npmInstall(dir: string, what: string, env: NodeJS.ProcessEnv = cleanEnv()): Ran {
  return sh("npm", ["install", "--foreground-scripts", "--ignore-scripts=false", what], { cwd: dir, env });
}

/** The files a consumer needs: the bundles, the prebuilds, and what a source build reads. */
function expectedFiles(): string[] {
  const native = readdirSync(join(ROOT, "native")).map((f) => `native/${f}`);
  return [
    "CHANGELOG.md",
    "CMakeLists.txt",
    "LICENSE",
    "README.md",
    "dist/cli/agent.js",
    "dist/cli/probe.js",
    "dist/cli/proxy.js",
    "dist/cli/report.js",
    "dist/client.cjs",
    "dist/client.d.cts",
    "dist/client.d.ts",
    "dist/client.js",
    "dist/index.cjs",
    "dist/index.d.cts",
    "dist/index.d.ts",
    "dist/index.js",
    "dist/otel.cjs",
    "dist/otel.d.cts",
    "dist/otel.d.ts",
    "dist/otel.js",
    "dist/prometheus.cjs",
    "dist/prometheus.d.cts",
    "dist/prometheus.d.ts",
    "dist/prometheus.js",
    "dist/testing.cjs",
    "dist/testing.d.cts",
    "dist/testing.d.ts",
    "dist/testing.js",
    ...native,
    "package.json",
    "prebuilds/linux-arm64/giul.glibc.node",
    "prebuilds/linux-x64/giul.glibc.node",
    "scripts/install.cjs",
  ].sort();
}

/**
 * The ESM build's shared chunks (dist/chunk-<hash>.js) and the declarations the entries share
 * (dist/<module>-<hash>.d.ts, .d.cts), named by their content.
 */
const CHUNK = /^dist\/(?:chunk-[A-Z0-9]+\.js|[a-z-]+-[A-Za-z0-9_-]{8}\.d\.c?ts)$/;

/** `files` without the shared chunks, after checking that there are some and that they are all chunks. */
function withoutChunks(files: readonly string[]): string[] {
  const chunks = files.filter((f) => CHUNK.test(f));
  expect(chunks.length).toBeGreaterThanOrEqual(1);
  return files.filter((f) => !CHUNK.test(f)).sort();
}

describe("the packed tarball", () => {
  it("holds the bundles, one N-API prebuild for each of linux-x64 and linux-arm64, the sources of a build, and nothing else", () => {
    expect(withoutChunks(tarList(tarball))).toEqual(expectedFiles());
  });

  it("npm pack --dry-run lists the same files, within the size budget", () => {
    const ran = ok(
      sh("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: unpacked }),
      "npm pack --dry-run",
    );
    const [report] = JSON.parse(ran.stdout) as Array<{
      size: number;
      unpackedSize: number;
      files: Array<{ path: string; size: number }>;
    }>;
    if (report === undefined) throw new Error(`npm pack --dry-run printed no report: ${ran.stdout}`);
    expect(withoutChunks(report.files.map((f) => f.path))).toEqual(expectedFiles());
    const largest = [...report.files].sort((a, b) => b.size - a.size).slice(0, 4);
    console.log(
      `tarball: ${report.size} B packed, ${report.unpackedSize} B unpacked, ${report.files.length} files; ` +
        `largest: ${largest.map((f) => `${f.path} ${f.size} B`).join(", ")}`,
    );
    expect(report.size).toBeLessThanOrEqual(BUDGET.packed);
    expect(report.unpackedSize).toBeLessThanOrEqual(BUDGET.unpacked);
  });

  it("its manifest asks consumers to run no lifecycle script but install, and says where the project lives", () => {
    const manifest = JSON.parse(readFileSync(join(unpacked, "package.json"), "utf8")) as {
      scripts: Record<string, string>;
      repository?: { url?: string };
      homepage?: string;
      bugs?: { url?: string };
      dependencies?: Record<string, string>;
    };
    for (const script of ["preinstall", "postinstall", "prepare"])
      expect(manifest.scripts).not.toHaveProperty(script);
    expect(manifest.scripts.install).toBe("node scripts/install.cjs");
    expect(manifest.repository?.url).toMatch(/^git\+https:\/\//);
    expect(manifest.homepage).toMatch(/^https:\/\//);
    expect(manifest.bugs?.url).toMatch(/^https:\/\//);
    expect(Object.keys(manifest.dependencies ?? {})).toEqual(["node-gyp-build"]);
  });
});

describe.each(Object.entries(check.TARGETS))("the %s prebuild", (target, machine) => {
  let facts: PrebuildFacts;
  beforeAll(() => {
    facts = check.inspect(join(unpacked, "prebuilds", target, "giul.glibc.node"));
  });

  it(`is built for ${machine}`, () => {
    expect(facts.machine).toBe(machine);
  });

  it("needs no glibc symbol version newer than GLIBC_2.28 (readelf -V)", () => {
    const glibc = facts.versions.GLIBC ?? [];
    expect(glibc.length).toBeGreaterThan(0);
    expect(glibc.filter((v) => check.compareVersions(v, "2.28") > 0)).toEqual([]);
  });

  it("needs no libstdc++ of the machine it lands on: no GLIBCXX_ or CXXABI_ version, no libstdc++.so", () => {
    expect(facts.versions.GLIBCXX).toBeUndefined();
    expect(facts.versions.CXXABI).toBeUndefined();
    expect(facts.needed.filter((lib) => lib.startsWith("libstdc++"))).toEqual([]);
  });

  it("leaves no symbol unresolved without a version but Node-API's, and exports only the Node-API entry points", () => {
    expect(facts.unversioned).toEqual([]);
    expect(facts.exported.sort()).toEqual(["napi_register_module_v1", "node_api_module_get_api_version_v1"]);
    expect(check.problems(facts, target)).toEqual([]);
  });
});

describe("the prebuild check", () => {
  it("rejects a library linked the ordinary way (the host's C++ compiler and libstdc++)", () => {
    const dir = join(work, "ordinary");
    mkdirSync(dir);
    writeFileSync(
      join(dir, "ordinary.cc"),
      '#include <stdexcept>\n#include <string>\nextern "C" int ordinary(const char* s) {\n' +
        "  try { throw std::runtime_error(s); } catch (const std::exception& e) { return std::string(e.what()).size(); }\n}\n",
    );
    ok(sh("c++", ["-shared", "-fPIC", "-o", "ordinary.so", "ordinary.cc"], { cwd: dir }), "c++");
    const found = check.problems(check.inspect(join(dir, "ordinary.so")), HOST).join("\n");
    expect(found).toContain("needs the system's libstdc++ (GLIBCXX_");
    expect(found).toMatch(/exports \d+ symbol\(s\) beyond the Node-API entry points/);
  });
});

describe(`installed from the tarball on ${HOST}`, () => {
  let project: string;
  let install: Ran;
  beforeAll(() => {
    project = consumer(join(work, "with-prebuild"));
    install = ok(npmInstall(project, tarball), "npm install");
  }, SLOW);

  it("builds nothing and prints nothing of its own", () => {
    expect(`${install.stdout}${install.stderr}`).not.toMatch(/^giul:/m);
    expect(existsSync(join(project, "node_modules", "giul", "build"))).toBe(false);
  });

  it("loads the addon from prebuilds/ and reads the NVML double", () => {
    const installed = join(project, "node_modules", "giul");
    const sc = writeScenario({ devices: [{ name: "Packed A" }, { name: "Packed B", counter: false }] });
    try {
      const report = probeJson(project, sc.env());
      expect(report.addon.loaded).toBe(true);
      expect(report.addon.path).toBe(join(installed, "prebuilds", HOST, "giul.glibc.node"));
      expect(report.nvml.available).toBe(true);
      expect(report.devices.map((d) => [d.name, d.backend])).toEqual([
        ["Packed A", "nvml_counter"],
        ["Packed B", "nvml_sampler"],
      ]);
    } finally {
      sc.remove();
    }
  });

  it("meters a window within its own error bar of the truth", () => {
    meterWindow(project, process.execPath);
  });

  it("imports as ESM and requires as CommonJS", () => {
    const esm = sh(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        'const m = await import("giul"); console.log(typeof m.GiulError, typeof m.Meter);',
      ],
      { cwd: project },
    );
    expect(esm.stderr).toBe("");
    expect(esm.stdout.trim()).toBe("function function");
    const cjs = sh(
      process.execPath,
      [
        "--input-type=commonjs",
        "-e",
        'const m = require("giul"); console.log(typeof m.GiulError, typeof m.Meter);',
      ],
      { cwd: project },
    );
    expect(cjs.stderr).toBe("");
    expect(cjs.stdout.trim()).toBe("function function");
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

describe("where no prebuild matches (the prebuilds removed, as on a platform without one)", () => {
  const ADVICE = "`npm install --save-dev cmake-js@8 node-addon-api@8 && npm rebuild giul`";
  let project: string;
  let installed: string;
  let npmCli: string;
  beforeAll(() => {
    project = consumer(join(work, "without-prebuild"));
    ok(npmInstall(project, tarball), "npm install");
    installed = join(project, "node_modules", "giul");
    rmSync(join(installed, "prebuilds"), { recursive: true });
    const prefix = ok(sh("npm", ["prefix", "-g"]), "npm prefix").stdout.trim();
    npmCli = join(prefix, "lib", "node_modules", "npm", "bin", "npm-cli.js");
  }, SLOW);

  /** `npm rebuild giul` in the project with PATH set to `path`. */
  function rebuild(path: string): Ran {
    return sh(process.execPath, [npmCli, "rebuild", "giul", "--foreground-scripts"], {
      cwd: project,
      env: cleanEnv({ PATH: path }),
    });
  }

  it("with no cmake and no compiler: the install succeeds, saying in one line what works", () => {
    // A PATH holding only node and sh.
    const bin = join(work, "bin-bare");
    mkdirSync(bin);
    symlinkSync(process.execPath, join(bin, "node"));
    symlinkSync("/bin/sh", join(bin, "sh"));
    const ran = rebuild(bin);
    expect(ran.status, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    const lines = `${ran.stdout}${ran.stderr}`.split("\n").filter((l) => l.startsWith("giul:"));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`no prebuilt addon for ${HOST}`);
    expect(lines[0]).toContain("pure-TS paths");
    expect(lines[0]).toMatch(/missing: cmake, make or ninja, a C\+\+20 compiler, cmake-js, node-addon-api/);
    expect(lines[0]).toContain(`install cmake, make or ninja, a C++20 compiler, then run ${ADVICE}`);
    expect(existsSync(join(installed, "build"))).toBe(false);
  });

  it("with cmake and g++ on PATH but no cmake-js: names what is missing and the command that builds it", () => {
    const ran = rebuild(process.env.PATH ?? "");
    expect(ran.status, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    const lines = `${ran.stdout}${ran.stderr}`.split("\n").filter((l) => l.startsWith("giul:"));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("(missing: cmake-js, node-addon-api)");
    expect(lines[0]).toContain(`To build the addon, run ${ADVICE}.`);
  });

  it("imports, and giul-probe reports the addon unavailable with the same advice", () => {
    const esm = sh(
      process.execPath,
      ["--input-type=module", "-e", 'await import("giul"); console.log("ok")'],
      {
        cwd: project,
      },
    );
    expect(esm.stdout.trim()).toBe("ok");
    const report = probeJson(project, {});
    expect(report.addon.loaded).toBe(false);
    expect(report.addon.reason).toContain(ADVICE);
    expect(report.nvml.available).toBe(false);
  });

  it(
    "following giul-probe's advice builds the addon from source, and it meters",
    () => {
      const reason = probeJson(project, {}).addon.reason ?? "";
      const command = /`([^`]+)`/.exec(reason)?.[1];
      expect(command).toBe(ADVICE.slice(1, -1));
      const ran = spawnSync("sh", ["-c", command ?? "false"], {
        cwd: project,
        env: cleanEnv(),
        encoding: "utf8",
        timeout: SLOW,
      });
      expect(ran.status, `${ran.stdout}\n${ran.stderr}`).toBe(0);
      const sc = writeScenario({ devices: [{ name: "Built here" }] });
      try {
        const report = probeJson(project, sc.env());
        expect(report.addon.loaded).toBe(true);
        expect(report.addon.path).toBe(join(installed, "build", "Release", "giul.node"));
        expect(report.devices.map((d) => [d.name, d.backend])).toEqual([["Built here", "nvml_counter"]]);
      } finally {
        sc.remove();
      }
      meterWindow(project, process.execPath);
    },
    SLOW,
  );
});

describe("publint and are-the-types-wrong", () => {
  it("publint --strict finds no error or warning in the tarball", () => {
    const ran = sh(process.execPath, [PUBLINT, "run", tarball, "--strict"]);
    expect(ran.status, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    expect(ran.stdout).not.toMatch(/Errors:|Warnings:/);
  });

  it("attw finds no problem with the types under node10, node16 (ESM and CJS) and bundler resolution", () => {
    const ran = sh(process.execPath, [ATTW, tarball, "--format", "ascii"]);
    expect(ran.status, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    expect(ran.stdout).toContain("No problems found");
  });
});
