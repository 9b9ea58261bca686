// How a one-time disagreement between the energy counter and the power readings affects later
// bars (issue 39): a card at a steady 262 W switches at 3 s to a 100/400 W square wave (37 ms
// half-period); at the switch the counter advances `glitch` J less than the power drawn, once.
// Windows of 100–400 ms on a synthetic card (the NVML double's arithmetic, test/fakes/synthetic.ts),
// 100 ms counter step, scored against the exact energy. Run through bench/recovery.js:
//
//   node bench/recovery.js [--period 5]
//
// For each glitch: the median bar (% of the figure) of the sampled windows in each half second
// after the switch, against the same run with no glitch; "recovered" is the first half second
// from which every later one is within 1.5× of the run with no glitch; "not sampled" the windows
// across the glitch (demoted, with the reason). Outside: sampled windows off by more than their bar.
import { DEFAULT_PERIOD_MS } from "../src/meter/options.js";
import { type Scored, scoreWindows, squareWave, windowPlans } from "../test/fakes/accuracy.js";
import type { DeviceSpec, PowerPoint } from "../test/fakes/scenario.js";
import { SyntheticCard } from "../test/fakes/synthetic.js";

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(name);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
};
const PERIOD_MS = Number(arg("--period", String(DEFAULT_PERIOD_MS)));
const IDLE_W = 60;
const SWITCH_MS = 3000;
const END_MS = 10_000;
const BIN_MS = 500;

function power(): PowerPoint[] {
  const square = squareWave(100, 400, 37, (END_MS - SWITCH_MS) / 1000 + 1).map(
    ([t, w]) => [t + SWITCH_MS, w] as PowerPoint,
  );
  return [[0, 262], [SWITCH_MS, 262], ...square];
}

/**
 * A glitch of `glitchJ` J at the switch (a counter jump back), repeated every `everyMs` after it
 * where set, and a sensor reading `gain` × power.
 */
function device(glitchJ: number, gain = 1, everyMs = 0): DeviceSpec {
  const jumps: { tMs: number; deltaMj: number }[] = [];
  for (let t = SWITCH_MS + 50; glitchJ > 0 && t < END_MS; t += everyMs > 0 ? everyMs : END_MS) {
    jumps.push({ tMs: t, deltaMj: -Math.round(glitchJ * 1000) });
  }
  return { power: power(), counterStepMs: 100, counterJumps: jumps, sensorGain: gain };
}

/** Ten runs, each a card of its own and windows back to back from its own offset and draw. */
async function run(d: DeviceSpec): Promise<Scored[]> {
  const rows: Scored[] = [];
  for (let seed = 1; seed <= 10; seed++) {
    const card = new SyntheticCard(d, { periodMs: PERIOD_MS, dither: "golden", readsAtEdges: true });
    const plans = windowPlans(200, {
      minMs: 100,
      maxMs: 400,
      gapMs: [0, 20],
      startMs: 500 + seed * 23,
      seed,
    });
    rows.push(
      ...(await scoreWindows(
        card,
        plans.filter((p) => p.close < END_MS * 1e6),
        IDLE_W,
        { counterStepMs: 100 },
      )),
    );
  }
  return rows;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : (s[Math.floor((s.length - 1) / 2)] as number);
};

/** Median bar % of the sampled windows opening in each bin from the switch on. */
function bins(rows: readonly Scored[]): number[] {
  const out: number[] = [];
  for (let b = SWITCH_MS; b < END_MS; b += BIN_MS) {
    const inBin = rows.filter((r) => r.sampled && r.plan.open >= b * 1e6 && r.plan.open < (b + BIN_MS) * 1e6);
    out.push(median(inBin.map((r) => (100 * r.barJ) / Math.abs(r.figureJ))));
  }
  return out;
}

const reference = await run(device(0));
const refBins = bins(reference);
const f = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "—");
console.log(`## Recovery after a counter/power disagreement (period ${PERIOD_MS} ms, 100 ms counter step)\n`);
console.log(
  "| glitch at the switch | windows | not sampled | outside | median bar % before the switch | median bar % 0–1 s / 1–3 s / 3–7 s after | recovered after |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (const [label, d] of [
  ["none", device(0)],
  ["5 J", device(5)],
  ["13 J", device(13)],
  ["20 J", device(20)],
  ["13 J, again every 1 s", device(13, 1, 1000)],
  ["none; the sensor reads 10 % high throughout", device(0, 1.1)],
] as const) {
  const rows = label === "none" ? reference : await run(d);
  const before = median(
    rows
      .filter((r) => r.sampled && r.plan.close < SWITCH_MS * 1e6)
      .map((r) => (100 * r.barJ) / Math.abs(r.figureJ)),
  );
  const b = bins(rows);
  const span = (from: number, to: number) =>
    median(b.slice(from / BIN_MS, to / BIN_MS).filter(Number.isFinite));
  let recovered = Number.NaN;
  for (let i = 0; i < b.length; i++) {
    if (b.slice(i).every((x, j) => !(x > 1.5 * (refBins[i + j] as number)))) {
      recovered = i * BIN_MS;
      break;
    }
  }
  const outside = rows.filter((r) => r.sampled && Math.abs(r.figureJ - r.truthJ) > r.barJ + 1e-9).length;
  console.log(
    `| ${label} | ${rows.length} | ${rows.filter((r) => !r.sampled).length} | ${outside} | ${f(before)} | ` +
      `${f(span(0, 1000))} / ${f(span(1000, 3000))} / ${f(span(3000, 7000))} | ` +
      `${Number.isFinite(recovered) ? `${recovered} ms` : "never (7 s)"} |`,
  );
}
