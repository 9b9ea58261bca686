import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { fairShare } from "./fakes/fair-share.js";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";
import { squareWave } from "./fakes/waves.js";

// Meter end to end on the native path: the addon's sampling thread reading the libnvidia-ml test
// double. Every figure is compared with the scenario's exact energy over the window's own edges.

const IDLE_W = 60;

// A power limit above the 1000 W idle floor of the "sampled zero" case (the default is 700 W).
const sc = scenarioForThisProcess({
  devices: [{ power: squareWave(600), counterStepMs: 10, powerLimitW: 1200 }],
});

// Loaded after the environment is set: the addon reads it on its first NVML call.
const { Meter, isGiulError } = await import("../src/index.js");
type MeterT = import("../src/meter/meter.js").Meter;

const ready = nativeReady();

afterAll(() => sc.remove());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Energy above idle the scenario says a span cost. */
function truthAbove(from: bigint, to: bigint, idleW = IDLE_W): number {
  return sc.energyJ(0, from, to) - (idleW * Number(to - from)) / 1e9;
}

function edges(m: MeterT) {
  const e = m.edgeTimes();
  if (e.open === null || e.close === null) throw new Error("window has no edges");
  return { open: e.open, close: e.close, marks: e.marks };
}

/**
 * The accuracy bar: 1% of the truth plus one counter step at the highest power per edge. While the
 * ring is young (before the counter has checked the power readings over its first steps) each edge
 * is bounded by the counter alone, so it can be off by up to one step: two edges, two steps.
 */
const STEP_J = 400 * 0.01;
const within = (got: number | null, truth: number) => {
  expect(got).not.toBeNull();
  expect(Math.abs((got as number) - truth)).toBeLessThanOrEqual(Math.abs(truth) * 0.01 + 2 * STEP_J);
};

describe.runIf(ready)("Meter on the energy counter (nvml_counter)", () => {
  const node = { name: "iris", gpuIndex: 0, idleW: IDLE_W };
  beforeAll(async () => {
    // First window: probes the card and starts the sampler.
    const m = await Meter.forNode(node).open();
    await m.close();
  });

  it("measures windows and stages with power steps inside them against the scenario's energy", async () => {
    for (const [a, b] of [
      [60, 90],
      [150, 120],
      [40, 300],
    ] as const) {
      const m = await Meter.forNode(node, { joulesPer1kHint: 4100 }).open();
      await sleep(a);
      m.mark("retrieve");
      await sleep(b);
      m.mark("generate");
      await m.close();
      const e = m.result({ tokens: 412 });
      const t = edges(m);
      expect(e.backend).toBe("nvml_counter");
      expect(e.method, e.reason ?? "").toBe("sampled");
      within(e.joules, truthAbove(t.open, t.close));
      expect(e.seconds).toBeCloseTo(Number(t.close - t.open) / 1e9, 9);
      const [retrieve, generate] = t.marks;
      const spans = [
        [e, truthAbove(t.open, t.close)],
        [e.stages.retrieve, truthAbove(t.open, retrieve?.tNs ?? 0n)],
        [e.stages.generate, truthAbove(retrieve?.tNs ?? 0n, generate?.tNs ?? 0n)],
      ] as const;
      for (const [span, truth] of spans) {
        within(span?.joules ?? null, truth);
        // The error bar is honest: the truth lies inside it, for the window and each stage.
        expect(Math.abs((span?.joules as number) - truth)).toBeLessThanOrEqual(
          span?.uncertaintyJoules as number,
        );
      }
      expect(e.samples).toBeGreaterThan(3);
      // The gaps between the samples from the one before the window to the one after it cover the
      // window: the longest is at least its share. (How long it is depends on the scheduler, so
      // no upper bound here; the error bar above must cover whatever it was.)
      const windowMs = Number(t.close - t.open) / 1e6;
      expect(e.maxGapMs as number).toBeGreaterThanOrEqual(windowMs / ((e.samples as number) + 1));
      expect(e.joulesPer1kTokens).toBeCloseTo(((e.joules as number) * 1000) / 412, 9);
    }
  });

  it("charges the total over the whole window, not the sum of its stages", async () => {
    const m = await Meter.forNode(node).open();
    await sleep(120);
    m.mark("only");
    await sleep(150); // after the last mark: part of the total, in no stage
    await m.close();
    const e = m.result();
    const t = edges(m);
    within(e.joules, truthAbove(t.open, t.close));
    const stageSum = Object.values(e.stages).reduce((s, st) => s + (st.joules ?? 0), 0);
    expect(e.joules as number).toBeGreaterThan(stageSum + 10);
  });

  it("never reports a sampled zero: a window at or below idle is estimated or unknown", async () => {
    const hot = { name: "iris", gpuIndex: 0, idleW: 1000 };
    const m = await Meter.forNode(hot, { joulesPer1kHint: 4100 }).open();
    await sleep(120);
    await m.close();
    const est = m.result({ tokens: 10 });
    expect(est.method).toBe("estimated");
    expect(est.joules).toBeCloseTo(41, 9);
    expect(est.reason).toMatch(/failed measurement/);
    const t = edges(m);
    expect(est.measuredJoules as number).toBeCloseTo(truthAbove(t.open, t.close, 1000), -1);
    const unk = m.result();
    expect(unk.method).toBe("unknown");
    expect(unk.joules).toBeNull();
  });

  it("closes after one sample past the edge, and awaits sync before taking it", async () => {
    let synced = 0n;
    const m = await Meter.forNode(node, {
      sync: async () => {
        await sleep(30);
        synced = process.hrtime.bigint();
      },
    }).open();
    await sleep(100);
    const before = process.hrtime.bigint();
    await m.close();
    const after = process.hrtime.bigint();
    const t = edges(m);
    expect(t.close).toBeGreaterThan(synced);
    expect(synced).toBeGreaterThan(before);
    // about one period (10 ms) after the sync, with room for a loaded machine
    expect(Number(after - t.close) / 1e6).toBeLessThan(500);
    within(m.result().joules, truthAbove(t.open, t.close));
  });

  it("a failing sync hook costs the measurement, never the request", async () => {
    const m = await Meter.forNode(node, {
      sync: () => {
        throw new Error("cuda says no");
      },
    }).open();
    await sleep(20);
    await expect(m.close()).resolves.toBeUndefined();
    const e = m.result();
    expect(e.method).toBe("unknown");
    expect(e.reason).toMatch(/sync hook failed.*cuda says no/);
  });

  it("reports programmer errors at once, naming the field", async () => {
    expect(() => Meter.forNode({ name: "x", idleW: -3 })).toThrow(/node\.idleW/);
    expect(() => Meter.forNode(node, { periodMs: 0 })).toThrow(/periodMs/);
    expect(() => Meter.forNode(node, { joulesPer1kHint: Number.NaN })).toThrow(/joulesPer1kHint/);
    const m = Meter.forNode(node);
    expect(() => m.mark("early")).toThrow(/not open/);
    expect(() => m.result()).toThrow(/await close\(\) first/);
    await m.open();
    expect(() => m.mark("")).toThrow(/non-empty stage name/);
    m.mark("a");
    expect(() => m.mark("a")).toThrow(/already marked/);
    await m.close();
    await m.close(); // idempotent
    try {
      m.mark("late");
      expect.unreachable();
    } catch (error) {
      expect(isGiulError(error, "WINDOW_STATE")).toBe(true);
    }
  });

  it("measure() closes on throw and rethrows; returns the value and the energy otherwise", async () => {
    await expect(
      Meter.forNode(node).measure(async () => {
        await sleep(30);
        throw new Error("upstream 503");
      }),
    ).rejects.toThrow("upstream 503");
    const { value, energy } = await Meter.forNode(node, { joulesPer1kHint: 1000 }).measure(
      async (m) => {
        await sleep(60);
        m.mark("generate");
        await sleep(60);
        return { tokens: 77 };
      },
      { tokens: (v) => v.tokens },
    );
    expect(value.tokens).toBe(77);
    expect(energy.tokens).toBe(77);
    expect(energy.method).toBe("sampled");
    expect(energy.stages.generate?.method).toBe("sampled");
  });

  it("await using closes the window at the end of the block", async () => {
    let m: MeterT;
    {
      await using w = await Meter.forNode(node).open();
      m = w;
      await sleep(110);
    }
    const e = m.result();
    within(e.joules, truthAbove(edges(m).open, edges(m).close));
  });

  it("1,000 concurrent windows on one card each measure the card correctly, and share it", async () => {
    const windows = Array.from({ length: 1000 }, async (_, i) => {
      const m = await Meter.forNode(node).open();
      await sleep(100 + (i % 50));
      m.mark("first");
      await sleep(10 + (i % 7));
      await m.close();
      return m;
    });
    const done = await Promise.all(windows);
    const truth = fairShare(
      done.map((m) => {
        const t = edges(m);
        return { open: t.open, close: t.close, weights: [[t.open, 1]] };
      }),
      (a, b) => sc.energyJ(0, a, b),
      IDLE_W,
    );
    let worst = 0;
    let sum = 0;
    let unsampled = 0;
    done.forEach((m, i) => {
      const e = m.result();
      const t = edges(m);
      // The whole card over the window's own edges, as an exclusive window measures it.
      const card = truthAbove(t.open, t.close);
      const share = truth.shares[i] as number;
      expect(e.attribution).toBe("shared");
      expect(e.concurrency?.max).toBeGreaterThan(1);
      if (e.method !== "sampled") {
        // With about 1,000 windows open, a window's share (a few hundredths of a joule) is far
        // inside its bar, so its figure can come out at or below zero: the rules never report that
        // as a measured zero. Allowed only so, with the truth within the bar of that figure.
        console.log(e.reason, "; bar", e.uncertaintyJoules, "; truth share", share);
        const figure = Number(/share was (-?[\d.]+) J above idle/.exec(e.reason ?? "")?.[1]);
        expect(figure).toBeLessThanOrEqual(0);
        // The figure in the reason is rounded to the mJ.
        expect(Math.abs(figure - share)).toBeLessThanOrEqual((e.uncertaintyJoules as number) + 0.001);
        unsampled += 1;
        sum += figure;
        return;
      }
      within(e.cardJoules, card);
      worst = Math.max(worst, Math.abs((e.cardJoules as number) - card) / card);
      // Its share, against the exact weighted fair share, within its own bar.
      expect(Math.abs((e.joules as number) - share)).toBeLessThanOrEqual(
        (e.uncertaintyJoules as number) + Math.abs(share) * 0.01,
      );
      sum += e.joules as number;
    });
    expect(unsampled).toBeLessThanOrEqual(10);
    // The shares add up to the card over the union of the windows.
    expect(Math.abs(sum - truth.unionAbove)).toBeLessThanOrEqual(
      truth.unionAbove * 0.001 + STEP_J + unsampled * 0.001,
    );
    console.log(
      `1,000 concurrent windows: worst relative error of the card figure ${(worst * 100).toFixed(3)}%`,
    );
  });
});

describe.runIf(ready)("Meter on a card that misbehaves", () => {
  it("degrades a window in which the GPU is lost, with the reason", async () => {
    // A fresh copy of giul: no selection of the card cached by the windows above.
    vi.resetModules();
    const { Meter } = await import("../src/index.js");
    const m = await Meter.forNode(
      { name: "iris", idleW: IDLE_W, gpuIndex: 0 },
      { joulesPer1kHint: 2000 },
    ).open();
    // Lost 150 ms after the window opened (scheduled once it is open, so inside it however slow
    // the machine; the close comes at least 300 ms after this).
    const lostAtMs = sc.nowMs() + 150;
    sc.update({
      devices: [{ power: squareWave(600), errors: [{ fromMs: lostAtMs, code: 15 }] }],
    });
    await sleep(300);
    await m.close();
    const e = m.result({ tokens: 5 });
    expect(e.method).toBe("estimated");
    expect(e.joules).toBe(10);
    expect(e.reason).toMatch(/GPU is lost/);
  });
});
