#!/usr/bin/env node
// What a window costs (issue 12), on the native path against the libnvidia-ml test double, with
// 0, 100 µs and 1 ms per NVML call (the double's `latency_us`):
//   1. sequential windows (25 ms of work each, two marks): event-loop time per window (metered
//      minus the same loop bare), the synchronous time of the calls themselves (forNode + open +
//      2 marks + close + result, as the caller is blocked by them), and close latency (from the
//      closing edge to close() resolving);
//   2. 1,000 concurrent windows: the same per window, and close latency;
//   3. CPU by thread (main, the card's sampler, the rest: V8's and libuv's helpers) at 10 and
//      100 windows/s, as a share of one core more than the same loop unmetered.
// Usage: npm run build:ts && node bench/window-cost.js [--quick] [--latency 0,100,1000] [--period ms]
//   GIUL_BENCH_DIST=/other/checkout/dist measures another build (with GIUL_ADDON_PATH for its addon).
// Prints a Markdown section for bench/RESULTS.md. Each latency runs in a process of its own.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { mainThreadCpuNs, median, pct, sleep, squareWaveScenario } from "./lib.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const argv = process.argv.slice(2);
const quick = argv.includes("--quick");
const arg = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : fallback;
};

/** The Meter's periodMs (--period; default: the Meter's own). */
const periodArg = arg("--period", null);
const meterOptions = periodArg === null ? {} : { periodMs: Number(periodArg) };

if (!argv.includes("--child")) {
  // ---- parent: one child per latency, then the report ------------------------------------------
  const latencies = arg("--latency", "0,100,1000").split(",").map(Number);
  const results = [];
  for (const latencyUs of latencies) {
    const child = spawnSync(
      process.execPath,
      [
        "--expose-gc",
        fileURLToPath(import.meta.url),
        "--child",
        "--latency",
        String(latencyUs),
        ...(quick ? ["--quick"] : []),
        ...(periodArg === null ? [] : ["--period", periodArg]),
      ],
      { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 64 << 20 },
    );
    if (child.status !== 0) {
      console.error(`window-cost: the child for ${latencyUs} µs failed (${child.status})`);
      process.exit(1);
    }
    results.push(JSON.parse(child.stdout.trim().split("\n").at(-1)));
  }
  const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : "n/a");
  const lines = [
    `## A window's cost: sequential and concurrent, close latency, CPU by thread`,
    ``,
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? "unknown"}, ${(totalmem() / 2 ** 30) | 0} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}; load average ${loadavg()[0].toFixed(1)} at the end.`,
    `Command: \`npm run build:ts && ${process.env.GIUL_BENCH_DIST ? `GIUL_BENCH_DIST=${process.env.GIUL_BENCH_DIST} ` : ""}node bench/window-cost.js${quick ? " --quick" : ""}${periodArg === null ? "" : ` --period ${periodArg}`}\` (nvml_counter on the libnvidia-ml test double, ${periodArg === null ? "the default period" : `a ${periodArg} ms period`}, shared attribution).`,
    ``,
    `**Per window** (forNode + open + 2 marks + close + result). Event loop: event-loop active time`,
    `metered minus the same loop bare, per window. Main thread CPU: the same difference in the main`,
    `thread's CPU time (schedstat), which leaves out time spent waiting for a core. Calls: the`,
    `synchronous time of the calls themselves. Close latency: from the closing edge to close() resolving.`,
    ``,
    `| NVML call | windows | event loop µs median / p90 | main thread CPU µs median / p90 | calls µs median / p90 | close latency ms median / p90 / p99 |`,
    `|---:|---|---|---|---|---|`,
  ];
  for (const r of results) {
    for (const [label, s] of [
      ["sequential", r.sequential],
      ["1,000 concurrent", r.concurrent],
    ]) {
      lines.push(
        `| ${r.latencyUs} µs | ${label} | ${f(s.loopUs[0])} / ${f(s.loopUs[1])} | ${f(s.cpuUs[0])} / ${f(s.cpuUs[1])} | ${f(s.callUs[0])} / ${f(s.callUs[1])} | ${f(s.closeMs[0], 2)} / ${f(s.closeMs[1], 2)} / ${f(s.closeMs[2], 2)} |`,
      );
    }
  }
  lines.push(
    ``,
    `**CPU by thread**, % of one core more than the same loop unmetered (windows of 25 ms with two marks,`,
    `started at a steady rate; schedstat run time of each thread of the process):`,
    ``,
    `| NVML call | windows/s | total | main thread | sampler | other threads |`,
    `|---:|---:|---:|---:|---:|---:|`,
  );
  for (const r of results) {
    for (const c of r.cpu) {
      lines.push(
        `| ${r.latencyUs} µs | ${c.rate} | ${f(c.total, 2)} | ${f(c.main, 2)} | ${f(c.sampler, 2)} | ${f(c.other, 2)} |`,
      );
    }
  }
  lines.push("");
  console.log(lines.join("\n"));
  process.exit(0);
}

// ---- child: one latency ---------------------------------------------------------------------------
const latencyUs = Number(arg("--latency", "0"));
const dir = mkdtempSync(join(tmpdir(), "giul-window-cost-"));
squareWaveScenario(dir, { device: "power_mode=instant", latencyUs });
process.env.GIUL_NVML_LIBRARY ??= join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1");

const { Meter } = await import(join(process.env.GIUL_BENCH_DIST ?? join(root, "dist"), "index.js"));
/** Reasons of the windows that were not sampled (a share at or below idle, say): reported, not hidden. */
const unmeasured = [];
const node = Object.freeze({ name: "bench", gpuIndex: 0, idleW: 60 });

/** One window of 25 ms of work; pushes its call time (µs) and close latency (ms). */
async function window(withMeter, callUs, closeMs) {
  if (!withMeter) {
    await sleep(10);
    await sleep(10);
    await sleep(5);
    return;
  }
  let t = performance.now();
  const opening = Meter.forNode(node, meterOptions).open();
  let calls = performance.now() - t;
  const m = await opening;
  await sleep(10);
  t = performance.now();
  m.mark("retrieve");
  calls += performance.now() - t;
  await sleep(10);
  t = performance.now();
  m.mark("generate");
  calls += performance.now() - t;
  await sleep(5);
  t = performance.now();
  const closing = m.close();
  calls += performance.now() - t;
  await closing;
  const resolved = process.hrtime.bigint();
  t = performance.now();
  const e = m.result({ tokens: 100 });
  calls += performance.now() - t;
  const edge = m.edgeTimes().close;
  if (edge !== null) closeMs.push(Number(resolved - edge) / 1e6);
  callUs.push(calls * 1000);
  if (e.method !== "sampled") unmeasured.push(e.reason);
}

async function sequentialRound(withMeter, n, callUs, closeMs) {
  const before = performance.eventLoopUtilization();
  for (let i = 0; i < n; i++) await window(withMeter, callUs, closeMs);
  return performance.eventLoopUtilization(before).active;
}

async function concurrentRound(withMeter, n, callUs, closeMs) {
  const before = performance.eventLoopUtilization();
  await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      await sleep(i % 20);
      await window(withMeter, callUs, closeMs);
    }),
  );
  return performance.eventLoopUtilization(before).active;
}

/** Event-loop µs per window (metered minus bare, per round), call µs and close ms. */
async function perWindow(round, n, rounds) {
  const loopUs = [];
  const cpuUs = [];
  const callUs = [];
  const closeMs = [];
  for (let i = 0; i < rounds; i++) {
    const c0 = mainThreadCpuNs();
    const bare = await round(false, n, [], []);
    const c1 = mainThreadCpuNs();
    const metered = await round(true, n, callUs, closeMs);
    const c2 = mainThreadCpuNs();
    loopUs.push(((metered - bare) * 1000) / n);
    cpuUs.push(c0 === null || c2 === null ? Number.NaN : (c2 - c1 - (c1 - c0)) / 1000 / n);
  }
  return {
    loopUs: [median(loopUs), pct(loopUs, 90)],
    cpuUs: [median(cpuUs), pct(cpuUs, 90)],
    callUs: [median(callUs), pct(callUs, 90)],
    closeMs: [median(closeMs), pct(closeMs, 90), pct(closeMs, 99)],
  };
}

/** CPU run time of each thread of this process (ns), grouped. */
function threadCpu() {
  const out = { main: 0, sampler: 0, other: 0 };
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      const comm = readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim();
      if (Number(tid) === process.pid) out.main += ns;
      else if (comm.startsWith("giul-gpu")) out.sampler += ns;
      else out.other += ns;
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return out;
}

/** Windows started at `rate` per second for `seconds`: CPU % of one core by thread group. */
async function atRate(withMeter, rate, seconds) {
  const running = new Set();
  const c0 = threadCpu();
  const w0 = performance.now();
  const n = Math.round(rate * seconds);
  for (let i = 0; i < n; i++) {
    const p = window(withMeter, [], []).finally(() => running.delete(p));
    running.add(p);
    const next = w0 + ((i + 1) * 1000) / rate;
    await sleep(Math.max(0, next - performance.now()));
  }
  await Promise.all(running);
  const wallNs = (performance.now() - w0) * 1e6;
  const c1 = threadCpu();
  const share = (k) => ((c1[k] - c0[k]) / wallNs) * 100;
  return { main: share("main"), sampler: share("sampler"), other: share("other") };
}

async function cpuAt(rate, seconds, reps) {
  const diffs = [];
  for (let i = 0; i < reps; i++) {
    // Metered first, then bare; the sampler's CPU is the metered loop's (it runs for the windows).
    const metered = await atRate(true, rate, seconds);
    // Let the sampler stop (5 s after the last window on this double, whose counter steps as often
    // as it is read) before the bare loop: its linger would otherwise count as the bare loop's.
    await sleep(6000);
    const bare = await atRate(false, rate, seconds);
    diffs.push({
      main: metered.main - bare.main,
      sampler: metered.sampler,
      other: metered.other - bare.other,
    });
  }
  const pick = (k) => median(diffs.map((d) => d[k]));
  const r = { rate, main: pick("main"), sampler: pick("sampler"), other: pick("other") };
  return { ...r, total: r.main + r.sampler + r.other };
}

const warm = await Meter.forNode(node, meterOptions).open();
await warm.close();
for (let i = 0; i < 3; i++) await concurrentRound(true, 200, [], []);

const sequential = await perWindow(sequentialRound, quick ? 40 : 100, quick ? 3 : 5);
const concurrent = await perWindow(concurrentRound, 1000, quick ? 5 : 15);
const cpu = [await cpuAt(10, quick ? 4 : 10, quick ? 1 : 3), await cpuAt(100, quick ? 4 : 10, quick ? 1 : 3)];
rmSync(dir, { recursive: true, force: true });
if (unmeasured.length > 0) console.error(`${unmeasured.length} windows not sampled, e.g. ${unmeasured[0]}`);
console.log(JSON.stringify({ latencyUs, sequential, concurrent, cpu, unmeasured: unmeasured.length }));
process.exit(0);
