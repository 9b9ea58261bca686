#!/usr/bin/env node
// What a window (open, two marks, close, result; 10 ms of simulated work) costs the process, at 1,
// 100 and 1,000 concurrent windows on the native path (the libnvidia-ml test double): main-thread
// CPU and whole-process CPU per window (/proc/self/task/*/schedstat), minus the same requests
// unmetered. Each figure is one child process's median over its rounds; children of each variant
// alternate, and with --concurrent P, P children of a variant run at once, metering one card, so
// that every window shares it with the other processes' (what cluster or PM2 workers do).
//
// Usage: npm run build:ts && node bench/floor.js [--before <dist>] [--concurrent P] [--reps R]
//          [--sizes 1,100,1000] [--quick]
//   --before: another build's dist/ (with its own addon beside it), measured alternately as
//   "before"; the child: node bench/floor.js --child <bare|meter> <n> <rounds> (GIUL_BENCH_DIST).
//   GIUL_BENCH_CARDS=K: every window spans K cards of the double (a tensor-parallel node).
//   GIUL_BENCH_COUNTER_STEP_MS=S: the double's counter updates every S ms (default 10).
//   GIUL_BENCH_EXTRA_WORK_MS=W: each request works W ms longer (windows that live longer).
//   GIUL_BENCH_NO_COUNTER=1: a card without an energy counter (nvml_sampler).
// Prints a Markdown section for bench/RESULTS.md.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { benchRequest, expectNative, mainThreadCpuNs, median, squareWaveScenario } from "./lib.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const argv = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : fallback;
};

/** CPU time of every thread of this process so far (ns, schedstat). */
function processCpuNs() {
  let total = 0;
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      total += Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // A thread gone meanwhile.
    }
  }
  return total;
}

async function child(variant, n, rounds) {
  const dir = mkdtempSync(join(tmpdir(), "giul-bench-floor-"));
  const cards = Number(process.env.GIUL_BENCH_CARDS ?? "1");
  // GIUL_BENCH_COUNTER_STEP_MS=100: a counter updating as recent cards' do (with a real sensor's
  // noise on the power readings) instead of the double's 10 ms.
  const step = process.env.GIUL_BENCH_COUNTER_STEP_MS;
  // GIUL_BENCH_NO_COUNTER=1: a card without an energy counter (nvml_sampler: instant power, with
  // a real sensor's noise, integrated).
  const device =
    process.env.GIUL_BENCH_NO_COUNTER === "1" ? "counter=0 power_mode=instant power_noise_w=0.5" : "";
  squareWaveScenario(dir, {
    cards,
    device: step ? `counter_step_ms=${Number(step)} power_noise_w=0.5 ${device}` : device,
  });
  process.env.GIUL_NVML_LIBRARY ??= join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1");
  let make = null;
  if (variant === "meter") {
    const dist = process.env.GIUL_BENCH_DIST ?? join(root, "dist");
    const { Meter } = await import(pathToFileURL(join(dist, "index.js")).href);
    const gpuIndex = cards > 1 ? Array.from({ length: cards }, (_, i) => i) : 0;
    const node = Object.freeze({ name: "bench", gpuIndex, idleW: 60 });
    make = () => Meter.forNode(node, { joulesPer1kHint: 4000 });
    const probe = await make().open();
    await probe.close();
    expectNative(probe.backend, dist);
  }
  const cpu = [];
  const all = [];
  for (let r = 0; r < rounds + 3; r++) {
    const c0 = mainThreadCpuNs();
    const p0 = processCpuNs();
    await Promise.all(Array.from({ length: n }, (_, i) => benchRequest(make, i)));
    if (r >= 3) {
      cpu.push((mainThreadCpuNs() - c0) / 1e3 / n);
      all.push((processCpuNs() - p0) / 1e3 / n);
    }
  }
  rmSync(dir, { recursive: true, force: true });
  process.stdout.write(`${JSON.stringify({ cpuUs: median(cpu), processUs: median(all) })}\n`);
  process.exit(0);
}

/** P children of one variant at once; each one's figures. */
function runChildren(p, variant, dist, n, rounds) {
  const one = () =>
    new Promise((resolve, reject) => {
      const env = { ...process.env };
      if (dist !== null) env.GIUL_BENCH_DIST = dist;
      const c = spawn(
        process.execPath,
        [fileURLToPath(import.meta.url), "--child", variant, String(n), String(rounds)],
        {
          env,
          stdio: ["ignore", "pipe", "inherit"],
        },
      );
      let out = "";
      c.stdout.on("data", (d) => {
        out += d;
      });
      c.once("exit", (code) =>
        code === 0
          ? resolve(JSON.parse(out.trim().split("\n").pop()))
          : reject(new Error(`${variant} exited ${code}`)),
      );
    });
  return Promise.all(Array.from({ length: p }, one));
}

const childAt = argv.indexOf("--child");
if (childAt >= 0) {
  await child(argv[childAt + 1], Number(argv[childAt + 2]), Number(argv[childAt + 3]));
} else {
  const quick = argv.includes("--quick");
  const before = arg("--before", null);
  const concurrent = Number(arg("--concurrent", "1"));
  const reps = Number(arg("--reps", quick ? "2" : "4"));
  const sizes = arg("--sizes", "1,100,1000").split(",").map(Number);
  // The children of a run share one card among themselves only.
  process.env.GIUL_SHARE_GROUP = `bench-${process.pid}`;
  const builds =
    before === null
      ? [["now", null]]
      : [
          ["before", before],
          ["after", null],
        ];
  const fmt = (x) => x.toFixed(1);
  const range = (xs) => `${fmt(median(xs))} [${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}]`;
  const rows = [];
  for (const n of sizes) {
    const rounds = n === 1 ? (quick ? 100 : 300) : n === 100 ? (quick ? 20 : 60) : quick ? 6 : 20;
    const got = { bare: [] };
    for (const [name] of builds) got[name] = [];
    for (let rep = 0; rep < reps; rep++) {
      got.bare.push(...(await runChildren(concurrent, "bare", null, n, rounds)));
      for (const [name, dist] of builds)
        got[name].push(...(await runChildren(concurrent, "meter", dist, n, rounds)));
    }
    const bareCpu = median(got.bare.map((g) => g.cpuUs));
    const bareAll = median(got.bare.map((g) => g.processUs));
    for (const [name] of builds) {
      const cpu = got[name].map((g) => g.cpuUs - bareCpu);
      const all = got[name].map((g) => g.processUs - bareAll);
      rows.push(`| ${n.toLocaleString("en")} | ${name} | ${range(cpu)} | ${range(all)} |`);
    }
  }
  const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? "?"}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
  console.log(`Machine: ${machine}, ${new Date().toISOString().slice(0, 10)}, load average ${loadavg()[0].toFixed(1)} at the end.
Command: \`node bench/floor.js${before === null ? "" : " --before <dist>"} --concurrent ${concurrent} --reps ${reps}\`: ${concurrent} process${concurrent === 1 ? "" : "es"} of a variant at once, ${reps} times, alternated; µs per window, median [min–max] over the ${concurrent * reps} processes, the bare loop's median subtracted.

| concurrent windows | build | main thread | process |
|---:|---|---:|---:|
${rows.join("\n")}`);
}
