/**
 * The nvidia-smi child's lifetime: it never keeps its parent alive, it stops when the last card
 * closes, and it does not outlive its parent even when the parent is killed with SIGKILL (then no
 * JavaScript runs: the watchdog shell sees its stdin pipe close). The parent is src/sources/smi/descriptor.ts
 * bundled with esbuild into a plain script.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildSync } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SmiSampler } from "../src/sources/smi/sampler.js";
import { built, FAKE_NVML, FAKE_SMI, ROOT } from "./fakes/paths.js";
import { writeScenario } from "./fakes/scenario.js";

const onLinux = process.platform === "linux";
if (!onLinux) console.warn("smi lifetime tests skipped: they read /proc (Linux only)");
const ready = built([FAKE_SMI, FAKE_NVML], "the nvidia-smi stand-in or the NVML double") && onLinux;

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Pids of live (not zombie) processes whose argv[0] is `path`. */
function processesOf(path: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv0 = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0")[0];
      if (argv0 !== path) continue;
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      if (state !== "Z" && state !== "X") pids.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

/** Waits up to `ms` for `pid` to be gone; the time it took, or null if it is still there. */
async function goneWithin(pid: number, ms: number): Promise<number | null> {
  const start = Date.now();
  while (Date.now() - start <= ms) {
    if (!alive(pid)) return Date.now() - start;
    await sleep(10);
  }
  return null;
}

const PARENT = `
import { readdirSync, readFileSync } from "node:fs";
import { smiTrack } from ${JSON.stringify(join(ROOT, "src", "sources", "smi", "descriptor.ts"))};
import { SmiSampler } from ${JSON.stringify(join(ROOT, "src", "sources", "smi", "sampler.ts"))};
const [mode, period] = process.argv.slice(2);
const path = process.env.SMI_PATH;
const sampler = new SmiSampler({ path });
const track = smiTrack(0, sampler);
track.retain(Number(period));
const ready = await track.ready();
const why = ready.ok ? null : ready.reason;
const smi = [];
for (const name of readdirSync("/proc")) {
  try {
    if (/^\\d+$/.test(name) && readFileSync("/proc/" + name + "/cmdline", "utf8").split("\\0")[0] === path) smi.push(Number(name));
  } catch {}
}
process.stdout.write(JSON.stringify({ why, smi }) + "\\n");
if (mode === "hold") setInterval(() => {}, 60_000);
`;

describe.runIf(ready)("the nvidia-smi child's lifetime", () => {
  let dir = "";
  let bundle = "";
  let smiPath = "";
  let env: NodeJS.ProcessEnv = {};
  const scenario = ready ? writeScenario({ devices: [{ power: 90 }] }) : null;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "giul-smi-life-"));
    // A path of its own, so that its processes can be told from any other nvidia-smi.
    smiPath = join(dir, "nvidia-smi");
    symlinkSync(FAKE_SMI, smiPath);
    writeFileSync(join(dir, "parent.ts"), PARENT);
    bundle = join(dir, "parent.mjs");
    buildSync({
      entryPoints: [join(dir, "parent.ts")],
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      outfile: bundle,
      logLevel: "error",
    });
    env = { ...process.env, ...scenario?.env(), SMI_PATH: smiPath };
  });

  afterAll(() => {
    for (const pid of processesOf(smiPath)) process.kill(pid, "SIGKILL");
    scenario?.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  it("does not keep its parent alive, and does not outlive it", () => {
    const run = spawnSync(process.execPath, [bundle, "exit", "100"], {
      env,
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(run.signal, run.stderr).toBeNull();
    expect(run.status, run.stderr).toBe(0);
    const report = JSON.parse(run.stdout) as { why: string | null; smi: number[] };
    expect(report.why).toBeNull();
    expect(report.smi).toHaveLength(1);
    return goneWithin(report.smi[0] as number, 2_000).then((ms) => expect(ms).not.toBeNull());
  });

  it("is gone within a second of its parent's SIGKILL, long before its next write", async () => {
    // A 5 s loop: the broken pipe alone would stop it only at its next row.
    const parent = spawn(process.execPath, [bundle, "hold", "5000"], {
      env,
      stdio: ["ignore", "pipe", "inherit"],
    });
    const line = await new Promise<string>((done, fail) => {
      let out = "";
      parent.stdout.setEncoding("utf8");
      parent.stdout.on("data", (chunk: string) => {
        out += chunk;
        if (out.includes("\n")) done(out);
      });
      parent.on("exit", (code) => fail(new Error(`parent exited early (${code})`)));
    });
    const report = JSON.parse(line) as { why: string | null; smi: number[] };
    expect(report.why).toBeNull();
    expect(report.smi).toHaveLength(1);
    const smi = report.smi[0] as number;
    await sleep(200);
    expect(alive(smi)).toBe(true);
    parent.kill("SIGKILL");
    const ms = await goneWithin(smi, 1_000);
    expect(ms, "nvidia-smi outlived its SIGKILLed parent by more than 1 s").not.toBeNull();
  });

  it("stops when the last card closes", async () => {
    const saved = { ...process.env };
    Object.assign(process.env, scenario?.env());
    try {
      const sampler = new SmiSampler({ path: smiPath });
      const a = {};
      const b = {};
      sampler.open(0, 100, a);
      sampler.open(0, 100, b);
      await sleep(300);
      const pids = processesOf(smiPath);
      expect(pids).toHaveLength(1);
      sampler.close(0, a);
      await sleep(300);
      expect(alive(pids[0] as number)).toBe(true);
      sampler.close(0, b);
      expect(await goneWithin(pids[0] as number, 2_000)).not.toBeNull();
      expect(sampler.diagnostics().running).toBe(false);
      expect(sampler.diagnostics().counters.exits).toBe(0); // a stop asked for is not a death
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
    }
  });
});
