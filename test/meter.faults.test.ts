import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// A card whose counter updates only every 100 ms, and then misbehaves: the counter jumps (driver
// reload) or goes back. Each window must degrade honestly, with the reason, and never throw.
// (Device 1: the same counter on a card whose only power is a 1 s average.)

const sc = scenarioForThisProcess({
  devices: [
    { power: 300, counterStepMs: 100 },
    { power: 300, counterStepMs: 100, instantField: false, powerMode: "average" },
  ],
});
const { Meter } = await import("../src/index.js");

const ready = nativeReady();
afterAll(() => sc.remove());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const node = { name: "coarse", idleW: 50 };

describe.runIf(ready)("a coarse or faulty energy counter", () => {
  // Under test:worker, the windows below are the worker's (those opened before it is ready are not).
  beforeAll(async () => {
    const warm = await Meter.forNode(node).open();
    await warm.close();
  });
  it("a window shorter than the counter's step: measured from the power read beside the counter, or not at all with averaged power only", async () => {
    const averaged = { name: "coarse-averaged", gpuIndex: 1, idleW: 50 };
    // let the samplers see the counter change a few times
    const warm = await Promise.all([Meter.forNode(node).open(), Meter.forNode(averaged).open()]);
    await sleep(450);
    await Promise.all(warm.map((m) => m.close()));
    for (const m of warm) expect(m.result().method).toBe("sampled");

    // A window of ~20 ms; a loaded machine can stretch it, so take the first of a few tries whose
    // own edges are well inside one 100 ms step (the case under test).
    for (const [n, fused] of [
      [node, true],
      [averaged, false],
    ] as const) {
      for (let attempt = 0; ; attempt++) {
        const m = await Meter.forNode(n, { joulesPer1kHint: 3000 }).open();
        await sleep(20);
        await m.close();
        const t = m.edgeTimes();
        if (t.open === null || t.close === null) throw new Error("window has no edges");
        if (Number(t.close - t.open) / 1e6 >= 50) {
          if (attempt < 20) continue;
          throw new Error("no window shorter than 50 ms in 20 tries");
        }
        const e = m.result({ tokens: 2 });
        if (fused) {
          // Instantaneous power places the energy inside the counter's step: a measurement, within its bar.
          const truth = sc.energyJ(0, t.open, t.close) - (50 * Number(t.close - t.open)) / 1e9;
          expect(e.method, e.reason ?? "").toBe("sampled");
          expect(Math.abs((e.joules as number) - truth)).toBeLessThanOrEqual(e.uncertaintyJoules as number);
        } else {
          expect(e.method).toBe("estimated");
          expect(e.joules).toBe(6);
          expect(e.reason).toMatch(/shorter than the energy counter's update step \(~\d+/);
        }
        break;
      }
    }
  });

  it("a counter that jumps inside the window (driver reload) degrades the window", async () => {
    // Scheduled once the window is open, so the jump falls between its edges however slow the
    // machine: open < jumpAt (now + 150 ms) and close ≥ now + 400 ms.
    const m = await Meter.forNode(node).open();
    const jumpAt = sc.nowMs() + 150;
    sc.update({
      devices: [{ power: 300, counterStepMs: 100, counterJumps: [{ tMs: jumpAt, deltaMj: 5_000_000 }] }],
    });
    await sleep(400);
    await m.close();
    const e = m.result();
    expect(e.method).toBe("unknown");
    expect(e.joules).toBeNull();
    expect(e.reason).toMatch(/jumped/);
  });

  it("a counter that goes backwards inside the window degrades the window", async () => {
    const m = await Meter.forNode(node).open();
    const backAt = sc.nowMs() + 150; // inside the window, as above
    sc.update({
      devices: [
        {
          power: 300,
          counterStepMs: 100,
          counterJumps: [
            { tMs: 0, deltaMj: 5_000_000 }, // keep the earlier jump so the counter stays monotone until…
            { tMs: backAt, deltaMj: -3_000_000 },
          ],
        },
      ],
    });
    await sleep(400);
    await m.close();
    const e = m.result();
    expect(e.method).toBe("unknown");
    expect(e.reason).toMatch(/went backwards/);
  });
});
