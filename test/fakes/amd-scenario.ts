/**
 * The libamd_smi double's side of a scenario (test/fakes/SCENARIO.md): the same file and ground
 * truth as the NVML double's, read through GIUL_FAKE_AMDSMI_SCENARIO, on a host where NVML is
 * absent (an AMD-only host: gpuIndex numbers AMD SMI's cards). The accumulator mirrors
 * fake_amdsmi.c: 2^-16 J counts of the exact integral at the counter's last update.
 */
import { spawnSync } from "node:child_process";
import { DIST, FAKE_AMDSMI, NO_NVML } from "./paths.js";
import { Scenario, type ScenarioSpec } from "./scenario.js";

/** AMD's counter updates about every millisecond (the driver's metrics cache): the double's default. */
const AMD_STEP_MS = 1;

/** The spec with the AMD double's defaults the TS truth must know (its counter step). */
export function amdSpec(spec: ScenarioSpec): ScenarioSpec {
  const devices = (spec.devices ?? [{}]).map((d) => ({ counterStepMs: AMD_STEP_MS, ...d }));
  return { ...spec, devices };
}

/** The environment of a process that sees the AMD double and no NVML. */
export function amdEnv(sc: Scenario): Record<string, string> {
  return { GIUL_FAKE_AMDSMI_SCENARIO: sc.path, GIUL_AMDSMI_LIBRARY: FAKE_AMDSMI, GIUL_NVML_LIBRARY: NO_NVML };
}

/**
 * Writes a scenario and points this process at the AMD double for good (NVML absent). Call it at
 * the top of a test file, before giul is imported.
 */
export function amdScenarioForThisProcess(spec: ScenarioSpec = {}): Scenario {
  const sc = new Scenario(amdSpec(spec));
  Object.assign(process.env, amdEnv(sc));
  delete process.env.GIUL_BACKEND;
  return sc;
}

/** One window as a child process measured it (times as strings of CLOCK_MONOTONIC ns). */
export interface ChildWindow {
  backend: string;
  method: string;
  joules: number | null;
  bar: number | null;
  reason: string | null;
  open: string;
  close: string;
}

/**
 * Runs windows of `ms` each, one after another, in a fresh Node process on the built package
 * (dist/) with `env`, after a warm-up window of `warmMs` (0: none); the scenario's energy above
 * `idleW` over each window's own edges is `truth(window)`.
 */
export function windowsInChild(
  sc: Scenario,
  env: Record<string, string>,
  ms: readonly number[],
  options: { idleW: number; warmMs: number; timeoutMs?: number },
): { got: ChildWindow[]; truth: (w: ChildWindow) => number } {
  const code = `
    const { Meter } = await import(process.env.TEST_DIST);
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    const node = { name: "amd", gpuIndex: 0, idleW: ${options.idleW} };
    if (${options.warmMs} > 0) {
      const warm = await Meter.forNode(node).open();
      await sleep(${options.warmMs});
      await warm.close();
    }
    const out = [];
    for (const ms of ${JSON.stringify(ms)}) {
      const m = await Meter.forNode(node).open();
      await sleep(ms);
      await m.close();
      const e = m.result();
      const t = m.edgeTimes();
      out.push({ backend: e.backend, method: e.method, joules: e.joules, bar: e.uncertaintyJoules,
        reason: e.reason, open: String(t.open), close: String(t.close) });
    }
    console.log(JSON.stringify(out));`;
  const ran = spawnSync(process.execPath, ["--input-type=module", "-e", code], {
    env: { ...process.env, GIUL_BACKEND: "", ...env, TEST_DIST: DIST },
    encoding: "utf8",
    timeout: options.timeoutMs ?? 30_000,
  });
  if (ran.status !== 0) throw new Error(`the child exited ${ran.status}: ${ran.stderr}`);
  const truth = (w: ChildWindow) =>
    sc.energyJ(0, BigInt(w.open), BigInt(w.close)) -
    (options.idleW * Number(BigInt(w.close) - BigInt(w.open))) / 1e9;
  return { got: JSON.parse(ran.stdout) as ChildWindow[], truth };
}
