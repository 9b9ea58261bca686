// The sensor family of real cards (issue 49): each sensor of test/fakes/family.ts meters an
// inference-like trace, one window per request, scored against the trace's exact energy and
// against Zeus (the counter read at the two edges). Run through bench/sensors.js:
//
//   node bench/sensors.js [--windows 400] [--seed 1] [--period 5] [--json out.json] [--integral]
//   [--unaligned] [--edges] [--smi] [--min-phase MS]
//   (--integral: the same sensors without an energy counter, through nvml_sampler; --smi: through
//   smi_sampler, 100 ms reads on a steady grid, the same trace (windows shorter than the reads
//   resolve are not measured); --min-phase MS: no level shorter than that; --unaligned:
//   each window moved off its request by up to half its length either way, so that the load's
//   changes fall anywhere in it, as for a request sharing the card; --edges: a table of where the
//   error comes from, each edge's fused value against the exact cumulative energy at it)
//
// Per window length: sampled / windows, outside its bar (must be 0), mean |err| % giul / Zeus,
// mean signed err % giul, median bar %. Everything above idle (60 W).
import { writeFileSync } from "node:fs";
import { DEFAULT_PERIOD_MS } from "../src/meter/options.js";
import { type Scored, scoreWindows } from "../test/fakes/accuracy.js";
import { inferenceTrace, SENSORS } from "../test/fakes/family.js";
import { hash01, SyntheticCard } from "../test/fakes/synthetic.js";

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(name);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
};
const N = Number(arg("--windows", "400"));
const SEED = Number(arg("--seed", "1"));
const PERIOD = Number(arg("--period", String(process.argv.includes("--smi") ? 100 : DEFAULT_PERIOD_MS)));
const only = arg("--only", "");
const jsonOut = arg("--json", "");
// --integral: the same sensors with no energy counter (nvml_sampler: the power readings integrated).
// --smi: the same, read as smi_sampler reads (nvidia-smi -lms 100: a steady 100 ms grid, no read at
// the edges). --min-phase: a trace with no level shorter than that (two reads: the integral's
// stated limit, one change of power between two reads).
const MIN_PHASE_MS = Number(arg("--min-phase", "0"));
const smi = process.argv.includes("--smi");
const integral = smi || process.argv.includes("--integral");
const unaligned = process.argv.includes("--unaligned");
const edges = process.argv.includes("--edges");
const IDLE_W = 60;
const LENGTHS = [100, 250, 1000, 3000, 20, 5000];
const SHOWN = [100, 250, 1000, 3000, 5000];

const f = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : "—");
const mean = (xs: number[]) => (xs.length === 0 ? Number.NaN : xs.reduce((a, x) => a + x, 0) / xs.length);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : (s[Math.floor(s.length / 2)] as number);
};

/** Mean of the finite values (NaN for none). */
const meanOf = (xs: number[]) => mean(xs.filter((x) => Number.isFinite(x)));

interface ByLength {
  windows: number;
  sampled: number;
  outside: number;
  errPct: number;
  signedPct: number;
  zeusPct: number;
  barPct: number;
}

function byLength(rows: readonly Scored[], lenMs: number): ByLength {
  const mine = rows.filter((r) => {
    const ms = (r.plan.close - r.plan.open) / 1e6;
    return ms >= lenMs * 0.89 && ms <= lenMs * 1.11;
  });
  const s = mine.filter((r) => r.sampled);
  return {
    windows: mine.length,
    sampled: s.length,
    outside: s.filter((r) => Math.abs(r.figureJ - r.truthJ) > r.barJ + 1e-9).length,
    errPct: mean(s.map((r) => (100 * Math.abs(r.figureJ - r.truthJ)) / r.truthJ)),
    signedPct: mean(s.map((r) => (100 * (r.figureJ - r.truthJ)) / r.truthJ)),
    zeusPct: mean(mine.map((r) => (100 * Math.abs((r.zeusJ ?? Number.NaN) - r.truthJ)) / r.truthJ)),
    barPct: median(s.map((r) => (100 * r.barJ) / r.figureJ)),
  };
}

console.log(
  `## The sensor family${integral ? `, no energy counter (${smi ? "smi_sampler" : "nvml_sampler"})` : ""}${unaligned ? ", windows off their requests" : ""} (${N} windows per sensor, lengths ${LENGTHS.join("/")} ms in turn, ` +
    `inference-like trace, idle ${IDLE_W} W, period ${PERIOD} ms, seed ${SEED})\n`,
);
console.log(
  `| sensor | sampled | outside | ≥250 ms sampled | ${SHOWN.map((l) => `${l} ms: \\|err\\| giul / Zeus, signed, bar`).join(" | ")} |`,
);
console.log(`|---|---:|---:|---:|${SHOWN.map(() => "---").join("|")}|`);
const out: Record<string, unknown> = {};
const edgeRows: string[] = [];

/**
 * Where the error comes from: the mean signed error (J) of the opening and of the closing edges of
 * the sampled windows (fused value less the exact cumulative energy), by window length, and their
 * mean absolute error. One-signed and as large as the mean absolute: a bias at that edge.
 */
function edgeRow(name: string, rows: readonly Scored[]): string {
  const cells = SHOWN.map((l) => {
    const s = rows.filter((r) => r.sampled && Math.abs((r.plan.close - r.plan.open) / 1e6 - l) <= 0.11 * l);
    const open = s.map((r) => r.openErrJ);
    const close = s.map((r) => r.closeErrJ);
    const abs = (xs: number[]) => meanOf(xs.map(Math.abs));
    return `${f(meanOf(open), 2)} (${f(abs(open), 2)}) / ${f(meanOf(close), 2)} (${f(abs(close), 2)})`;
  });
  return `| ${name} | ${cells.join(" | ")} |`;
}
for (const sensor of SENSORS) {
  if (only !== "" && !sensor.name.includes(only)) continue;
  const trace = inferenceTrace(N, LENGTHS, {
    idleW: IDLE_W,
    seed: SEED,
    minPhaseMs: MIN_PHASE_MS,
  });
  const { power } = trace;
  const plans = unaligned
    ? trace.plans.map((p, i) => {
        const shift = Math.round((hash01(i, SEED * 7 + 3) - 0.5) * (p.close - p.open));
        return { open: p.open + shift, close: p.close + shift };
      })
    : trace.plans;
  const card = new SyntheticCard(
    { ...sensor.device, power, ...(integral ? { counter: false } : {}) },
    smi ? { periodMs: PERIOD, dither: "none" } : { periodMs: PERIOD, dither: "golden", readsAtEdges: true },
  );
  const rows = await scoreWindows(card, plans, IDLE_W, { counterStepMs: sensor.device.counterStepMs ?? 10 });
  const sampled = rows.filter((r) => r.sampled);
  const outside = sampled.filter((r) => Math.abs(r.figureJ - r.truthJ) > r.barJ + 1e-9);
  const long = rows.filter((r) => r.plan.close - r.plan.open >= 0.9 * 250e6);
  const longSampled = long.filter((r) => r.sampled).length;
  const cells = SHOWN.map((l) => {
    const b = byLength(rows, l);
    return `${b.sampled}/${b.windows}: ${f(b.errPct, 2)} / ${f(b.zeusPct, 2)}, ${f(b.signedPct, 2)}, ${f(b.barPct, 1)}`;
  });
  console.log(
    `| ${sensor.name} | ${sampled.length}/${rows.length} | ${outside.length} | ${f((100 * longSampled) / long.length, 0)} % | ${cells.join(" | ")} |`,
  );
  if (process.argv.includes("--why")) {
    const reasons = new Map<string, number>();
    for (const r of rows) {
      if (r.sampled) continue;
      const why = (r.reason ?? "").replace(/[0-9.]+/g, "#").slice(0, 160);
      reasons.set(why, (reasons.get(why) ?? 0) + 1);
    }
    for (const [why, n] of reasons) console.log(`    ${n}× ${why}`);
    for (const r of outside.slice(0, 5))
      console.log(
        `    outside: ${((r.plan.close - r.plan.open) / 1e6).toFixed(0)} ms ${r.figureJ.toFixed(2)} ± ${r.barJ.toFixed(2)} J for ${r.truthJ.toFixed(2)} J`,
      );
  }
  out[sensor.name] = Object.fromEntries(SHOWN.map((l) => [l, byLength(rows, l)]));
  if (edges) edgeRows.push(edgeRow(sensor.name, rows));
}
if (edges) {
  console.log(
    "\nEach edge's fused value less the exact cumulative energy at it, J: mean signed (mean |·|), opening / closing edge\n",
  );
  console.log(`| sensor | ${SHOWN.map((l) => `${l} ms`).join(" | ")} |`);
  console.log(`|---|${SHOWN.map(() => "---").join("|")}|`);
  for (const row of edgeRows) console.log(row);
}
if (jsonOut !== "") writeFileSync(jsonOut, JSON.stringify(out, null, 2));
