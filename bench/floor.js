#!/usr/bin/env node
// The event loop's floor for a window (issues 10 and 12): what a window would cost if the ledger's
// work (the edges' fused values, their bounds, the shares) were done off the event loop, against
// what the Meter costs today, at 1,000 and 10,000 concurrent windows on the native path (the
// libnvidia-ml test double).
//
// The "floor" window does on the event loop only what no design can move off it: its four events
// appended to the card's process-wide event log (the real addon call, which stamps them and asks
// the sampler for a read), a wait for one notification per batch of closes (a timer here, where an
// accounting thread would ring), its events' figures read from shared memory (rows of a
// Float64Array), and its record built and frozen (the total and two stages). Nothing is measured:
// the figures read are zeros. What it costs is the least a window can cost on this event loop.
//
// Each variant (bare: the same requests unmetered; floor; thread: Meter.forNode, shared
// attribution, with GIUL_ACCOUNTING=thread, the ledger's work on the window's own thread; meter:
// the same with the build's default, auto since the eighth session; worker: GIUL_ACCOUNTING=worker,
// the ledger's work on the accounting worker, src/offload/) runs in a process of its own, three
// times, alternated; the figure is the
// main thread's CPU time per window (schedstat), median over rounds, minus the bare loop's, and
// the whole process's CPU the same way.
// With --sequential, one window at a time instead (10 ms each), and the calls' own time too.
// Usage: npm run build:ts && node bench/floor.js [--quick] [--sequential] [--processes N]
// (--processes: N processes of each variant instead of three; on a shared host one process's figure
// moves by 2 to 4 µs, so more of them tell a median close to a target apart from noise.)
// Prints a Markdown section for bench/RESULTS.md.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import { benchRequest, mainThreadCpuNs, median, nativeAddon, pct, sleep, squareWaveScenario } from "./lib.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const childAt = process.argv.indexOf("--child");

if (childAt > 0) {
  const [variant, nArg, roundsArg] = process.argv.slice(childAt + 1);
  const n = Number(nArg);
  const rounds = Number(roundsArg);
  const dir = mkdtempSync(join(tmpdir(), "giul-bench-floor-"));
  squareWaveScenario(dir);
  process.env.GIUL_NVML_LIBRARY ??= join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1");
  // thread and worker: GIUL_ACCOUNTING says so; meter: the build's default (auto since the eighth
  // session: this thread, and the worker while the card is crowded).
  if (variant === "worker" || variant === "thread") process.env.GIUL_ACCOUNTING = variant;
  const make = await variantOf(variant);
  if (variant === "worker") {
    // The worker says it is ready within a few ms; windows before that are accounted here.
    await Promise.all(Array.from({ length: 10 }, (_, i) => benchRequest(make, i)));
  }
  const cpu = [];
  const all = [];
  const calls = [];
  // Close latency, where the window says where its closing edge was (the Meter's variants), in
  // rounds of its own after the timed ones: reading it (edgeTimes()) is the benchmark's work, not
  // the window's, and cost about 1 µs a window when it ran inside the timed rounds.
  const latency = metered(variant) ? [] : null;
  const latencyRounds = latency === null || n === 1 ? 0 : Math.max(2, Math.ceil(rounds / 3));
  for (let r = 0; r < rounds + 3 + latencyRounds; r++) {
    const timed = r >= 3 && r < rounds + 3;
    const c0 = mainThreadCpuNs();
    const p0 = processCpuNs();
    // One window at a time (n = 1) has its calls timed too.
    if (n === 1) await timedRequest(make, r >= 3 ? calls : []);
    else
      await Promise.all(
        Array.from({ length: n }, (_, i) => benchRequest(make, i, r >= rounds + 3 ? latency : null)),
      );
    if (timed) {
      cpu.push((mainThreadCpuNs() - c0) / 1e3 / n);
      all.push((processCpuNs() - p0) / 1e3 / n);
    }
  }
  rmSync(dir, { recursive: true, force: true });
  const callUs = calls.length > 0 ? median(calls) : null;
  const closeMs = latency?.length ? [median(latency), pct(latency, 90), pct(latency, 99)] : null;
  process.stdout.write(
    `${JSON.stringify({ variant, n, cpuUs: median(cpu), processUs: median(all), callUs, closeMs })}\n`,
  );
  process.exit(0);
}

/**
 * benchRequest's window (10 ms, two marks), its calls timed: open(), the marks, close() and
 * result() as the caller is held by them (µs pushed to `calls`).
 */
async function timedRequest(make, calls) {
  if (make === null) return benchRequest(null, 0);
  const time = (f) => {
    const t = performance.now();
    const got = f();
    return [got, performance.now() - t];
  };
  const [opening, a] = time(() => make().open());
  const m = await opening;
  await sleep(5);
  const [, b] = time(() => m.mark("retrieve"));
  await sleep(5);
  const [, c] = time(() => m.mark("generate"));
  const [closing, d] = time(() => m.close());
  await closing;
  const [, e] = time(() => m.result({ tokens: 100 }));
  calls.push((a + b + c + d + e) * 1000);
}

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

/** The request's meter maker for a variant (null: bare). */
async function variantOf(variant) {
  if (variant === "bare") return null;
  if (metered(variant)) {
    const dist = process.env.GIUL_BENCH_DIST ?? join(root, "dist");
    const { Meter } = await import(pathToFileURL(join(dist, "index.js")).href);
    const node = Object.freeze({ name: "bench", gpuIndex: 0, idleW: 60 });
    return () => Meter.forNode(node, { joulesPer1kHint: 4000 });
  }
  const addon = await nativeAddon(root);
  const sampler = addon.openSampler(0, 5);
  if (sampler.ok === false) throw new Error(`openSampler: ${sampler.reason}`);
  return floorMeter(sampler, addon.ledgerLayout);
}

/** A window that keeps on the event loop only what must be there (see the top of this file). */
function floorMeter(sampler, layout) {
  const log = new Float64Array(sampler.ledger);
  const ENTRY = layout.entrySlots;
  const HEADER = layout.headerSlots;
  const T = layout.eT;
  const capacity = log[layout.hCapacity];
  // What an accounting thread would write for each event: a share's accumulators and bounds.
  const ROW = 12;
  const rows = new Float64Array(capacity * ROW);
  let waiting = [];
  let armed = false;
  const ring = () => {
    const now = waiting;
    waiting = [];
    armed = false;
    for (const done of now) done();
  };
  class FloorMeter {
    seqs = [];
    marks = [];
    async open() {
      this.seqs.push(sampler.ledgerAppend(1, 1, 60));
      return this;
    }
    mark(name) {
      this.marks.push({ name, at: this.seqs.length });
      this.seqs.push(sampler.ledgerAppend(0, 0, Number.NaN));
    }
    close() {
      this.seqs.push(sampler.ledgerAppend(-1, -1, Number.NaN));
      return new Promise((done) => {
        waiting.push(done);
        if (!armed) {
          armed = true;
          setTimeout(ring, 1);
        }
      });
    }
    span(a, b) {
      const ka = this.seqs[a] % capacity;
      const kb = this.seqs[b] % capacity;
      return {
        joules: rows[kb * ROW] - rows[ka * ROW],
        uncertaintyJoules: rows[kb * ROW + 1] + rows[ka * ROW + 1],
        seconds: (log[HEADER + kb * ENTRY + T] - log[HEADER + ka * ENTRY + T]) / 1e9,
      };
    }
    record(s, tokens, stages) {
      return Object.freeze({
        joules: s.joules,
        method: "sampled",
        backend: "nvml_counter",
        seconds: s.seconds,
        tokens,
        uncertaintyJoules: s.uncertaintyJoules,
        attribution: "shared",
        concurrency: Object.freeze({ mean: 1, max: 1 }),
        cardJoules: s.joules,
        stages,
      });
    }
    result(options) {
      const stages = {};
      let from = 0;
      for (const m of this.marks) {
        stages[m.name] = this.record(this.span(from, m.at), null, Object.freeze({}));
        from = m.at;
      }
      return this.record(this.span(0, this.seqs.length - 1), options?.tokens ?? null, Object.freeze(stages));
    }
  }
  return () => new FloorMeter();
}

/** The variants that are giul's Meter (the default, or GIUL_ACCOUNTING=thread or worker). */
function metered(variant) {
  return variant === "meter" || variant === "thread" || variant === "worker";
}

const quick = process.argv.includes("--quick");
const processesAt = process.argv.indexOf("--processes");
const reps = processesAt > 0 ? Number(process.argv[processesAt + 1]) : 3;
if (!(Number.isInteger(reps) && reps > 0)) throw new Error("--processes: a positive whole number");
const repsWord = reps === 3 ? "three" : String(reps);
const repsFlag = reps === 3 ? "" : ` --processes ${reps}`;
const sequential = process.argv.includes("--sequential");
const runs = sequential
  ? [{ n: 1, rounds: quick ? 100 : 300 }]
  : [
      { n: 1000, rounds: quick ? 8 : 30 },
      { n: 10000, rounds: quick ? 3 : 8 },
    ];
const table = [];
for (const { n, rounds } of runs) {
  const by = { bare: [], floor: [], thread: [], meter: [], worker: [] };
  const process_ = { bare: [], floor: [], thread: [], meter: [], worker: [] };
  const callsBy = { bare: [], floor: [], thread: [], meter: [], worker: [] };
  /** Each process's close latency, ms: [median, p90, p99]. */
  const closeBy = { thread: [], meter: [], worker: [] };
  for (let rep = 0; rep < reps; rep++) {
    for (const variant of ["bare", "floor", "thread", "meter", "worker"]) {
      const child = spawnSync(
        process.execPath,
        [fileURLToPath(import.meta.url), "--child", variant, String(n), String(rounds)],
        { encoding: "utf8", env: process.env, maxBuffer: 1 << 20 },
      );
      if (child.status !== 0) throw new Error(`${variant} at ${n}: ${child.stderr}`);
      const got = JSON.parse(child.stdout.trim().split("\n").pop());
      by[variant].push(got.cpuUs);
      process_[variant].push(got.processUs);
      if (got.callUs !== null) callsBy[variant].push(got.callUs);
      if (got.closeMs !== null) closeBy[variant].push(got.closeMs);
    }
  }
  const bare = median(by.bare);
  const bareAll = median(process_.bare);
  table.push({
    n,
    bare,
    floor: median(by.floor) - bare,
    thread: median(by.thread) - bare,
    meter: median(by.meter) - bare,
    worker: median(by.worker) - bare,
    threadAll: median(process_.thread) - bareAll,
    meterAll: median(process_.meter) - bareAll,
    workerAll: median(process_.worker) - bareAll,
    calls:
      n === 1
        ? {
            floor: median(callsBy.floor),
            thread: median(callsBy.thread),
            meter: median(callsBy.meter),
            worker: median(callsBy.worker),
          }
        : null,
    closeBy,
    by,
  });
}

const fmt = (x) => x.toFixed(1);
const latencies = (xs) => xs.map((x) => x.toFixed(1)).join(" / ");
if (sequential) {
  const [r] = table;
  console.log(`## The event loop's floor for a window, one window at a time

Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? "?"}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.
Command: \`node bench/floor.js --sequential${quick ? " --quick" : ""}${repsFlag}\`. Windows of 10 ms (two marks) one after another.
Main-thread CPU µs per window, metered minus bare (the bare loop: ${fmt(r.bare)} µs of CPU per request of two
sleeps), median of rounds in each process, median of ${repsWord} processes each (in parentheses: each
process's figure, the bare loop not subtracted); and the calls' own time (open, two marks, close and
result, as the caller is held by them), median µs:

| | main-thread CPU per window | the calls |
|---|---:|---:|
| floor: ledger work off the event loop | ${fmt(r.floor)} (${r.by.floor.map(fmt).join(", ")}) | ${fmt(r.calls.floor)} |
| the Meter, GIUL_ACCOUNTING=thread | ${fmt(r.thread)} (${r.by.thread.map(fmt).join(", ")}) | ${fmt(r.calls.thread)} |
| the Meter (the default) | ${fmt(r.meter)} (${r.by.meter.map(fmt).join(", ")}) | ${fmt(r.calls.meter)} |
| the Meter, GIUL_ACCOUNTING=worker | ${fmt(r.worker)} (${r.by.worker.map(fmt).join(", ")}) | ${fmt(r.calls.worker)} |
`);
  process.exit(0);
}
console.log(`## The event loop's floor for a window

Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? "?"}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.
Command: \`node bench/floor.js${quick ? " --quick" : ""}${repsFlag}\`. Main-thread CPU µs per window (open + 2 marks + close + result),
metered minus bare (bare: the same requests unmetered), median of rounds in each process, median of
${repsWord} processes each (in parentheses: each process's figure, the bare loop not subtracted):

| concurrent windows | bare loop | floor: ledger work off the event loop | the Meter, GIUL_ACCOUNTING=thread | the Meter (the default) | the Meter, GIUL_ACCOUNTING=worker |
|---:|---:|---:|---:|---:|---:|
${table.map((r) => `| ${r.n.toLocaleString("en")} | ${fmt(r.bare)} | ${fmt(r.floor)} (${r.by.floor.map(fmt).join(", ")}) | ${fmt(r.thread)} (${r.by.thread.map(fmt).join(", ")}) | ${fmt(r.meter)} (${r.by.meter.map(fmt).join(", ")}) | ${fmt(r.worker)} (${r.by.worker.map(fmt).join(", ")}) |`).join("\n")}

Close latency, ms from a window's closing edge to close() resolving (each process's median / p90 / p99):

| concurrent windows | GIUL_ACCOUNTING=thread | the default | GIUL_ACCOUNTING=worker |
|---:|---|---|---|
${table.map((r) => `| ${r.n.toLocaleString("en")} | ${r.closeBy.thread.map(latencies).join("; ")} | ${r.closeBy.meter.map(latencies).join("; ")} | ${r.closeBy.worker.map(latencies).join("; ")} |`).join("\n")}

CPU of the whole process (every thread: the event loop, the sampler, the accounting worker, V8's
helpers) per window, minus the bare loop's: on the window's thread ${table.map((r) => `${fmt(r.threadAll)} µs at ${r.n.toLocaleString("en")}`).join(", ")}; the default ${table.map((r) => `${fmt(r.meterAll)} µs at ${r.n.toLocaleString("en")}`).join(", ")}; with the
accounting worker ${table.map((r) => `${fmt(r.workerAll)} µs at ${r.n.toLocaleString("en")}`).join(", ")}. The worker moves the ledger's work off the event
loop; it does not remove it.
`);
