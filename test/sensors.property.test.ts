import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Scored, scoreWindows, squareWave, type WindowPlan, windowPlans } from "./fakes/accuracy.js";
import { inferenceTrace } from "./fakes/family.js";
import { propertyOptions } from "./fakes/property.js";
import type { DeviceSpec, PowerPoint } from "./fakes/scenario.js";
import { type SamplerModel, SyntheticCard } from "./fakes/synthetic.js";
import { spanThroughAgent } from "./fakes/through-agent.js";

/** The suite's seed (./fakes/property.ts). */
const SEED = 20261205;

// The sensor family of real cards (issue 49), generated: counters updating every 10–100 ms whose
// updates wander up to ±20 % of the step and drift up to ±200 ppm, some changing cadence at run
// time; instant power fresh, held 5–100 ms as a point sample or an average over 25–100 % of its
// hold (A100/H100: 25 of 100 ms), or averaged power only (1 s); a gain of ±5 % shared by the
// counter and the sensor. Traces: inference-like requests (one window each), square waves at and
// near the sensor's refresh, bursts shorter than a refresh; windows from a sampler's first reads
// (a restarted process: from 60 ms, inside its 250 ms of 2 ms reads) on, sequential and
// overlapping. Every `sampled` figure must lie within its bar of the trace's exact energy, and
// windows of 250 ms or more must be sampled (95 %).
// GIUL_PROPERTY_RUNS sets the number of cases (60 by default: about 2,400 windows); 250 runs are
// about 10,000 windows. The cases are drawn from a fixed seed (see propertyOptions).

const IDLE_W = 60;

const sensorArb: fc.Arbitrary<DeviceSpec> = fc
  .record({
    stepMs: fc.integer({ min: 10, max: 100 }),
    wander: fc.double({ min: 0, max: 0.2, noNaN: true }),
    driftPpm: fc.integer({ min: -200, max: 200 }),
    change: fc.option(fc.tuple(fc.integer({ min: 1000, max: 20_000 }), fc.integer({ min: 10, max: 100 }))),
    power: fc.oneof(
      fc.constant({ kind: "fresh" as const }),
      fc.record({
        kind: fc.constant("held" as const),
        // From one read period (5 ms) on: a sensor held 1–2 reads repeats only some of its values.
        holdMs: fc.integer({ min: 5, max: 100 }),
        share: fc.oneof(fc.constant(0), fc.double({ min: 0.25, max: 1, noNaN: true })),
      }),
      fc.constant({ kind: "averaged" as const }),
    ),
  })
  .map(({ stepMs, wander, driftPpm, change, power }) => ({
    counterStepMs: stepMs,
    // Below half the shorter of the two cadences (the double keeps updates in order).
    counterWanderMs: Math.min(wander, 0.49) * Math.min(stepMs, change?.[1] ?? stepMs),
    counterDriftPpm: driftPpm,
    ...(change !== null ? { counterCadence: [[change[0], change[1]] as const] } : {}),
    ...(power.kind === "fresh" ? { powerMode: "instant" as const } : {}),
    ...(power.kind === "held" ? { powerUpdateMs: power.holdMs, powerAvgShare: power.share } : {}),
    ...(power.kind === "averaged" ? { instantField: false } : {}),
  }));

/** A trace and its windows, built on demand (a counterexample prints its recipe, not its points). */
interface Trace {
  readonly recipe: string;
  build(): { power: PowerPoint[]; plans: WindowPlan[] };
}
const lazy = (recipe: unknown, build: Trace["build"]): Trace => ({ recipe: JSON.stringify(recipe), build });

/** Requests, or a square wave or short bursts with random windows. */
const traceArb = (sensor: DeviceSpec, minBurstMs = 2): fc.Arbitrary<Trace> => {
  const hold = sensor.powerUpdateMs ?? 20;
  return fc.oneof(
    fc
      .record({ seed: fc.integer({ min: 1, max: 1e6 }), startMs: fc.integer({ min: 60, max: 6000 }) })
      .map((r) =>
        lazy({ requests: r }, () =>
          inferenceTrace(40, [20, 100, 250, 600, 1000, 3000, 5000], {
            idleW: IDLE_W,
            minPhaseMs: minBurstMs,
            ...r,
          }),
        ),
      ),
    fc
      .record({
        halfMs: fc.integer({
          min: Math.max(10, minBurstMs, Math.round(hold * 0.8)),
          max: Math.max(minBurstMs, Math.round(hold * 1.25)) + 10,
        }),
        lo: fc.integer({ min: 80, max: 300 }),
        hi: fc.integer({ min: 320, max: 690 }),
        seed: fc.integer({ min: 1, max: 1e6 }),
        overlap: fc.boolean(),
      })
      .map((r) =>
        lazy({ square: r }, () => ({
          power: squareWave(r.lo, r.hi, r.halfMs, 40),
          plans: windowPlans(40, {
            minMs: 20,
            maxMs: 2000,
            gapMs: r.overlap ? [-1500, 50] : [5, 150],
            startMs: 60,
            seed: r.seed,
          }),
        })),
      ),
    fc
      .record({
        burstMs: fc.integer({ min: minBurstMs, max: Math.max(minBurstMs + 1, hold - 1) }),
        seed: fc.integer({ min: 1, max: 1e6 }),
      })
      .map((r) =>
        lazy({ bursts: r }, () => {
          // 690 W bursts shorter than a refresh on 120 W, 20–72 ms apart (minBurstMs at least).
          const pts: PowerPoint[] = [[0, 120]];
          let t = 50;
          for (let i = 0; t < 40_000; i++) {
            pts.push([t, 120], [t, 690], [t + r.burstMs, 690], [t + r.burstMs, 120]);
            t += r.burstMs + Math.max(minBurstMs, 20 + ((i * 7919 + r.seed) % 53));
          }
          return {
            power: pts,
            plans: windowPlans(40, { minMs: 20, maxMs: 2000, startMs: 60, seed: r.seed }),
          };
        }),
      ),
  );
};

const caseArb = sensorArb.chain((sensor) =>
  fc.record({
    sensor: fc.constant(sensor),
    trace: traceArb(sensor),
    gain: fc.double({ min: 0.95, max: 1.05, noNaN: true }),
  }),
);

/**
 * The same sensors on a card without an energy counter, read by nvml_sampler (every 5 ms, dithered,
 * and right after each edge) or by smi_sampler (nvidia-smi -lms 100: on a steady grid), on traces
 * whose power changes at most once between two reads (no level shorter than two reads): an integral
 * of readings can see nothing shorter, and says so nowhere, so that is its stated limit (a named
 * case below takes requests shorter than smi_sampler's reads). Sensors held from one read period
 * on: one held about a read shows no run of two reads to tell it by and passes for fresh, so its
 * bar allows its readings' lag (src/ring/integral-spread.ts).
 */
const PERIOD_MS = 5;
const NATIVE: SamplerModel = { periodMs: PERIOD_MS, dither: "golden", readsAtEdges: true };
const SMI: SamplerModel = { periodMs: 100, dither: "none" };
const integralCaseArb = (sampler: SamplerModel) => {
  const period = sampler.periodMs ?? 10;
  const power = fc.oneof(
    fc.constant<DeviceSpec>({ powerMode: "instant" }),
    fc
      .record({
        holdMs: fc.integer({ min: period, max: 20 * period }),
        share: fc.oneof(fc.constant(0), fc.double({ min: 0.25, max: 1, noNaN: true })),
      })
      .map((h): DeviceSpec => ({ powerUpdateMs: h.holdMs, powerAvgShare: h.share })),
    fc.constant<DeviceSpec>({ instantField: false }),
  );
  return power.chain((p) => {
    const sensor: DeviceSpec = { ...p, counter: false };
    return fc.record({
      sensor: fc.constant(sensor),
      trace: traceArb(sensor, 2 * period),
      gain: fc.constant(1),
      sampler: fc.constant(sampler),
    });
  });
};
/** Scales a trace's power: a gain shared by the counter and the sensor (the counter is the truth). */
const scaled = (pts: readonly PowerPoint[], g: number): PowerPoint[] => pts.map(([t, w]) => [t, w * g]);

describe("the sensor family of real cards, generated (fast-check)", () => {
  it("no sampled figure outside its bar; windows of 250 ms or more sampled", async () => {
    const all: Scored[] = [];
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        all.push(...(await scoreCase(c)));
      }),
      propertyOptions(SEED),
    );
    const long = all.filter((r) => r.plan.close - r.plan.open >= 250e6);
    const sampled = long.filter((r) => r.sampled).length;
    console.log(
      `sensor family: ${all.length} windows, ${sampled} of ${long.length} of 250 ms or more sampled`,
    );
    expect(all.length).toBeGreaterThanOrEqual(2000);
    expect(sampled / long.length).toBeGreaterThanOrEqual(0.95);
  }, 600_000);

  it("a sensor that averages longer than 50 ms bounds nothing: a 20 ms window inside one step is within its bar", async () => {
    // Once outside its bar (1.46 ± 7.66 J for 9.88 J, a 17 ms burst at 646 W inside): held readings
    // bounded as averages of at most 50 ms, where this sensor averages its whole 57 ms hold.
    const sensor: DeviceSpec = {
      counterStepMs: 19,
      counterDriftPpm: 44,
      counterCadence: [[2349, 63]],
      powerUpdateMs: 57,
      powerAvgShare: 1,
    };
    const r = { seed: 577313, startMs: 4421 };
    const trace = lazy({ requests: r }, () =>
      inferenceTrace(40, [20, 100, 250, 600, 1000, 3000, 5000], { idleW: IDLE_W, ...r }),
    );
    const rows = await scoreCase({ sensor, trace, gain: 0.95 });
    const that = rows.find((w) => Math.abs(w.plan.open / 1e6 - 37946.58) < 1);
    expect(that?.truthJ).toBeCloseTo(9.88, 1);
    expect(rows.filter((w) => w.sampled).length).toBeGreaterThan(30);
  });

  it("a sensor held a little over two reads is not read as fresh: a window across many swings is within its bar", async () => {
    // Once outside its bar (216.21 ± 2.19 J for 218.40 J): held 11 ms and read every 5 ms, it had
    // shown two changes within 2.5 reads and been taken as the power at each read, though each
    // reading lagged the 23 ms swings by up to a hold (src/edges/read-runs.ts).
    const sensor: DeviceSpec = {
      counterStepMs: 52,
      counterDriftPpm: 51,
      powerUpdateMs: 11,
      powerAvgShare: 0.808055359983226,
    };
    const r = { halfMs: 23, lo: 80, hi: 320, seed: 1 };
    const trace = lazy({ square: r }, () => ({
      power: squareWave(r.lo, r.hi, r.halfMs, 40),
      plans: windowPlans(40, { minMs: 20, maxMs: 2000, gapMs: [-1500, 50], startMs: 60, seed: r.seed }),
    }));
    const rows = await scoreCase({ sensor, trace, gain: 0.95 });
    const that = rows.find((w) => Math.abs(w.plan.open / 1e6 - 1105.17) < 1);
    expect(that?.truthJ).toBeCloseTo(218.4, 1);
    expect(that?.sampled).toBe(true);
  });

  it("a sensor held 1.4 reads, most values seen once, is not read as fresh: a request's first 21 ms are within their bar", async () => {
    // Once outside its bar (5.98 ± 2.56 J for 8.85 J): held 7 ms and read every 5 ms, the median of
    // its runs was one read, and the prefill's start showed a hold late.
    const sensor: DeviceSpec = {
      counterStepMs: 63,
      counterDriftPpm: 6,
      counterCadence: [[19999, 63]],
      powerUpdateMs: 7,
      powerAvgShare: 0.4915518734967369,
    };
    const r = { seed: 806081, startMs: 4030 };
    const trace = lazy({ requests: r }, () =>
      inferenceTrace(40, [20, 100, 250, 600, 1000, 3000, 5000], { idleW: IDLE_W, ...r }),
    );
    const rows = await scoreCase({ sensor, trace, gain: 0.95 });
    const that = rows.find((w) => Math.abs(w.plan.open / 1e6 - 4030) < 1);
    expect(that?.truthJ).toBeCloseTo(8.85, 1);
    expect(rows.filter((w) => w.sampled).length).toBeGreaterThan(30);
  });

  it("a sensor judged to hold when a window closed is refused for holding, not as not known yet", async () => {
    // Whole-watt readings (AMD) repeat by their resolution: on this trace most windows close while
    // the median run spans two reads, judged held. The reason said "not known yet at the closing
    // edge (fewer than 3 changes seen then)" for 813 of these 1,200 windows; the sensor was known.
    const trace = inferenceTrace(1200, [20, 50, 100, 250, 1000], { idleW: IDLE_W, seed: 1 });
    const card = new SyntheticCard(
      { powerMode: "instant", power: trace.power, counter: false },
      { ...NATIVE, amd: true },
    );
    const rows = await scoreWindows(card, trace.plans, IDLE_W, {});
    const held = rows.filter((r) =>
      /its power sensor holds each reading \(about \d+ ms/.test(r.reason ?? ""),
    );
    expect(held.length).toBeGreaterThan(500);
    expect(rows.filter((r) => /not known yet/.test(r.reason ?? ""))).toHaveLength(0);
  });

  it("smi_sampler: a sensor refreshing about once a read passes for fresh, and its lag is in the bar", async () => {
    // Once outside its bar (−0.00 ± 7.29 J for 11.90 J): held 101 ms and read on nvidia-smi's steady
    // 100 ms grid, it repeats no value, and the reading after a request's start still showed idle.
    // That 20 ms window is now too short for reads 100 ms apart; the longer ones carry the lag.
    const sensor: DeviceSpec = { powerUpdateMs: 101, powerAvgShare: 0, counter: false };
    const r = { seed: 1, startMs: 69 };
    const trace = lazy({ requests: r }, () =>
      inferenceTrace(40, [20, 100, 250, 600, 1000, 3000, 5000], { idleW: IDLE_W, minPhaseMs: 200, ...r }),
    );
    const rows = await scoreCase({ sensor, trace, gain: 1, sampler: SMI });
    const that = rows.find((w) => Math.abs(w.plan.open / 1e6 - 50197.4) < 1);
    expect(that?.truthJ).toBeCloseTo(11.9, 1);
    expect(that?.sampled).toBe(false);
    expect(that?.reason).toMatch(/shorter than the power reads resolve \([0-9.]+ ms between reads/);
    const long = rows.filter((w) => w.plan.close - w.plan.open >= 600e6);
    expect(long.length).toBeGreaterThan(10);
    expect(long.every((w) => w.sampled)).toBe(true);
  });

  it("smi_sampler: requests shorter than its reads resolve are not measured, and no figure is outside its bar", async () => {
    // Requests from 20 ms with prefills and decode steps from 15 ms, read every 100 ms: a request
    // can start and end between two reads, and read as idle. Before such windows were refused, this
    // case put one outside its bar (bench/sensors.js --smi, this trace family: 29–88 of 2,400).
    const sensor: DeviceSpec = { powerMode: "instant", counter: false };
    const r = { seed: 1, startMs: 6000 };
    const trace = lazy({ requests: r }, () =>
      inferenceTrace(300, [20, 50, 100, 250, 1000, 5000], { idleW: IDLE_W, ...r }),
    );
    const rows = await scoreCase({ sensor, trace, gain: 1, sampler: SMI });
    const short = rows.filter((w) => w.plan.close - w.plan.open < 250e6);
    expect(short.length).toBeGreaterThan(100);
    expect(short.every((w) => !w.sampled && /too short to measure/.test(w.reason ?? ""))).toBe(true);
    const long = rows.filter((w) => w.plan.close - w.plan.open >= 900e6);
    expect(long.length).toBeGreaterThan(50);
    expect(long.every((w) => w.sampled)).toBe(true);
  });

  for (const [name, sampler] of [
    ["nvml_sampler", NATIVE],
    ["smi_sampler", SMI],
  ] as const) {
    it(`without an energy counter (${name}): readings held two reads or more never sampled, the rest within their bars`, async () => {
      const period = sampler.periodMs ?? 10;
      const fresh: Scored[] = [];
      let held = 0;
      let near = 0;
      let nearSampled = 0;
      await fc.assert(
        fc.asyncProperty(integralCaseArb(sampler), async (c) => {
          const rows = await scoreCase(c);
          const hold = c.sensor.powerUpdateMs ?? 0;
          if (hold >= 2 * period || c.sensor.instantField === false) {
            held += rows.length;
            const sampled = rows.find((r) => r.sampled);
            if (sampled !== undefined)
              throw new Error(
                `a held or averaged sensor's window was sampled: ${JSON.stringify(sampled.plan)}`,
              );
            // Said why (a sensor held seconds may show no three changes inside the trace's windows).
            expect(
              rows.some((r) => /holds each reading|trailing average|not known yet/.test(r.reason ?? "")),
            ).toBe(true);
          } else if (hold > 0) {
            near += rows.length;
            nearSampled += rows.filter((r) => r.sampled).length;
          } else fresh.push(...rows);
        }),
        propertyOptions(SEED),
      );
      // Windows the reads resolve (tooShortForReads): 250 ms, or three of smi_sampler's read
      // intervals (one between reads, two of lag: a fresh sensor's median run is one read).
      const longMs = Math.max(250, 3 * period);
      const long = fresh.filter((r) => r.plan.close - r.plan.open >= longMs * 1e6);
      const sampled = long.filter((r) => r.sampled).length;
      console.log(
        `sensor family, no counter, ${name}: ${fresh.length} windows on fresh sensors (${sampled} of ${long.length} of ${longMs} ms or more sampled); ${near} on sensors held one to two reads (${nearSampled} sampled, within their bars); ${held} on held or averaged ones, none sampled`,
      );
      expect(long.length).toBeGreaterThan(100);
      expect(sampled / long.length).toBeGreaterThanOrEqual(0.95);
    }, 600_000);
  }
});

// The same families measured through giul-agent (remote_agent): each edge's /energy reading built
// by the agent's code from the card's track, the span the remote client's (./fakes/through-agent.ts).
describe("the sensor family through giul-agent (remote_agent), generated", () => {
  it("with an energy counter: no sampled figure outside its bar; windows of 250 ms or more sampled", async () => {
    const all: Scored[] = [];
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        all.push(...(await scoreCase(c, spanThroughAgent)));
      }),
      propertyOptions(SEED + 1),
    );
    const long = all.filter((r) => r.plan.close - r.plan.open >= 250e6);
    const sampled = long.filter((r) => r.sampled).length;
    console.log(
      `through the agent: ${all.length} windows, ${sampled} of ${long.length} of 250 ms or more sampled`,
    );
    expect(sampled / long.length).toBeGreaterThanOrEqual(0.95);
  }, 600_000);

  for (const [name, sampler] of [
    ["nvml_sampler", NATIVE],
    ["smi_sampler", SMI],
  ] as const) {
    it(`without an energy counter (${name}): held readings never sampled, the rest within their bars`, async () => {
      const period = sampler.periodMs ?? 10;
      const fresh: Scored[] = [];
      await fc.assert(
        fc.asyncProperty(integralCaseArb(sampler), async (c) => {
          const rows = await scoreCase(c, spanThroughAgent);
          const hold = c.sensor.powerUpdateMs ?? 0;
          if (hold >= 2 * period || c.sensor.instantField === false) {
            const sampled = rows.find((r) => r.sampled);
            if (sampled !== undefined)
              throw new Error(
                `a held or averaged sensor's window was sampled: ${JSON.stringify(sampled.plan)}`,
              );
          } else if (hold === 0) fresh.push(...rows);
        }),
        propertyOptions(SEED + 1),
      );
      const longMs = Math.max(250, 3 * period);
      const long = fresh.filter((r) => r.plan.close - r.plan.open >= longMs * 1e6);
      const sampled = long.filter((r) => r.sampled).length;
      console.log(
        `through the agent, no counter, ${name}: ${fresh.length} windows on fresh sensors, ${sampled} of ${long.length} of ${longMs} ms or more sampled`,
      );
      expect(long.length).toBeGreaterThan(100);
      expect(sampled / long.length).toBeGreaterThanOrEqual(0.95);
    }, 600_000);
  }
});

/** Meters a case's windows and fails on a sampled figure outside its bar (or a measured zero). */
async function scoreCase(
  c: {
    sensor: DeviceSpec;
    trace: Trace;
    gain: number;
    sampler?: SamplerModel;
  },
  measure?: typeof spanThroughAgent,
): Promise<Scored[]> {
  const trace = c.trace.build();
  // Plans that overlap (negative gaps) are kept in time order of their opening edges.
  const plans = trace.plans.filter((p) => p.close > p.open && p.open > 0);
  const card = new SyntheticCard({ ...c.sensor, power: scaled(trace.power, c.gain) }, c.sampler ?? NATIVE);
  const rows = await scoreWindows(card, plans, IDLE_W, {
    counterStepMs: c.sensor.counterStepMs ?? 10,
    ...(measure ? { measure } : {}),
  });
  for (const r of rows) {
    if (!r.sampled) continue;
    const off = Math.abs(r.figureJ - r.truthJ);
    if (!(off <= r.barJ + 1e-6) || r.figureJ + IDLE_W * ((r.plan.close - r.plan.open) / 1e9) === 0) {
      throw new Error(
        `window ${r.plan.open / 1e6}–${r.plan.close / 1e6} ms: ${r.figureJ} ± ${r.barJ} J against ${r.truthJ} J`,
      );
    }
  }
  return rows;
}
