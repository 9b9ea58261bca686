// One card metered by several processes (node:cluster workers, test/fakes/cluster-windows.mjs) on
// the NVML double, scored against the card's exact energy (test/fakes/fair-share.ts):
//   1. the issue's case: 4 processes, one 1 s window each at the same time, a constant 300 W card,
//      idle 50 W: each window's figure and bar, and their sum against the card above idle;
//   2. 4 workers × 50 overlapping windows of random lengths and weights on a 120 ↔ 360 W square
//      wave: the sum against the card over their union, and the windows outside their bars.
// --dist measures another build (its addon beside it). Prints a Markdown section.
import { spawnSync } from "node:child_process";
import { cpus } from "node:os";
import { join } from "node:path";
import { fairShare } from "../test/fakes/fair-share.js";
import { ROOT as root } from "../test/fakes/paths.js";
import { type PowerPoint, writeScenario } from "../test/fakes/scenario.js";

const i = process.argv.indexOf("--dist");
const dist = i > 0 ? (process.argv[i + 1] as string) : join(root, "dist");
const IDLE_W = 50;

interface Posted {
  open: string;
  close: string;
  weights: [string, number][];
  joules: number | null;
  method: string;
  uncertainty: number | null;
  concurrencyMax: number | null;
}

function run(plan: object, power: PowerPoint[]) {
  const sc = writeScenario({ devices: [{ power, counterStepMs: 10 }] });
  const ran = spawnSync(process.execPath, [join(root, "test", "fakes", "cluster-windows.mjs")], {
    env: {
      ...process.env,
      ...sc.env(),
      GIUL_SHARE_GROUP: `bench-${process.pid}`,
      TEST_DIST: join(dist, "index.js"),
      TEST_PLAN: JSON.stringify({ ...plan, idleW: IDLE_W }),
    },
    encoding: "utf8",
  });
  if (ran.status !== 0) throw new Error(ran.stderr);
  const windows = (JSON.parse(ran.stdout) as { windows: Posted[] }).windows;
  const truth = fairShare(
    windows.map((p) => ({
      open: BigInt(p.open),
      close: BigInt(p.close),
      weights: p.weights.map(([t, w]) => [BigInt(t), w] as const),
    })),
    (a, b) => sc.energyJ(0, a, b),
    IDLE_W,
  );
  sc.remove();
  return { windows, truth };
}

const f1 = (x: number) => x.toFixed(1);
const one = run({ workers: 4, windows: 1, seed: 1, spreadMs: 0, fixedMs: 1000 }, [[0, 300]]);
const sum1 = one.windows.reduce((s, p) => s + (p.joules ?? 0), 0);
const square: PowerPoint[] = [];
for (let t = 0, high = false; t < 900_000; t += 45, high = !high)
  square.push([t, high ? 360 : 120], [t, high ? 120 : 360]);
const many = run({ workers: 4, windows: 50, seed: 3, spreadMs: 1500 }, square);
const sum = many.windows.reduce((s, p) => s + (p.joules ?? 0), 0);
const bars = many.windows.reduce((s, p) => s + (p.uncertainty ?? 0), 0);
const outside = many.windows.filter(
  (p, k) => Math.abs((p.joules ?? 0) - (many.truth.shares[k] as number)) > (p.uncertainty ?? 0) + 1e-6,
);
console.log(`Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? "?"}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}; \`node bench/processes.js${i > 0 ? " --dist <dist>" : ""}\`.

4 processes, one 1 s window each at once, 300 W constant, idle 50 W: each charged
${one.windows.map((p) => `${f1(p.joules ?? Number.NaN)} ± ${f1(p.uncertainty ?? Number.NaN)} J (${p.method}, concurrency max ${p.concurrencyMax})`).join("; ")};
Σ ${f1(sum1)} J against ${f1(one.truth.unionAbove)} J drawn above idle over their union (${(sum1 / one.truth.unionAbove).toFixed(2)}×).

4 workers × 50 windows, 120 ↔ 360 W: Σ ${f1(sum)} J against ${f1(many.truth.unionAbove)} J over the union (${(sum / many.truth.unionAbove).toFixed(3)}×; Σ bars ${f1(bars)} J); ${outside.length} of ${many.windows.length} windows outside their bar of the exact fair share; most open at once seen by a window: ${Math.max(...many.windows.map((p) => p.concurrencyMax ?? 0))}.`);
