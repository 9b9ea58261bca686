import { afterAll, describe, expect, it } from "vitest";
import { amdEnv, amdSpec, windowsInChild } from "./fakes/amd-scenario.js";
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

describe.runIf(ready)("amdsmi_cli: the amd-smi tool's counter, without the addon", () => {
  it("measures windows of a few seconds within their bars, and says how", () => {
    const env = { ...amdEnv(sc), GIUL_DISABLE_ADDON: "1", GIUL_AMD_SMI: FAKE_AMD_SMI };
    const { got: windows, truth: truthOf } = windowsInChild(sc, env, [2500, 4000], {
      idleW: IDLE_W,
      warmMs: 0,
      timeoutMs: 60_000,
    });
    for (const w of windows) {
      const truth = truthOf(w);
      expect(w.backend).toBe("amdsmi_cli");
      expect(w.method, w.reason ?? "").toBe("sampled");
      expect(w.reason).toMatch(/amd-smi's socket_power, printed once a second/);
      expect(Math.abs((w.joules as number) - truth)).toBeLessThanOrEqual(w.bar as number);
      // Each edge is bounded by a second or so of the card's energy (at most 400 W): no wider.
      expect(w.bar as number).toBeLessThanOrEqual(2 * 1.6 * 400);
    }
  }, 60_000);
});
