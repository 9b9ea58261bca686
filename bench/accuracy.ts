// Accuracy tables: windows metered on a synthetic card (the NVML double's answers at the instants
// the sampling thread reads it, test/fakes/synthetic.ts) and scored against the exact energy of
// the trace over each window's own edges. Run through bench/accuracy.js:
//
//   node bench/accuracy.js [--windows 10000] [--period 5] [--seed 1] [--json out.json]
//
// --period is the Meter's periodMs (default: the Meter's, 5 ms).
//
// Every figure is above idle (60 W). "bar %" is the record's uncertaintyJoules as a share of its
// figure; "|err| %" the error as a share of the truth; "outside" the sampled windows whose error
// exceeds their own bar (must be 0); Zeus is the difference of two counter reads at the edges.
import { writeFileSync } from "node:fs";
import { DEFAULT_PERIOD_MS } from "../src/meter/options.js";
import {
  burstsAtEdges,
  type Scored,
  type Summary,
  scoreWindows,
  squareWave,
  steady,
  summarize,
  type WaitMode,
  type WindowPlan,
  windowPlans,
} from "../test/fakes/accuracy.js";
import type { DeviceSpec } from "../test/fakes/scenario.js";
import { type SamplerModel, SyntheticCard } from "../test/fakes/synthetic.js";

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(name);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
};
const N = Number(arg("--windows", "10000"));
/** Which draw of window lengths and gaps (test/fakes/accuracy.ts windowPlans): the tables use 1. */
const SEED = Number(arg("--seed", "1"));
const jsonOut = arg("--json", "");
const IDLE_W = 60;
/** The sampler as native/sampler.cc runs it now (golden-ratio offsets; "none" before). */
const SAMPLER: SamplerModel = {
  // The Meter's periodMs.
  periodMs: Number(arg("--period", String(DEFAULT_PERIOD_MS))),
  dither: arg("--dither", "golden") as "golden" | "none",
  // Each edge asks the sampler for a read (the doorbell); --no-edge-reads: periodic reads only.
  readsAtEdges: !process.argv.includes("--no-edge-reads"),
};

interface Case {
  readonly name: string;
  readonly device: DeviceSpec;
  readonly plans: readonly WindowPlan[];
  readonly wait?: WaitMode;
}

async function run(c: Case): Promise<{ summary: Summary; rows: Scored[] }> {
  const card = new SyntheticCard(c.device, SAMPLER);
  const rows = await scoreWindows(card, c.plans, IDLE_W, {
    wait: c.wait ?? "sample",
    counterStepMs: c.device.counterStepMs ?? 10,
  });
  return { summary: summarize(rows), rows };
}

const f = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : "—");
const SQUARE = squareWave(100, 400, 37, 20_000);

function row(name: string, s: Summary): string {
  return (
    `| ${name} | ${s.windows} | ${s.sampled} | ${s.outside} | ${f(s.worstOverBar, 2)} | ` +
    `${f(s.medianBarPct)} | ${f(s.medianBarJ, 2)} | ${f(s.meanErrPct, 2)} | ${f(s.maxErrPct, 1)} | ` +
    `${f(s.zeusMeanErrPct, 1)} / ${f(s.zeusMaxErrPct, 1)} |`
  );
}
const HEADER =
  "| case | windows | sampled | outside | worst err/bar | median bar % | median bar J | mean \\|err\\| % | max \\|err\\| % | Zeus mean / max \\|err\\| % |\n" +
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

const out: Record<string, Summary> = {};
console.log(
  `## Accuracy on a synthetic card (${N} windows per case unless stated; idle 60 W; period ${SAMPLER.periodMs} ms; seed ${SEED})\n`,
);
console.log(HEADER);
const b2b = windowPlans(Math.min(N, 2000), { minMs: 300, maxMs: 900, gapMs: [0, 0], seed: 4 + SEED });
const cases: Case[] = [
  {
    name: "steady 262 W, 100 ms, step 100 ms",
    device: { power: steady(262), counterStepMs: 100 },
    plans: windowPlans(N, { minMs: 100, maxMs: 100, seed: SEED }),
  },
  {
    name: "steady 262 W, 300 ms, step 100 ms",
    device: { power: steady(262), counterStepMs: 100 },
    plans: windowPlans(N, { minMs: 300, maxMs: 300, seed: SEED }),
  },
  {
    name: "steady 262 W, 100–400 ms, step 100 ms",
    device: { power: steady(262), counterStepMs: 100 },
    plans: windowPlans(N, { minMs: 100, maxMs: 400, seed: SEED }),
  },
  {
    name: "square 100↔400 W (37 ms), 100–400 ms, step 100 ms",
    device: { power: SQUARE, counterStepMs: 100 },
    plans: windowPlans(N, { minMs: 100, maxMs: 400, seed: SEED }),
  },
  {
    name: "square, 100 ms, step 100 ms",
    device: { power: SQUARE, counterStepMs: 100 },
    plans: windowPlans(N, { minMs: 100, maxMs: 100, seed: SEED }),
  },
  {
    name: "square, 1 s, step 100 ms",
    device: { power: SQUARE, counterStepMs: 100 },
    plans: windowPlans(Math.min(N, 2000), { minMs: 1000, maxMs: 1000, seed: SEED }),
  },
  {
    name: "steady 262 W, 100–400 ms, continuous counter",
    device: { power: steady(262), counterStepMs: 0 },
    plans: windowPlans(N, { minMs: 100, maxMs: 400, seed: SEED }),
  },
  {
    name: "bursts (700 W, 90 ms) in the step before each edge, back to back 300–900 ms",
    device: {
      power: burstsAtEdges(b2b, { base: 100, burstW: 700, burstMs: 90, stepMs: 100, where: "before" }),
      counterStepMs: 100,
    },
    plans: b2b,
  },
  {
    name: "steady 262 W, 20 ms, step 100 ms",
    device: { power: steady(262), counterStepMs: 100 },
    plans: windowPlans(Math.min(N, 2000), { minMs: 20, maxMs: 20, seed: SEED }),
  },
];
for (const c of cases) {
  const { summary } = await run(c);
  out[c.name] = summary;
  console.log(row(c.name, summary));
}

// AMD Instinct as AMD SMI reads an MI300X: a counter of 2^-16 J counts updated every ms, whole watts.
const AMD = { ...SAMPLER, amd: true };
console.log("\n### AMD Instinct-like (1 ms counter of 2^-16 J counts, whole-watt instantaneous power)\n");
console.log(HEADER);
for (const [what, power] of [
  ["steady 262 W", steady(262)],
  ["square 100↔400 W", SQUARE],
] as const) {
  for (const ms of [100, 250, 1000]) {
    const name = `AMD, ${what}, ${ms} ms ± 5 %`;
    const card = new SyntheticCard({ power, counterStepMs: 1, powerNoiseW: 3 }, AMD);
    // Lengths drawn within ±5 %: a length that is an exact multiple of the 1 ms step would make
    // Zeus's two stale reads cancel, which real requests' lengths never do.
    const plans = windowPlans(ms >= 1000 ? Math.min(N, 2000) : N, {
      minMs: ms * 0.95,
      maxMs: ms * 1.05,
      seed: SEED,
    });
    const summary = summarize(await scoreWindows(card, plans, IDLE_W, { wait: "sample", counterStepMs: 1 }));
    out[name] = summary;
    console.log(row(name, summary));
  }
}

console.log("\n### By window length and counter step (square wave 100↔400 W, 37 ms half-period)\n");
console.log(HEADER);
for (const stepMs of [10, 100, 0]) {
  for (const ms of [20, 50, 100, 300, 1000]) {
    for (const wait of ["sample", "counter"] as const) {
      if (wait === "counter" && stepMs !== 100) continue;
      const plans = windowPlans(Math.min(N, ms >= 300 ? 2000 : N), { minMs: ms, maxMs: ms, seed: ms });
      const name = `${ms} ms, ${stepMs === 0 ? "continuous counter" : `step ${stepMs} ms`}${wait === "counter" ? ", read after the next counter update" : ""}`;
      const { summary } = await run({ name, device: { power: SQUARE, counterStepMs: stepMs }, plans, wait });
      out[name] = summary;
      console.log(row(name, summary));
    }
  }
}
if (jsonOut) writeFileSync(jsonOut, JSON.stringify(out, null, 2));
