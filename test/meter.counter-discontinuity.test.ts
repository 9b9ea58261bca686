import { afterAll, describe, expect, it } from "vitest";
import type { Meter as MeterType } from "../src/index.js";
import { scoreWindows, squareWave, windowPlans } from "./fakes/accuracy.js";
import { nativeReady } from "./fakes/paths.js";
import { type DeviceSpec, type JumpSpec, scenarioForThisProcess } from "./fakes/scenario.js";
import { SyntheticCard } from "./fakes/synthetic.js";

// A counter that moves in a way no power reading explains — a forward jump well within what a
// card could draw over the sampler's period, or a stall while 250 W is drawn — must not be taken
// for energy: the window across it is not `sampled`, its reason names the discontinuity, and the
// next window is measured within its bar again. (A backwards step and a jump beyond any card's draw
// are the sampler's own faults: test/meter.faults.test.ts.) And a step read late is no such
// thing: its readings missed what the power did between them.

const base: DeviceSpec = { power: 250, counterStepMs: 100 };
const sc = scenarioForThisProcess({ devices: [base] });
const { Meter } = await import("../src/index.js");
afterAll(() => sc.remove());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const node = { name: "discontinuity", gpuIndex: 0, idleW: 60 };
/** Every jump so far: a scenario without an earlier one would move the counter back. */
const jumps: JumpSpec[] = [];
function addJumps(more: readonly JumpSpec[]): void {
  jumps.push(...more);
  sc.update({ devices: [{ ...base, counterJumps: [...jumps] }] });
}

/** The window's exact energy above idle, from the scenario. */
function truth(m: MeterType): number {
  const t = m.edgeTimes();
  if (t.open === null || t.close === null) throw new Error("window has no edges");
  return sc.energyJ(0, t.open, t.close) - (node.idleW * Number(t.close - t.open)) / 1e9;
}

/** A window that must be measured within its bar (the card behaving). */
async function measuredWindow(periodMs: number, ms: number): Promise<void> {
  const m = await Meter.forNode(node, { periodMs }).open();
  await sleep(ms);
  await m.close();
  const e = m.result();
  expect(e.method, e.reason ?? "").toBe("sampled");
  expect(Math.abs((e.joules as number) - truth(m))).toBeLessThanOrEqual(e.uncertaintyJoules as number);
}

describe.runIf(nativeReady())("a counter discontinuity no power reading explains", () => {
  for (const periodMs of [5, 1000]) {
    it(`a forward jump of 400 J inside a window (period ${periodMs} ms) is not measured, and says so`, async () => {
      await measuredWindow(periodMs, periodMs === 1000 ? 2500 : 600);
      const m = await Meter.forNode(node, { periodMs, joulesPer1kHint: 1000 }).open();
      const at = sc.nowMs() + (periodMs === 1000 ? 1200 : 300);
      addJumps([{ tMs: at, deltaMj: 400_000 }]);
      await sleep(periodMs === 1000 ? 3500 : 800);
      await m.close();
      const e = m.result({ tokens: 10 });
      expect(e.method, `${e.joules} J, truth ${truth(m)} J`).toBe("estimated");
      expect(e.reason).toMatch(/energy counter advanced .* a counter jump/);
      await measuredWindow(periodMs, periodMs === 1000 ? 2500 : 600);
    });
  }

  it("a counter that stalls for 400 ms while 250 W is drawn is not measured across the stall", async () => {
    await measuredWindow(5, 600);
    const m = await Meter.forNode(node, { joulesPer1kHint: 1000 }).open();
    // From the next step on, each update's 25 J taken back: the counter stands still for 4 steps.
    const step = Math.ceil((sc.nowMs() + 200) / 100) * 100;
    const stall = [0, 1, 2, 3].map((i) => ({ tMs: step + i * 100, deltaMj: -25_000 }));
    addJumps(stall);
    await sleep(1000);
    await m.close();
    const e = m.result({ tokens: 10 });
    expect(e.method, `${e.joules} J, truth ${truth(m)} J`).toBe("estimated");
    expect(e.reason).toMatch(/stalled counter/);
    await measuredWindow(5, 600);
  });
});

describe("a sampling thread that reads late", () => {
  // A starved thread (a loaded host) reads up to 80 ms late on a 120 ↔ 360 W square wave of
  // 45 ms half-period: the readings between its late reads miss whole phases, so such a step
  // says nothing of the sensor's gain and is no glitch; every window is still within its bar.
  it("declares no glitch from reads that came late, and no figure outside its bar", async () => {
    const card = new SyntheticCard(
      { power: squareWave(120, 360, 45, 60), counterStepMs: 10, powerNoiseW: 0.5 },
      { periodMs: 10, dither: "golden", readsAtEdges: true, latencyUs: 80_000 },
    );
    const plans = windowPlans(1500, { minMs: 40, maxMs: 640, gapMs: [-300, 50], startMs: 500, seed: 3 });
    const rows = await scoreWindows(
      card,
      plans.filter((p) => p.close < 55_000e6),
      50,
      { counterStepMs: 10 },
    );
    expect(rows.length).toBeGreaterThan(200);
    expect(
      rows.filter((r) => !r.sampled && /disagreed with the power readings/.test(r.reason ?? "")),
    ).toEqual([]);
    for (const r of rows.filter((x) => x.sampled))
      expect(Math.abs(r.figureJ - r.truthJ)).toBeLessThanOrEqual(r.barJ + 1e-9);
    expect(rows.filter((r) => r.sampled).length).toBeGreaterThanOrEqual(0.95 * rows.length);
  });
});
