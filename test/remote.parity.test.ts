import { describe, expect, it } from "vitest";
import { type Scored, scoreWindows } from "./fakes/accuracy.js";
import { inferenceTrace } from "./fakes/family.js";
import type { DeviceSpec } from "./fakes/scenario.js";
import { type SamplerModel, SyntheticCard } from "./fakes/synthetic.js";
import { spanThroughAgent } from "./fakes/through-agent.js";

// A window measured through giul-agent is measured as the card's own track measures it: sampled
// where it is sampled, and refused where it is refused (too short for the counter's step or for the
// reads), with the same figure, and on a counter a bar no narrower. Before the agent said how it placed each
// edge, a held sensor's windows shorter than a counter step were sampled through it (50 ms: 120
// of 120, mean error 37 %, bars 182 % of the figure) where the card's own track refuses them.

const IDLE_W = 60;
const NATIVE: SamplerModel = { periodMs: 5, dither: "golden", readsAtEdges: true };
const LENGTHS = [20, 50, 100, 250, 1000];

/** The same requests measured both ways on two copies of one card. */
async function bothWays(
  sensor: DeviceSpec,
  sampler: SamplerModel,
): Promise<{ local: Scored[]; agent: Scored[] }> {
  const trace = inferenceTrace(300, LENGTHS, { idleW: IDLE_W, startMs: 6000 });
  const run = (measure?: typeof spanThroughAgent) =>
    scoreWindows(new SyntheticCard({ ...sensor, power: trace.power }, sampler), trace.plans, IDLE_W, {
      counterStepMs: sensor.counterStepMs ?? 10,
      ...(measure ? { measure } : {}),
    });
  return { local: await run(), agent: await run(spanThroughAgent) };
}

describe("remote_agent measures a window as the card's own track does", () => {
  const sensors: [string, DeviceSpec, SamplerModel?][] = [
    [
      "a counter every 100 ms, A100/H100's sensor (25 ms of every 100 ms)",
      { counterStepMs: 100, powerUpdateMs: 100, powerAvgShare: 0.25 },
    ],
    ["a counter every 100 ms, a point sample held 50 ms", { counterStepMs: 100, powerUpdateMs: 50 }],
    ["a counter every 100 ms, averaged power only", { counterStepMs: 100, instantField: false }],
    ["a counter every 100 ms, fresh instant power", { counterStepMs: 100, powerMode: "instant" }],
    ["no counter, fresh instant power (integrated)", { counter: false, powerMode: "instant" }],
    // Read every 10 ms: requests of 20 ms are shorter than the reads resolve.
    [
      "no counter, fresh instant power read every 10 ms",
      { counter: false, powerMode: "instant" },
      { ...NATIVE, periodMs: 10 },
    ],
  ];
  for (const [name, sensor, sampler] of sensors) {
    it(name, async () => {
      const { local, agent } = await bothWays(sensor, sampler ?? NATIVE);
      let refused = 0;
      for (let i = 0; i < local.length; i++) {
        const l = local[i] as Scored;
        const a = agent[i] as Scored;
        expect(a.sampled, `${(l.plan.close - l.plan.open) / 1e6} ms: ${a.reason ?? l.reason}`).toBe(
          l.sampled,
        );
        if (!l.sampled) {
          refused += 1;
          continue;
        }
        expect(a.figureJ).toBeCloseTo(l.figureJ, 6);
        // On a counter the agent's bar is the sum of its edges' (a local span's may be tighter);
        // an integral's running bound weighs each change with the lag judged as it was read.
        if (sensor.counter !== false) expect(a.barJ).toBeGreaterThanOrEqual(l.barJ - 1e-9);
        expect(Math.abs(a.figureJ - a.truthJ)).toBeLessThanOrEqual(a.barJ + 1e-9);
      }
      // Held and averaged sensors: the requests shorter than a step are refused, both ways; and
      // those shorter than 10 ms reads resolve.
      if (sensor.powerMode !== "instant" || sampler !== undefined) expect(refused).toBeGreaterThanOrEqual(50);
    });
  }
});
