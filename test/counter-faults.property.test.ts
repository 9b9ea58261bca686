import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { chargeOutcome } from "../src/meter/record.js";
import { scoreWindows, squareWave, windowPlans } from "./fakes/accuracy.js";
import { propertyOptions } from "./fakes/property.js";
import type { DeviceSpec, JumpSpec, PowerPoint } from "./fakes/scenario.js";
import { SyntheticCard } from "./fakes/synthetic.js";

/** The suite's seed (./fakes/property.ts). */
const SEED = 20261205;

// Counter faults, generated: random traces on the NVML double's arithmetic (test/fakes/synthetic.ts
// computes what fake_nvml.c answers, at the instants the sampling thread reads it), each with a
// counter discontinuity of a random kind, size and time, read at a random sampler period; every
// window is run through the rules (src/rules/energy.ts charge) and scored against the trace's exact
// energy. A `sampled` figure must lie within its bar and never be a zero. The cases come from a
// fixed seed (./fakes/property.ts: GIUL_PROPERTY_SEED=random and GIUL_PROPERTY_RUNS to search).
// What the search found and the estimator does not tell yet, early in a run at a 100 ms period:
// a forward jump of 150 J on a steady 478 W (GIUL_PROPERTY_SEED=1462511626
// GIUL_PROPERTY_PATH=9:4:1:1:0:4:1:1:2:2:2:0:5:0:0:0): before eight steps agree on the sensor's
// gain, a step is judged at any gain a calibration can have over the reads around it, and 150 J
// fits 4/3 of the 385 ms those reads span.

const IDLE_W = 60;
const STEP_MS = 100;
/** The most a card of these traces could draw (W). */
const MOST_DRAW_W = 700;

type Fault =
  | { kind: "back-to-near-zero"; atMs: number }
  | { kind: "back"; atMs: number; j: number }
  | { kind: "forward-beyond-any-card"; atMs: number }
  | { kind: "forward"; atMs: number; j: number }
  | { kind: "stall"; atMs: number; steps: number };

const faultArb: fc.Arbitrary<Fault> = fc.oneof(
  fc.record({ kind: fc.constant("back-to-near-zero" as const), atMs: fc.integer({ min: 1500, max: 4500 }) }),
  // Back by more than a step's energy: the counter is read going back.
  fc.record({
    kind: fc.constant("back" as const),
    atMs: fc.integer({ min: 1500, max: 4500 }),
    j: fc.integer({ min: 150, max: 5000 }),
  }),
  fc.record({
    kind: fc.constant("forward-beyond-any-card" as const),
    atMs: fc.integer({ min: 1500, max: 4500 }),
  }),
  // Within what a card could draw over a period, but more than the power read over the step.
  fc.record({
    kind: fc.constant("forward" as const),
    atMs: fc.integer({ min: 1500, max: 4500 }),
    j: fc.integer({ min: 150, max: 2000 }),
  }),
  fc.record({
    kind: fc.constant("stall" as const),
    atMs: fc.integer({ min: 1500, max: 4500 }),
    steps: fc.integer({ min: 2, max: 8 }),
  }),
);

/** A trace and its shortest feature (ms): steady power, or a square wave. */
const traceArb: fc.Arbitrary<{ power: PowerPoint[]; featureMs: number }> = fc.oneof(
  fc
    .integer({ min: 80, max: 600 })
    .map((w) => ({ power: [[0, w]] as PowerPoint[], featureMs: Number.POSITIVE_INFINITY })),
  fc
    .tuple(
      fc.integer({ min: 80, max: 300 }),
      fc.integer({ min: 310, max: 650 }),
      fc.integer({ min: 20, max: 80 }),
    )
    .map(([lo, hi, halfMs]) => ({ power: squareWave(lo, hi, halfMs, 8), featureMs: halfMs })),
);

/** The counter's jumps for `f` on `trace` (the counter is at 1,000 J + the energy drawn). */
function jumps(f: Fault, card: SyntheticCard): JumpSpec[] {
  const at = Math.ceil(f.atMs / STEP_MS) * STEP_MS;
  switch (f.kind) {
    case "back-to-near-zero":
      return [{ tMs: at, deltaMj: -((card.truth.counterMj(at * 1e6) as number) - 500) }];
    case "back":
      // A counter never reads below zero: back by at most what it holds.
      return [{ tMs: at, deltaMj: -Math.min(f.j * 1000, (card.truth.counterMj(at * 1e6) as number) - 500) }];
    case "forward-beyond-any-card":
      return [{ tMs: at, deltaMj: 10_000_000 }];
    case "forward":
      return [{ tMs: at, deltaMj: f.j * 1000 }];
    case "stall": {
      // Each update's energy taken back: the counter stands still for `steps` steps.
      const out: JumpSpec[] = [];
      for (let i = 0; i < f.steps; i++) {
        const t = at + i * STEP_MS;
        const drawn = (card.truth.energyJ((t - STEP_MS) * 1e6, t * 1e6) * 1000) | 0;
        out.push({ tMs: t, deltaMj: -drawn });
      }
      return out;
    }
  }
}

type Trace = { power: PowerPoint[]; featureMs: number };

/**
 * Runs 40 windows over `trace` with `fault` at `periodMs`, each through the rules; throws on a
 * `sampled` figure outside its bar or a sampled zero. Windows that start and end within `nearNs`
 * of the fault's instant are let be (see the property). Returns the windows run.
 */
async function checkCase(
  trace: Trace,
  fault: Fault,
  periodMs: number,
  seed: number,
  nearNs = -1,
): Promise<number> {
  const faultAt = Math.ceil(fault.atMs / STEP_MS) * STEP_MS * 1e6;
  const clean: DeviceSpec = { power: trace.power, counterStepMs: STEP_MS };
  const device: DeviceSpec = { ...clean, counterJumps: jumps(fault, new SyntheticCard(clean)) };
  const card = new SyntheticCard(device, { periodMs, dither: "golden", readsAtEdges: true });
  const plans = windowPlans(40, { minMs: 50, maxMs: 600, gapMs: [0, 60], startMs: 800, seed }).filter(
    (p) => p.close < 7_500e6,
  );
  const rows = await scoreWindows(card, plans, IDLE_W, { counterStepMs: STEP_MS });
  for (const r of rows) {
    if (!r.sampled) continue;
    if (nearNs > 0 && r.plan.close > faultAt - nearNs && r.plan.open < faultAt + nearNs) continue;
    const measurement = {
      ok: true as const,
      grossJoules: r.figureJ + (IDLE_W * (r.plan.close - r.plan.open)) / 1e9,
      uncertaintyJoules: r.barJ,
      samples: 2,
      maxGapMs: 0,
      caveat: r.caveat,
    };
    const e = chargeOutcome(
      { total: { measurement, seconds: (r.plan.close - r.plan.open) / 1e9, concurrency: null }, stages: [] },
      {
        backend: "nvml_counter",
        idleW: IDLE_W,
        joulesPer1kHint: null,
        contendedBy: null,
        contentionUnchecked: null,
        shared: false,
        attribution: "exclusive",
      },
      null,
    );
    if (e.method !== "sampled") continue;
    const off = Math.abs((e.joules as number) - r.truthJ);
    if (!(e.joules !== 0 && off <= (e.uncertaintyJoules as number) + 1e-9)) {
      throw new Error(
        `${fault.kind} at ${fault.atMs} ms, period ${periodMs} ms: window ${r.plan.open / 1e6}–${r.plan.close / 1e6} ms ` +
          `reported ${e.joules} ± ${e.uncertaintyJoules} J against ${r.truthJ} J`,
      );
    }
  }
  return rows.length;
}

describe("counter faults, generated (fast-check)", () => {
  it("no sampled figure outside its bar, and no sampled zero, across random counter discontinuities", async () => {
    let windows = 0;
    await fc.assert(
      fc.asyncProperty(
        traceArb,
        faultArb,
        fc.constantFrom(1, 2, 5, 10, 20, 50, 100, 1000),
        fc.integer({ min: 1, max: 1000 }),
        async (trace, fault, periodMs, seed) => {
          // The power model's own assumption (src/edges/power-model.ts): no burst or dip shorter
          // than the longest interval between reads (1.618 periods); not a counter fault.
          fc.pre(trace.featureMs >= 2 * periodMs);
          // At periods over 10 ms, two faults can fall between the reads so that the steps around
          // them read as a sensor off by less than a calibration can be (0.75–1.33): a forward
          // jump smaller than a card could draw over two periods (the issue asks it of jumps
          // beyond that), and a stall no longer than two periods. The windows near them are let
          // be; every other window, and every other fault, must be within its bar.
          const hidden =
            periodMs > 10 &&
            ((fault.kind === "forward" && fault.j < (MOST_DRAW_W * 2 * periodMs) / 1000) ||
              (fault.kind === "stall" && fault.steps * STEP_MS <= 2 * periodMs));
          windows += await checkCase(trace, fault, periodMs, seed, hidden ? 2 * periodMs * 1e6 : -1);
        },
      ),
      propertyOptions(SEED),
    );
    expect(windows).toBeGreaterThanOrEqual(1000);
  }, 120_000);

  it("stalls at 100 ms to 1 s periods, and a counter sent back past zero, found by the property on earlier code", async () => {
    const steady = (w: number): Trace => ({ power: [[0, w]], featureMs: Number.POSITIVE_INFINITY });
    const cases: [Trace, Fault, number, number][] = [
      [steady(93), { kind: "stall", atMs: 1501, steps: 2 }, 1000, 10],
      [steady(144), { kind: "stall", atMs: 1501, steps: 7 }, 1000, 952],
      [steady(80), { kind: "stall", atMs: 4301, steps: 3 }, 1000, 799],
      [steady(80), { kind: "stall", atMs: 1501, steps: 4 }, 1000, 667],
      [steady(450), { kind: "back", atMs: 2301, j: 2125 }, 1, 329],
      [steady(91), { kind: "stall", atMs: 4401, steps: 3 }, 100, 540],
      [steady(421), { kind: "stall", atMs: 1510, steps: 3 }, 100, 311],
      [steady(358), { kind: "stall", atMs: 3760, steps: 6 }, 200, 794],
      [steady(441), { kind: "stall", atMs: 2963, steps: 6 }, 200, 686],
    ];
    for (const [trace, fault, periodMs, seed] of cases) await checkCase(trace, fault, periodMs, seed);
  });
});
