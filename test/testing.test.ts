import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { built, DIST, ROOT } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// giul/testing: a simulated card metered through the normal selection, for users' CI. Its figures
// must follow the declared power exactly, and never pass for a measurement of hardware.

const sc = scenarioForThisProcess({ devices: [{ power: 150, counterStepMs: 10 }] });
afterAll(() => sc.remove());
const { Meter, isGiulError } = await import("../src/index.js");
const { simulateCard } = await import("../src/testing.js");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("simulateCard", () => {
  it("a constant draw: the window is charged it above idle, labelled as simulated", async () => {
    const card = simulateCard({ gpuIndex: 3, watts: 300 });
    try {
      const m = await Meter.forNode({ name: "ci", gpuIndex: 3, idleW: 100 }).open();
      await sleep(200);
      m.mark("generate");
      await m.close();
      const e = m.result({ tokens: 10 });
      expect(e.backend).toBe("simulated");
      expect(e.method).toBe("sampled");
      expect(e.reason).toMatch(/^a simulated card \(giul\/testing\): this figure measures no hardware/);
      expect(Math.abs((e.joules as number) - 200 * e.seconds)).toBeLessThanOrEqual(
        e.uncertaintyJoules as number,
      );
      expect(e.stages.generate?.backend).toBe("simulated");
      expect(e.toJSON().backend).toBe("simulated");
    } finally {
      card.close();
    }
  });

  it("steps and functions of time; windows at once share the card", async () => {
    const steps = simulateCard({
      gpuIndex: 4,
      watts: [
        [0, 100],
        [300, 400],
      ],
    });
    const created = process.hrtime.bigint();
    const fn = simulateCard({ gpuIndex: 5, watts: (s) => 100 + 100 * s });
    try {
      const a = await Meter.forNode({ name: "a", gpuIndex: 4, idleW: 100 }).open();
      const b = await Meter.forNode({ name: "b", gpuIndex: 4, idleW: 100 }).open();
      const opened = Number(process.hrtime.bigint() - created) / 1e6;
      await sleep(550);
      await Promise.all([a.close(), b.close()]);
      const ea = a.result();
      const eb = b.result();
      // 300 W above idle from 300 ms on, split in two. Both windows opened while the card was at
      // idle, so the card over their union is the card over whichever closed last (the two closes
      // can land on different samples): the shares add up to that, not to either window's own card.
      expect(opened).toBeLessThan(300);
      expect(ea.concurrency?.max).toBe(2);
      const union = Math.max(ea.cardJoules as number, eb.cardJoules as number);
      expect(Math.abs((ea.joules as number) + (eb.joules as number) - union)).toBeLessThan(1);
      // And the union against the scenario: 300 W from 300 ms to the last close.
      const last = Math.max(ea.seconds as number, eb.seconds as number);
      expect(union).toBeGreaterThan(300 * (last - 0.3) - 2 * 300 * 0.02);
      const m = await Meter.forNode({ name: "f", gpuIndex: 5, idleW: 100 }).open();
      await sleep(200);
      await m.close();
      expect(m.result().method).toBe("sampled");
      expect(m.result().joules as number).toBeGreaterThan(0);
    } finally {
      steps.close();
      fn.close();
    }
  });

  it("once closed, the index meters the real card again", async () => {
    const card = simulateCard({ gpuIndex: 0, watts: 999 });
    const sim = await Meter.forNode({ name: "x", gpuIndex: 0, idleW: 50 }).open();
    await sleep(50);
    await sim.close();
    expect(sim.backend).toBe("simulated");
    card.close();
    const real = await Meter.forNode({ name: "x", gpuIndex: 0, idleW: 50 }).open();
    await sleep(100);
    await real.close();
    expect(real.backend).toBe("nvml_counter");
  });

  it("bad options are programmer errors naming the field", () => {
    const field = (fn: () => unknown) => {
      try {
        fn();
      } catch (e) {
        expect(isGiulError(e, "INVALID_OPTION")).toBe(true);
        return (e as { field?: string }).field;
      }
      return "did not throw";
    };
    expect(field(() => simulateCard({ watts: -1 }))).toBe("watts");
    expect(field(() => simulateCard({ watts: [[0, "x"]] as never }))).toBe("watts");
    expect(field(() => simulateCard({ gpuIndex: 2.5, watts: 10 }))).toBe("gpuIndex");
    expect(field(() => simulateCard({ wats: 10 } as never))).toBe("wats");
  });
});

describe.runIf(built([DIST], "dist/"))("giul/testing from the package", () => {
  it("giul-probe --demo meters three overlapping requests on a simulated card and prints their records", () => {
    const r = spawnSync(process.execPath, [join(ROOT, "dist", "cli", "probe.js"), "--demo", "--json"], {
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const records = JSON.parse(r.stdout) as {
      backend: string;
      method: string;
      joules: number;
      card_joules: number;
      concurrency_max: number;
      reason: string;
      stages: Record<string, unknown>;
    }[];
    expect(records).toHaveLength(3);
    for (const e of records) {
      expect(e.backend).toBe("simulated");
      expect(e.method).toBe("sampled");
      expect(e.reason).toMatch(/measures no hardware/);
      expect(Object.keys(e.stages)).toEqual(["prefill", "decode"]);
      expect(e.joules).toBeLessThan(e.card_joules);
    }
    expect(Math.max(...records.map((e) => e.concurrency_max))).toBe(3);
  });

  it("works from CommonJS too: giul/testing and giul share the simulated card", () => {
    const dir = mkdtempSync(join(ROOT, "build", "testing-cjs-"));
    try {
      const file = join(dir, "t.cjs");
      writeFileSync(
        file,
        `const { simulateCard } = require("giul/testing");
const { Meter } = require("giul");
(async () => {
  const card = simulateCard({ gpuIndex: 7, watts: 250 });
  const m = await Meter.forNode({ name: "cjs", gpuIndex: 7, idleW: 50 }).open();
  await new Promise((r) => setTimeout(r, 100));
  await m.close();
  card.close();
  console.log(JSON.stringify(m.result()));
})();
`,
      );
      const r = spawnSync(process.execPath, [file], { cwd: ROOT, encoding: "utf8", env: { ...process.env } });
      expect(r.status, r.stderr).toBe(0);
      const e = JSON.parse(r.stdout);
      expect(e.backend).toBe("simulated");
      expect(Math.abs(e.joules - 200 * e.seconds)).toBeLessThanOrEqual(e.uncertainty_joules);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
