#!/usr/bin/env node
// Benchmarks of the Meter on the native path (issue 3), against the libnvidia-ml test double:
//   1. event-loop time per window (open + 2 marks + close + result) at 1,000 concurrent windows;
//   2. the sampling thread's CPU at 10 ms and 1 ms periods;
//   3. RSS over 1,000,000 windows;
//   4. what the diagnostics channels and giul/otel add per window (bench/exporters.js).
// Usage: npm run bench   (or: npm run build:ts && node --expose-gc bench/meter.js [--quick])
// Prints a Markdown section for bench/RESULTS.md. Numbers are for the double, whose NVML calls
// cost almost nothing: on a real card add the driver's own cost to the sampler CPU.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { benchRequest, median, pct, sleep, squareWaveScenario } from "./lib.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const quick = process.argv.includes("--quick");
// --real: meter the host's own card (libnvidia-ml from the loader's search), not the test double.
const real = process.argv.includes("--real");

// The scenario: a card drawing 300 W with a 100 W swing every 50 ms.
const dir = mkdtempSync(join(tmpdir(), "giul-bench-"));
if (!real) {
  squareWaveScenario(dir);
  process.env.GIUL_NVML_LIBRARY ??= join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1");
}

// GIUL_BENCH_DIST=/other/checkout/dist measures another build (with GIUL_ADDON_PATH for its addon).
const { Meter } = await import(join(process.env.GIUL_BENCH_DIST ?? join(root, "dist"), "index.js"));
const node = Object.freeze({ name: "bench", gpuIndex: 0, idleW: 60 });

// ---- 1. event-loop time per window ------------------------------------------------------------
async function round(withMeter, n, attribution = "shared") {
  const before = performance.eventLoopUtilization();
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      benchRequest(withMeter ? () => Meter.forNode(node, { joulesPer1kHint: 4000, attribution }) : null, i),
    ),
  );
  return performance.eventLoopUtilization(before).active;
}

const warm = await Meter.forNode(node).open();
await warm.close();
const realBackend = warm.backend;
for (let i = 0; i < 3; i++) {
  await round(true, 1000);
  await round(false, 1000);
}
const rounds = quick ? 5 : 20;
/** Event-loop µs per window at `n` concurrent windows: metered round minus the same round bare. */
async function perWindow(n, attribution, count) {
  const us = [];
  const baseline = [];
  const metered = [];
  for (let i = 0; i < count; i++) {
    const base = await round(false, n);
    const m = await round(true, n, attribution);
    baseline.push(base);
    metered.push(m);
    us.push(((m - base) * 1000) / n);
  }
  return { us, baseline, metered };
}
const shared1k = await perWindow(1000, "shared", rounds);
const exclusive1k = await perWindow(1000, "exclusive", rounds);
await round(true, 10_000);
const shared10k = await perWindow(10_000, "shared", quick ? 2 : 5);

// ---- 2. sampler CPU --------------------------------------------------------------------------
function threadTicks(name) {
  let ticks = 0;
  let found = false;
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const comm = readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim();
      if (comm !== name) continue;
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]); // utime + stime
      found = true;
    } catch {}
  }
  return found ? ticks : null;
}
async function samplerCpu(periodMs, seconds) {
  await sleep(6000); // let an earlier sampler linger out, so this period is the only one asked
  const m = await Meter.forNode(node, { periodMs }).open();
  await sleep(200);
  const t0 = threadTicks("giul-gpu0");
  const w0 = process.hrtime.bigint();
  await sleep(seconds * 1000);
  const t1 = threadTicks("giul-gpu0");
  const wall = Number(process.hrtime.bigint() - w0) / 1e9;
  await m.close();
  const hz = 100; // USER_HZ on Linux
  return t0 === null || t1 === null ? null : ((t1 - t0) / hz / wall) * 100;
}
const cpu10 = await samplerCpu(10, quick ? 3 : 10);
const cpu1 = await samplerCpu(1, quick ? 3 : 10);

// ---- 3. RSS over 1,000,000 windows ---------------------------------------------------------
const total = quick ? 100_000 : 1_000_000;
const rss = [];
const gc = globalThis.gc ?? (() => {});
gc();
rss.push([0, process.memoryUsage().rss]);
let done = 0;
const t0 = Date.now();
while (done < total) {
  await Promise.all(
    Array.from({ length: 1000 }, async () => {
      const m = await Meter.forNode(node, { periodMs: 1 }).open();
      m.mark("a");
      m.mark("b");
      await m.close();
      m.result({ tokens: 1 });
    }),
  );
  done += 1000;
  if (done % (total / 10) === 0) {
    gc();
    rss.push([done, process.memoryUsage().rss]);
  }
}
const rssSeconds = (Date.now() - t0) / 1000;
rmSync(dir, { recursive: true, force: true });

// ---- report -----------------------------------------------------------------------------------
const cpuModel = cpus()[0]?.model ?? "unknown";
const mib = (b) => (b / 1048576).toFixed(1);
const lines = [
  real
    ? `## Meter on the native path (${realBackend}, this host's card)`
    : `## Meter on the native path (nvml_counter, libnvidia-ml test double)`,
  ``,
  `Machine: ${cpus().length} × ${cpuModel}, ${((await import("node:os")).totalmem() / 2 ** 30) | 0} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.`,
  `Command: \`npm run bench\` (builds dist/, then \`node --expose-gc bench/meter.js${quick ? " --quick" : ""}\`).`,
  ``,
  `**Event-loop time per window** (open + 2 marks + close + result): event-loop active time of a round of`,
  `concurrent windows minus that of the same round without meters, per window (target: median ≤ 10 µs`,
  `with shared attribution at 1,000 and at 10,000 concurrent):`,
  ``,
  `| concurrent | attribution | rounds | median µs | p90 µs | round metered / bare (median ms) |`,
  `|---:|---|---:|---:|---:|---|`,
  ...[
    [1000, "shared", shared1k],
    [1000, "exclusive", exclusive1k],
    [10_000, "shared", shared10k],
  ].map(
    ([n, a, r]) =>
      `| ${n.toLocaleString("en")} | ${a} | ${r.us.length} | ${median(r.us).toFixed(1)} | ${pct(r.us, 90).toFixed(1)} | ${median(r.metered).toFixed(1)} / ${median(r.baseline).toFixed(1)} |`,
  ),
  ``,
  `**Sampling thread CPU** (one core = 100%): ${cpu10 === null ? "n/a" : cpu10.toFixed(2)}% at 10 ms, ${cpu1 === null ? "n/a" : cpu1.toFixed(2)}% at 1 ms`,
  real
    ? `(a real driver: the thread's CPU includes the driver's own cost per call).`
    : `(the double's calls are nearly free; a real driver's calls add their own cost, see nvml-facts.md §2.3).`,
  ``,
  `**RSS over ${total.toLocaleString("en")} windows** (1,000 concurrent at a time, 1 ms period, ${rssSeconds.toFixed(0)} s):`,
  rss.map(([n, b]) => `${(n / 1000).toFixed(0)}k: ${mib(b)} MiB`).join(", "),
  `(growth after the first tenth: ${mib((rss.at(-1)?.[1] ?? 0) - (rss[1]?.[1] ?? 0))} MiB).`,
  ``,
];
console.log(lines.join("\n"));

// ---- 4. the exporters' cost per window (a process of its own: its OpenTelemetry SDK and context
// manager stay out of the figures above) ---------------------------------------------------------
// On a real card (--real, scripts/gpu-check.sh) they are left out: they run on the double.
if (real) process.exit(0);
const exporters = spawnSync(
  process.execPath,
  [join(root, "bench", "exporters.js"), ...(quick ? ["--quick"] : [])],
  { stdio: ["ignore", "inherit", "inherit"], env: process.env },
);
process.exit(exporters.status ?? 1);
