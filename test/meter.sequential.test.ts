import { afterAll, describe, expect, it } from "vitest";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// 10,000 windows one after another on one card, sampled every millisecond, each compared with
// the scenario's energy over its own edges.

const IDLE_W = 80;
const sc = scenarioForThisProcess({
  devices: [
    {
      // 300 W with a slow ramp to 500 W and back, so windows see different powers
      power: [
        [0, 300],
        [20_000, 500],
        [40_000, 300],
        [600_000, 300],
      ],
      counterStepMs: 1,
    },
  ],
});
const { Meter } = await import("../src/index.js");

const ready = nativeReady();
afterAll(() => sc.remove());

describe.runIf(ready)("10,000 sequential windows", () => {
  it("are each within their uncertainty of the truth, or honestly degraded", async () => {
    const node = { name: "seq", idleW: IDLE_W };
    let sampled = 0;
    let worstOverBound = 0;
    for (let i = 0; i < 10_000; i++) {
      const m = await Meter.forNode(node, { periodMs: 1, joulesPer1kHint: 500 }).open();
      // a little work: most windows span a few counter updates, some fewer
      await new Promise((r) => setTimeout(r, i % 4 === 0 ? 0 : 2));
      m.mark("a");
      await m.close();
      const e = m.result({ tokens: 1 });
      const t = m.edgeTimes();
      if (t.open === null || t.close === null) throw new Error("no edges");
      const truth = sc.energyJ(0, t.open, t.close) - (IDLE_W * Number(t.close - t.open)) / 1e9;
      if (e.method === "sampled") {
        sampled++;
        const err = Math.abs((e.joules as number) - truth);
        // within the error bar the record states, and never a zero
        expect(e.joules as number).toBeGreaterThan(0);
        worstOverBound = Math.max(worstOverBound, err - (e.uncertaintyJoules as number));
        expect(err).toBeLessThanOrEqual((e.uncertaintyJoules as number) + 1e-6);
      } else {
        expect(e.method).toBe("estimated");
        expect(e.joules).toBe(0.5);
        expect(e.reason).toMatch(/shorter than the energy counter's update step|failed measurement/);
      }
    }
    console.log(
      `10,000 sequential windows: ${sampled} sampled, worst error minus bound ${worstOverBound.toFixed(4)} J`,
    );
    // Windows of a millisecond or two on a 1 ms counter: most are long enough to measure.
    expect(sampled).toBeGreaterThan(6_000);
  }, 240_000);
});
