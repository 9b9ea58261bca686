/**
 * The package as npm publishes it, for the suites that test the artifact (package.test.ts,
 * arm64.qemu.test.ts): `npm pack` in a staging copy of this checkout, whose prepack builds dist/ and
 * both prebuilds and checks them, exactly as `npm publish` would. Made once and reused while no
 * input is newer than it (build/packed/), with a lock so that suites running side by side wait for
 * one build instead of making two.
 *
 * GIUL_TEST_TARBALL=/path/giul-x.y.z.tgz tests that tarball instead (the release workflow tests the
 * tarball it is about to publish).
 *
 * Also the helpers those suites share: commands with a clean environment, consumer projects.
 */
import { type SpawnSyncOptions, spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { expect } from "vitest";
import { withLock } from "./lock.js";
import { ROOT } from "./paths.js";
import { writeScenario } from "./scenario.js";

/** Generous: a pack builds two addons, and an install under qemu is slow. */
export const SLOW = 300_000;

/** What the staging copy holds: everything `npm pack` reads, and what prepack builds from. */
const PACK_INPUTS = [
  "package.json",
  "README.md",
  "LICENSE",
  "CHANGELOG.md",
  "CMakeLists.txt",
  "binding.d.ts",
  "tsup.config.ts",
  "tsconfig.json",
  "tsconfig.build.json",
  "native",
  "scripts",
  "src",
];

export interface Ran {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The parent's environment without npm's lifecycle variables or anything that steers giul. */
export function cleanEnv(extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith("GIUL_") || key.toLowerCase().startsWith("npm_") || key === "INIT_CWD") continue;
    if (key === "NODE_OPTIONS") continue;
    env[key] = value;
  }
  // Installs in the tests take what npm ci already cached rather than asking the registry again.
  return {
    ...env,
    npm_config_prefer_offline: "true",
    npm_config_audit: "false",
    npm_config_fund: "false",
    ...extra,
  };
}

export function sh(command: string, args: readonly string[], options: SpawnSyncOptions = {}): Ran {
  const result = spawnSync(command, args, { encoding: "utf8", timeout: SLOW, env: cleanEnv(), ...options });
  if (result.error) throw new Error(`${command} ${args.join(" ")}: ${result.error.message}`);
  return { status: result.status, stdout: String(result.stdout), stderr: String(result.stderr) };
}

export function ok(ran: Ran, what: string): Ran {
  if (ran.status !== 0) throw new Error(`${what} exited ${ran.status}\n${ran.stdout}\n${ran.stderr}`);
  return ran;
}

/**
 * A fresh temporary folder for consumer projects, under a base with no node_modules on the way up:
 * Node resolves a package from every ancestor's node_modules, so a stray /tmp/node_modules (seen
 * on a shared machine) would hand a consumer cmake-js it never installed. Tries the system's
 * temporary folder, then /var/tmp, then the home folder.
 */
export function consumerWorkDir(prefix: string): string {
  const clean = (dir: string): boolean => {
    for (let at = resolve(dir); ; at = dirname(at)) {
      if (existsSync(join(at, "node_modules"))) return false;
      if (dirname(at) === at) return true;
    }
  };
  const base = [tmpdir(), "/var/tmp", homedir()].find((dir) => existsSync(dir) && clean(dir));
  if (base === undefined) throw new Error("no temporary folder without a node_modules above it");
  return mkdtempSync(join(base, prefix));
}

/** A fresh consumer project (a package.json and nothing else) at `dir`. */
export function consumer(dir: string): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({ name: "consumer", version: "1.0.0", private: true, type: "module" }),
  );
  return dir;
}

/** The files in a tarball, without the leading `package/`. */
export function tarList(tarball: string): string[] {
  return ok(sh("tar", ["tzf", tarball]), "tar")
    .stdout.trim()
    .split("\n")
    .map((f) => f.replace(/^package\//, ""));
}

function newest(path: string): number {
  let stat: ReturnType<typeof statSync>;
  try {
    stat = statSync(path);
  } catch {
    return 0;
  }
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const name of readdirSync(path)) latest = Math.max(latest, newest(join(path, name)));
  return latest;
}

const PACKED = join(ROOT, "build", "packed");

/** The staging copy the tarball was packed from (its dist/ and prebuilds/ are the tarball's). */
const STAGE = join(PACKED, "stage");

function pack(): string {
  const inputs = PACK_INPUTS.map((entry) => join(ROOT, entry));
  const existing = readdirSync(PACKED, { withFileTypes: true }).find(
    (e) => e.isFile() && e.name.endsWith(".tgz"),
  );
  if (existing !== undefined) {
    const tarball = join(PACKED, existing.name);
    if (Math.max(...inputs.map(newest)) < statSync(tarball).mtimeMs) return tarball;
    rmSync(tarball);
  }
  rmSync(STAGE, { recursive: true, force: true });
  mkdirSync(STAGE, { recursive: true });
  for (const input of inputs) {
    if (existsSync(input)) cpSync(input, join(STAGE, input.slice(ROOT.length + 1)), { recursive: true });
  }
  symlinkSync(join(ROOT, "node_modules"), join(STAGE, "node_modules"), "dir");
  const out = join(PACKED, "out");
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out);
  // prepack runs here: dist/, both prebuilds, their check. A failure fails the suite.
  ok(sh("npm", ["pack", "--pack-destination", out], { cwd: STAGE }), "npm pack");
  const [made] = readdirSync(out).filter((name) => name.endsWith(".tgz"));
  if (made === undefined) throw new Error(`npm pack left no tarball in ${out}`);
  renameSync(join(out, made), join(PACKED, made));
  rmSync(out, { recursive: true, force: true });
  return join(PACKED, made);
}

/** The packed tarball (see the file's comment), built first when it is missing or stale. */
export async function packedTarball(): Promise<string> {
  const given = process.env.GIUL_TEST_TARBALL;
  if (given !== undefined && given !== "") return resolve(given);
  mkdirSync(PACKED, { recursive: true });
  return withLock(`${PACKED}.lock`, SLOW, pack);
}

export interface ProbeJson {
  addon: { loaded: boolean; path: string | null; reason: string | null };
  nvml: { available: boolean };
  devices: Array<{ index: number; name: string | null; backend: string }>;
}

/** `giul-probe --json` as installed in `project`, with `env` on top of a clean environment. */
export function probeJson(project: string, env: Readonly<Record<string, string>>): ProbeJson {
  const ran = ok(
    sh(join(project, "node_modules", ".bin", "giul-probe"), ["--json"], { cwd: project, env: cleanEnv(env) }),
    "giul-probe",
  );
  return JSON.parse(ran.stdout) as ProbeJson;
}

/**
 * Meters a 300 ms window with giul as installed in `project`, run by `node` (a path: the host's
 * Node, or a wrapper that runs another one), against the NVML double at `nvml` (default: this
 * checkout's), and checks it against the scenario's exact energy: sampled from the counter, and
 * within its own error bar.
 */
export function meterWindow(project: string, node: string, nvml?: string): void {
  const idleW = 50;
  const sc = writeScenario({ devices: [{ name: "Packed", power: [[0, 250]] }] });
  try {
    writeFileSync(
      join(project, "meter.mjs"),
      `import { Meter } from "giul";
const m = await Meter.forNode({ name: "packed", gpuIndex: 0, idleW: ${idleW} }).open();
await new Promise((r) => setTimeout(r, 300));
await m.close();
const e = m.result();
const edges = m.edgeTimes();
console.log(JSON.stringify({ arch: process.arch, joules: e.joules, method: e.method, backend: e.backend,
  uncertainty: e.uncertaintyJoules, open: String(edges.open), close: String(edges.close) }));
`,
    );
    const env = cleanEnv(nvml === undefined ? sc.env() : sc.env({ GIUL_NVML_LIBRARY: nvml }));
    const ran = ok(sh(node, ["meter.mjs"], { cwd: project, env }), "meter.mjs");
    const got = JSON.parse(ran.stdout) as {
      joules: number;
      method: string;
      backend: string;
      uncertainty: number;
      open: string;
      close: string;
    };
    const open = BigInt(got.open);
    const close = BigInt(got.close);
    const truth = sc.energyJ(0, open, close) - (idleW * Number(close - open)) / 1e9;
    expect(got.method).toBe("sampled");
    expect(got.backend).toBe("nvml_counter");
    expect(truth).toBeGreaterThan(50);
    expect(Math.abs(got.joules - truth)).toBeLessThanOrEqual(got.uncertainty);
  } finally {
    sc.remove();
  }
}
