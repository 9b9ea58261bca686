/**
 * The sensor family of real cards (issue 49), for the accuracy benchmark (bench/sensors.ts) and
 * the property tests: counters on an exact grid or wandering off it, drifting, changing cadence;
 * instant power exact, held, a part-time average (A100/H100: 25 ms of every 100 ms), or averaged
 * power only; and an inference-like trace of requests, each window one request.
 */
import type { WindowPlan } from "./accuracy.js";
import type { DeviceSpec, PowerPoint } from "./scenario.js";
import { hash01 } from "./synthetic.js";

/** One sensor of the family: the device keys that make it (the trace is added per run). */
export interface Sensor {
  readonly name: string;
  readonly device: DeviceSpec;
}

/** The rows of the table, on the synthetic card, counters stepping every 100 ms unless said. */
export const SENSORS: readonly Sensor[] = [
  { name: "exact 100 ms grid, exact instant power", device: { counterStepMs: 100, powerMode: "instant" } },
  {
    name: "instant held 100 ms, each a 25 ms average (A100/H100)",
    device: { counterStepMs: 100, powerUpdateMs: 100, powerAvgShare: 0.25 },
  },
  { name: "instant a point sample held 50 ms", device: { counterStepMs: 100, powerUpdateMs: 50 } },
  { name: "averaged power only (1 s)", device: { counterStepMs: 100, instantField: false } },
  { name: "counter every 20 ms, sensor held 20 ms", device: { counterStepMs: 20, powerUpdateMs: 20 } },
  { name: "counter wanders ±3 ms", device: { counterStepMs: 100, counterWanderMs: 3 } },
  { name: "counter wanders ±8 ms", device: { counterStepMs: 100, counterWanderMs: 8 } },
  { name: "counter wanders ±15 ms", device: { counterStepMs: 100, counterWanderMs: 15 } },
  {
    name: "wanders ±20 %, drifts 200 ppm, A100 sensor",
    device: {
      counterStepMs: 100,
      counterWanderMs: 20,
      counterDriftPpm: 200,
      powerUpdateMs: 100,
      powerAvgShare: 0.25,
    },
  },
  {
    name: "every 20 ms for 3 s, then every 100 ms",
    device: { counterStepMs: 20, counterCadence: [[3000, 100]] },
  },
  {
    name: "every 100 ms, then every 30 ms from 40 s",
    device: { counterStepMs: 100, counterCadence: [[40_000, 30]], powerUpdateMs: 100, powerAvgShare: 0.25 },
  },
];

const MS = 1e6;

/**
 * An inference-like trace with one window per request: idle gaps (idleW), then the request's
 * window; inside it, after 0–5 ms, a prefill burst of 60–400 ms at 560–690 W, then decode
 * iterations of 15–60 ms at 300–460 W until 0–5 ms before the close. `lengthsMs` cycles.
 * `minPhaseMs`: no level (an idle gap, a prefill, a decode iteration) shorter than that.
 */
export function inferenceTrace(
  count: number,
  lengthsMs: readonly number[],
  options: {
    idleW: number;
    startMs?: number;
    seed?: number;
    gapMs?: readonly [number, number];
    minPhaseMs?: number;
  },
): { power: PowerPoint[]; plans: WindowPlan[] } {
  const seed = options.seed ?? 1;
  const minPhase = options.minPhaseMs ?? 0;
  const [gapMin0, gapMax] = options.gapMs ?? [30, 400];
  const gapMin = Math.max(gapMin0, minPhase);
  const r = (i: number, salt: number) => hash01(i, seed * 101 + salt);
  const pts: PowerPoint[] = [[0, options.idleW]];
  const plans: WindowPlan[] = [];
  let t = options.startMs ?? 6000;
  const at = (ms: number, w: number) => pts.push([ms, w]);
  for (let i = 0; i < count; i++) {
    const len = (lengthsMs[i % lengthsMs.length] as number) * (0.9 + 0.2 * r(i, 1));
    const open = t;
    const close = t + len;
    plans.push({ open: Math.round(open * MS), close: Math.round(close * MS) });
    const busyFrom = open + 5 * r(i, 2);
    const busyTo = Math.max(busyFrom + Math.max(1, minPhase), close - 5 * r(i, 3));
    at(busyFrom, options.idleW);
    let x = busyFrom;
    let prefill = Math.min(busyTo - x, Math.max(minPhase, 60 + 340 * r(i, 4)));
    if (minPhase > 0 && busyTo - x - prefill < minPhase) prefill = busyTo - x;
    const pw = 560 + 130 * r(i, 5);
    at(x, pw);
    x += prefill;
    at(x, pw);
    for (let j = 0; x < busyTo; j++) {
      let d = Math.min(busyTo - x, Math.max(minPhase, 15 + 45 * r(i * 997 + j, 6)));
      if (minPhase > 0 && busyTo - x - d < minPhase) d = busyTo - x;
      const w = 300 + 160 * r(i * 997 + j, 7);
      at(x, w);
      x += d;
      at(x, w);
    }
    at(x, options.idleW);
    t = Math.max(close, x) + gapMin + (gapMax - gapMin) * r(i, 8);
  }
  at(t + 1000, options.idleW);
  return { power: pts, plans };
}
