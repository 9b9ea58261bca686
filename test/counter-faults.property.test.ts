import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { chargeOutcome } from "../src/meter/record.js";
import { scoreWindows, squareWave, windowPlans } from "./fakes/accuracy.js";
import type { DeviceSpec, JumpSpec, PowerPoint } from "./fakes/scenario.js";
import { SyntheticCard } from "./fakes/synthetic.js";

// Counter faults, generated: random traces on the NVML double's arithmetic (test/fakes/synthetic.ts
// computes what fake_nvml.c answers, at the instants the sampling thread reads it), each with a
// counter discontinuity of a random kind, size and time, read at a random sampler period; every
// window is run through the rules (src/rules/energy.ts charge) and scored against the trace's exact
// energy. A `sampled` figure must lie within its bar and never be a zero; the failing seed is
// printed by fast-check when one does not.
// GIUL_PROPERTY_RUNS sets the number of generated cases (60 by default), for a longer search by hand.

const IDLE_W = 60;
const STEP_MS = 100;

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
      return [{ tMs: at, deltaMj: -f.j * 1000 }];
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

describe("counter faults, generated (fast-check)", () => {
  it("no sampled figure outside its bar, and no sampled zero, across random counter discontinuities", async () => {
    let windows = 0;
    await fc.assert(
      fc.asyncProperty(
        traceArb,
        faultArb,
        fc.constantFrom(1, 2, 5, 10, 20, 50, 100, 1000),
        fc.integer({ min: 1, max: 1000 }),
        async ({ power, featureMs }, fault, periodMs, seed) => {
          // The power model's own assumption (src/edges/power-model.ts): no burst or dip shorter
          // than the longest interval between reads (1.618 periods); not a counter fault.
          fc.pre(featureMs >= 2 * periodMs);
          // A forward jump within a card's draw, or a stall, is told from energy only by power read
          // often enough to place it (the sampler's own faults are told at every period).
          fc.pre((fault.kind !== "forward" && fault.kind !== "stall") || periodMs <= 10);
          const clean: DeviceSpec = { power, counterStepMs: STEP_MS };
          const device: DeviceSpec = { ...clean, counterJumps: jumps(fault, new SyntheticCard(clean)) };
          const card = new SyntheticCard(device, { periodMs, dither: "golden", readsAtEdges: true });
          const plans = windowPlans(40, { minMs: 50, maxMs: 600, gapMs: [0, 60], startMs: 800, seed }).filter(
            (p) => p.close < 7_500e6,
          );
          const rows = await scoreWindows(card, plans, IDLE_W, { counterStepMs: STEP_MS });
          for (const r of rows) {
            windows += 1;
            if (!r.sampled) continue;
            const measurement = {
              ok: true as const,
              grossJoules: r.figureJ + (IDLE_W * (r.plan.close - r.plan.open)) / 1e9,
              uncertaintyJoules: r.barJ,
              samples: 2,
              maxGapMs: 0,
              caveat: r.caveat,
            };
            const e = chargeOutcome(
              {
                total: { measurement, seconds: (r.plan.close - r.plan.open) / 1e9, concurrency: null },
                stages: [],
              },
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
        },
      ),
      { numRuns: Number(process.env.GIUL_PROPERTY_RUNS ?? 60) },
    );
    expect(windows).toBeGreaterThanOrEqual(1000);
  }, 120_000);
});
