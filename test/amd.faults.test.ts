import { afterAll, describe, expect, it } from "vitest";
import { amdEnv, amdSpec, type ChildWindow, windowsInChild } from "./fakes/amd-scenario.js";
import { amdReady } from "./fakes/paths.js";
import { Scenario, type ScenarioSpec } from "./fakes/scenario.js";
import { squareWave } from "./fakes/waves.js";

// AMD SMI as real cards and hosts have it, each case in a process of its own (a library that
// loaded stays loaded): the accumulator's exact unit against the library's rounded 15.3 µJ, a
// counter that is frozen or counts at the wrong rate (refused at the probe, as Zeus refuses it),
// the library absent, a ROCm 6 library (refused, never misread), a card lost mid-window. Every
// figure is compared with the scenario's exact energy.

const IDLE_W = 50;
const scenarios: Scenario[] = [];
afterAll(() => {
  for (const sc of scenarios) sc.remove();
});

type Window = ChildWindow;

/** Runs windows of `ms` (after a warm-up window) in a fresh process on the scenario. */
function windows(spec: ScenarioSpec, ms: readonly number[], env: Record<string, string> = {}) {
  const sc = new Scenario(amdSpec(spec));
  scenarios.push(sc);
  return { sc, ...windowsInChild(sc, { ...amdEnv(sc), ...env }, ms, { idleW: IDLE_W, warmMs: 300 }) };
}

describe.runIf(amdReady())("AMD SMI's faults and units", () => {
  it("counts the accumulator in exact 2^-16 J, not the library's rounded 15.3 µJ", () => {
    // 400 W for 3 s: 1200 J on the card, which 15.3 µJ a count would overstate by 3.2 J (an edge
    // inside a 1 ms counter step can be off by 0.4 J).
    const { got, truth } = windows({ devices: [{ power: 400 }] }, [3000]);
    const w = got[0] as Window;
    expect(w.backend).toBe("amdsmi_counter");
    expect(w.method, w.reason ?? "").toBe("sampled");
    const err = Math.abs((w.joules as number) - truth(w));
    expect(err).toBeLessThanOrEqual(w.bar as number);
    expect(err).toBeLessThan(1.2);
  });

  for (const [what, rate] of [
    ["frozen", 0],
    ["counting twice the energy (an MI250 die that counts its partner's too)", 2],
  ] as const) {
    it(`does not use a counter that is ${what}: integrates power instead, and says why`, () => {
      // Readings that differ by a few watts from one read to the next, as a loaded card's do: whole
      // watts of a steady draw would not show that the sensor follows the card.
      const device = { power: squareWave(60), powerNoiseW: 3, counterRate: rate };
      const { got, truth } = windows({ devices: [device] }, [400]);
      const w = got[0] as Window;
      expect(w.backend).toBe("amdsmi_sampler");
      expect(w.method, w.reason ?? "").toBe("sampled");
      expect(w.reason).toMatch(/energy counter is not used: .*disagrees with integrated power/);
      expect(Math.abs((w.joules as number) - truth(w))).toBeLessThanOrEqual(w.bar as number);
    });
  }

  it("without libamd_smi (nor NVML), meters nothing and names both libraries", () => {
    const { got } = windows({}, [50], { GIUL_AMDSMI_LIBRARY: "/nonexistent/libamd_smi.so.26" });
    const w = got[0] as Window;
    expect(w.backend).toBe("none");
    expect(w.joules).toBeNull();
    expect(w.reason).toMatch(/NVML is unavailable/);
    expect(w.reason).toMatch(/AMD SMI is unavailable: dlopen\("\/nonexistent\/libamd_smi\.so\.26"\) failed/);
  });

  it("refuses a ROCm 6 library (AMD SMI 24.x) by its version, never misreading its structs", () => {
    const { got } = windows({ libMajor: 24 }, [50]);
    const w = got[0] as Window;
    expect(w.backend).toBe("none");
    expect(w.joules).toBeNull();
    expect(w.reason).toMatch(
      /is AMD SMI 24\.7\.1, whose structs giul does not read \(it reads AMD SMI 26\.x/,
    );
  });

  it("a card lost mid-window costs that window's figure, never the request, and says why", () => {
    // Every call on the card fails with "processor not found" from 1.2 s on (after the warm-up).
    const errors = [{ fromMs: 1200, code: 31 }];
    const { got } = windows({ devices: [{ power: [[0, 300]], errors }] }, [600, 200]);
    const [lost, after] = got as [Window, Window];
    expect(lost.joules).toBeNull();
    expect(lost.method).toBe("unknown");
    expect(after.joules).toBeNull();
    expect(`${lost.reason} ${after.reason}`).toMatch(/AMD SMI status 31 \(processor not found\)/);
  });
});
