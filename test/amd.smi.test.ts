import { spawnSync } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { amdEnv, amdSpec } from "./fakes/amd-scenario.js";
import { built, DIST, FAKE_AMD_SMI, FAKE_AMDSMI } from "./fakes/paths.js";
import { Scenario } from "./fakes/scenario.js";
import { squareWave } from "./fakes/waves.js";

// The amd-smi fallback (amdsmi_cli): no addon, so no AMD SMI library in the process; one amd-smi
// stand-in child (reading the libamd_smi double, so the scenario drives it) prints the card's
// counter once a second. Windows against the scenario's energy, each inside its bar.

const IDLE_W = 50;
const ready = built([DIST, FAKE_AMD_SMI, FAKE_AMDSMI], "dist, the amd-smi stand-in or the libamd_smi double");
const sc = new Scenario(amdSpec({ devices: [{ power: squareWave(120), powerNoiseW: 3 }] }));
afterAll(() => sc.remove());

interface Window {
  backend: string;
  method: string;
  joules: number | null;
  bar: number | null;
  reason: string | null;
  open: string;
  close: string;
}

describe.runIf(ready)("amdsmi_cli: the amd-smi tool's counter, without the addon", () => {
  it("measures windows of a few seconds within their bars, and says how", () => {
    const code = `
      const { Meter } = await import(process.env.TEST_DIST);
      const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
      const node = { name: "mi300x", gpuIndex: 0, idleW: ${IDLE_W} };
      const out = [];
      for (const ms of [2500, 4000]) {
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
      env: {
        ...process.env,
        ...amdEnv(sc),
        GIUL_DISABLE_ADDON: "1",
        GIUL_AMD_SMI: FAKE_AMD_SMI,
        TEST_DIST: DIST,
      },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(ran.status, ran.stderr).toBe(0);
    const windows = JSON.parse(ran.stdout) as Window[];
    for (const w of windows) {
      const truth =
        sc.energyJ(0, BigInt(w.open), BigInt(w.close)) -
        (IDLE_W * Number(BigInt(w.close) - BigInt(w.open))) / 1e9;
      expect(w.backend).toBe("amdsmi_cli");
      expect(w.method, w.reason ?? "").toBe("sampled");
      expect(w.reason).toMatch(/amd-smi's socket_power, printed once a second/);
      expect(Math.abs((w.joules as number) - truth)).toBeLessThanOrEqual(w.bar as number);
      // Each edge is bounded by a second or so of the card's energy (at most 400 W): no wider.
      expect(w.bar as number).toBeLessThanOrEqual(2 * 1.6 * 400);
    }
  }, 60_000);
});
