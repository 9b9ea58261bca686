import { describe, expect, it } from "vitest";
import { DEFAULT_PERIOD_MS } from "../src/meter/options.js";
import {
  burstsAtEdges,
  type Summary,
  scoreWindows,
  squareWave,
  steady,
  summarize,
  type WaitMode,
  type WindowPlan,
  windowPlans,
} from "./fakes/accuracy.js";
import { inferenceTrace } from "./fakes/family.js";
import type { DeviceSpec } from "./fakes/scenario.js";
import { SyntheticCard } from "./fakes/synthetic.js";

// The energy counter fused with instantaneous power, scored against exact ground truth: 10,000
// windows per case on a synthetic card (the NVML double's answers at the instants the sampling
// thread reads them, with its dithered ticks; test/fakes/synthetic.ts), each read after the first
// sample past its close, as close() does. Every sampled window must lie within its own bar, under
// traces built to break bars (bursts in the counter step around each edge, back-to-back windows,
// a sensor that holds its value, averaged power, an irregular counter); and the bars must be tight
// enough to defend a figure. Speed targets live in bench/, not here.

const IDLE_W = 60;
const N = 10_000;
const SQUARE = squareWave(100, 400, 37, 20_000);

/** Scored as the sampler reads at the Meter's default period, unless a test says otherwise. */
async function score(
  device: DeviceSpec,
  plans: readonly WindowPlan[],
  wait: WaitMode = "sample",
  periodMs: number = DEFAULT_PERIOD_MS,
): Promise<Summary> {
  const card = new SyntheticCard(device, { periodMs, dither: "golden" });
  const s = summarize(
    await scoreWindows(card, plans, IDLE_W, { wait, counterStepMs: device.counterStepMs ?? 10 }),
  );
  return s;
}

function report(name: string, s: Summary): void {
  console.log(
    `${name}: ${s.sampled}/${s.windows} sampled, ${s.outside} outside their bar (worst error/bar ${s.worstOverBar.toFixed(3)}), ` +
      `median bar ${s.medianBarPct.toFixed(2)} % (${s.medianBarJ.toFixed(3)} J), mean |error| ${s.meanErrPct.toFixed(2)} %`,
  );
}

/** Every sampled window within its bar. */
function bounded(name: string, s: Summary): void {
  report(name, s);
  expect(s.outside).toBe(0);
  expect(s.sampled).toBeGreaterThan(0);
}

const mixed = windowPlans(N, { minMs: 20, maxMs: 600, seed: 1 });
const backToBack = windowPlans(N, { minMs: 100, maxMs: 900, gapMs: [0, 0], seed: 2 });
const withGaps = windowPlans(N, { minMs: 20, maxMs: 600, seed: 3 });

describe("every sampled window lies within its own bar (100 ms counter step)", () => {
  it("steady power, windows of 20–600 ms", async () => {
    bounded("steady", await score({ power: steady(262), counterStepMs: 100 }, mixed));
  });

  it("a 100 ↔ 400 W square wave (37 ms half-period)", async () => {
    bounded("square wave", await score({ power: SQUARE, counterStepMs: 100 }, mixed));
  });

  for (const where of ["before", "after", "both"] as const) {
    it(`700 W bursts placed in the counter step ${where === "both" ? "before or after" : where} each edge, back to back and with gaps`, async () => {
      const burst = { base: 100, burstW: 700, burstMs: 90, stepMs: 100, where };
      bounded(
        `bursts ${where}, back to back`,
        await score({ power: burstsAtEdges(backToBack, burst), counterStepMs: 100 }, backToBack),
      );
      bounded(
        `bursts ${where}, with gaps`,
        await score(
          { power: burstsAtEdges(withGaps, { ...burst, burstMs: 40 }), counterStepMs: 100 },
          withGaps,
        ),
      );
    });
  }

  it("an instant sensor that refreshes only every 25 ms", async () => {
    bounded(
      "25 ms sensor, square wave",
      await score({ power: SQUARE, counterStepMs: 100, powerUpdateMs: 25 }, mixed),
    );
    // What a sensor refreshing every 25 ms cannot see (a dip shorter than that) no bound claims.
    const burst = { base: 100, burstW: 700, burstMs: 90, stepMs: 100, where: "both" as const, minGapMs: 45 };
    bounded(
      "25 ms sensor, bursts, back to back",
      await score(
        { power: burstsAtEdges(backToBack, burst), counterStepMs: 100, powerUpdateMs: 25 },
        backToBack,
      ),
    );
  });

  it("averaged power only: no fusion, the counter alone bounds the edges, and the record says so", async () => {
    const card = new SyntheticCard(
      { power: SQUARE, counterStepMs: 100, instantField: false, powerMode: "average" },
      { periodMs: DEFAULT_PERIOD_MS, dither: "golden" },
    );
    const rows = await scoreWindows(card, mixed, IDLE_W, { counterStepMs: 100 });
    bounded("averaged power", summarize(rows));
    for (const r of rows) {
      if (r.sampled)
        expect(r.caveat).toMatch(/trailing average \(nvmlDeviceGetPowerUsage\).*counter's updates alone/);
      // Without power, a window shorter than a step is not measured.
      else expect(r.reason).toMatch(/shorter than the energy counter's update step/);
    }
  });

  it("an irregular counter cadence (updates up to 3 ms late): the anchors fall back to the read interval", async () => {
    bounded(
      "irregular cadence, steady",
      await score({ power: steady(262), counterStepMs: 100, counterJitterMs: 3 }, mixed),
    );
    bounded(
      "irregular cadence, square",
      await score({ power: SQUARE, counterStepMs: 100, counterJitterMs: 3 }, mixed),
    );
    bounded(
      "slightly irregular cadence (0.3 ms)",
      await score({ power: SQUARE, counterStepMs: 100, counterJitterMs: 0.3 }, mixed),
    );
  });

  it("a 10 ms counter step and a continuous counter (3,000 windows)", async () => {
    const withGaps = windowPlans(3_000, { minMs: 20, maxMs: 600, seed: 3 });
    bounded("10 ms step, square", await score({ power: SQUARE, counterStepMs: 10 }, withGaps));
    bounded("continuous counter, square", await score({ power: SQUARE, counterStepMs: 0 }, withGaps));
  });

  it("at a 10 ms period too (periodMs: 10): square wave, bursts either side, a 25 ms sensor", async () => {
    bounded(
      "10 ms period, square wave",
      await score({ power: SQUARE, counterStepMs: 100 }, mixed, "sample", 10),
    );
    const burst = { base: 100, burstW: 700, burstMs: 90, stepMs: 100, where: "both" as const };
    bounded(
      "10 ms period, bursts, back to back",
      await score({ power: burstsAtEdges(backToBack, burst), counterStepMs: 100 }, backToBack, "sample", 10),
    );
    bounded(
      "10 ms period, 25 ms sensor, square wave",
      await score({ power: SQUARE, counterStepMs: 100, powerUpdateMs: 25 }, mixed, "sample", 10),
    );
  });
});

describe("bars tight enough to defend a figure (100 ms counter step)", () => {
  it("steady power, windows of 100 ms and more: median bar ≤ 5 % of the figure", async () => {
    const s = await score(
      { power: steady(262), counterStepMs: 100 },
      windowPlans(N, { minMs: 100, maxMs: 600, seed: 4 }),
    );
    bounded("steady ≥ 100 ms", s);
    expect(s.medianBarPct).toBeLessThanOrEqual(5);
  });

  it("square wave: median bar ≤ 50 % at 100 ms, ≤ 10 % at 1 s", async () => {
    const short = await score(
      { power: SQUARE, counterStepMs: 100 },
      windowPlans(N, { minMs: 100, maxMs: 100, seed: 5 }),
    );
    bounded("square 100 ms", short);
    expect(short.medianBarPct).toBeLessThanOrEqual(50);
    const long = await score(
      { power: SQUARE, counterStepMs: 100 },
      windowPlans(N, { minMs: 1000, maxMs: 1000, seed: 6 }),
    );
    bounded("square 1 s", long);
    expect(long.medianBarPct).toBeLessThanOrEqual(10);
  });

  it("mean |error| ≤ 3 % on 100 ms windows (steady, bursts, a square wave) and on a square wave's 100–400 ms windows, where Zeus is off by 15–20 %", async () => {
    const plans = windowPlans(N, { minMs: 100, maxMs: 100, seed: 7 });
    const s = await score({ power: steady(262), counterStepMs: 100 }, plans);
    bounded("steady 100 ms", s);
    expect(s.meanErrPct).toBeLessThanOrEqual(3);
    const burst = { base: 100, burstW: 700, burstMs: 90, stepMs: 100, where: "both" as const };
    const b = await score({ power: burstsAtEdges(backToBack, burst), counterStepMs: 100 }, backToBack);
    report("bursts, back to back", b);
    expect(b.meanErrPct).toBeLessThanOrEqual(3);
    expect(b.zeusMeanErrPct).toBeGreaterThan(15);
    const sq = await score(
      { power: SQUARE, counterStepMs: 100 },
      windowPlans(N, { minMs: 100, maxMs: 400, seed: 8 }),
    );
    report("square 100–400 ms", sq);
    expect(sq.meanErrPct).toBeLessThanOrEqual(3);
    expect(sq.zeusMeanErrPct).toBeGreaterThan(15);
    // Exactly 100 ms on the square wave: where inside a read interval each 300 W edge of the wave
    // fell is known only to within the interval, so the error scales with the period (about 2.8 %
    // at the default 5 ms; Zeus 16.6 %).
    const sq100 = await score({ power: SQUARE, counterStepMs: 100 }, plans);
    bounded("square 100 ms", sq100);
    expect(sq100.meanErrPct).toBeLessThanOrEqual(3);
    expect(sq100.zeusMeanErrPct).toBeGreaterThan(15);
    // At 10 ms the same windows are off by about 7 % (bench/RESULTS.md): reported, not a target.
    report(
      "square 100 ms, 10 ms period",
      await score({ power: SQUARE, counterStepMs: 100 }, plans, "sample", 10),
    );
  });

  it("averaged power only, one window per request: the counter's own steps place each edge, at most half Zeus's error", async () => {
    // A request's window opens as its burst starts and closes as it ends. A 1 s average cannot
    // say where in the counter's step that was; the levels of the steps either side can (charged
    // the middle of the step instead, such windows came out 12 % low at 250 ms, every time).
    const { power, plans } = inferenceTrace(400, [250, 1000], { idleW: IDLE_W, seed: 3 });
    const s = await score({ power, counterStepMs: 100, instantField: false }, plans);
    bounded("averaged only, requests of 250 ms and 1 s", s);
    expect(s.sampled).toBe(400);
    expect(s.meanErrPct).toBeLessThanOrEqual(4);
    expect(s.meanErrPct).toBeLessThanOrEqual(s.zeusMeanErrPct / 2);
  });

  it("windows shorter than the counter step are sampled from the fused reading, with their bar", async () => {
    const s = await score(
      { power: steady(262), counterStepMs: 100 },
      windowPlans(2_000, { minMs: 20, maxMs: 20, seed: 9 }),
    );
    bounded("steady 20 ms", s);
    expect(s.sampled).toBe(s.windows);
    // The readings' energy over the window, plus what they may leave unexplained of the counter's
    // step around it (a burst or dip between two reads could lie inside the window).
    expect(s.medianBarPct).toBeLessThanOrEqual(12);
  });
});

describe("each edge scored against the exact cumulative energy (bench/sensors.js --edges)", () => {
  it("a window's error is its closing edge's less its opening edge's, on every sampled request", async () => {
    // The per-edge table says where a window's error comes from; it is only worth reading if the
    // edges' errors add up to the windows' (the truth's cumulative energy on the ring's clock).
    const { power, plans } = inferenceTrace(400, [250, 1000], { idleW: IDLE_W, seed: 5 });
    const card = new SyntheticCard(
      { power, counterStepMs: 100, powerUpdateMs: 100, powerAvgShare: 0.25 },
      { periodMs: DEFAULT_PERIOD_MS, dither: "golden", readsAtEdges: true },
    );
    const rows = (await scoreWindows(card, plans, IDLE_W, { counterStepMs: 100 })).filter((r) => r.sampled);
    expect(rows.length).toBeGreaterThan(350);
    for (const r of rows) {
      expect(Number.isFinite(r.openErrJ) && Number.isFinite(r.closeErrJ)).toBe(true);
      expect(Math.abs(r.figureJ - r.truthJ - (r.closeErrJ - r.openErrJ))).toBeLessThan(1e-6);
    }
  });
});
