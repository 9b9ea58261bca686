#!/usr/bin/env node
// What a card's sampler costs with no window open (issue 12): on the libnvidia-ml test double with
// a 100 ms counter step (as recent cards update theirs), the sampling thread's CPU while windows
// come and go, in the 5 s after the last one (the windows' period kept), and once it has backed
// off (a sixth of the counter's step, for a minute, then it stops).
// Usage: npm run build:ts && node bench/idle.js [--seconds 10]
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { mainThreadCpuNs, sleep } from "./lib.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const i = process.argv.indexOf("--seconds");
const seconds = i > 0 ? Number(process.argv[i + 1]) : 10;
const dir = mkdtempSync(join(tmpdir(), "giul-bench-idle-"));
const scenario = join(dir, "scenario.txt");
writeFileSync(scenario, `t0_ns ${process.hrtime.bigint()}\ndevice 0 counter_step_ms=100 power=262\n`);
process.env.GIUL_FAKE_NVML_SCENARIO = scenario;
process.env.GIUL_NVML_LIBRARY ??= join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1");
const { Meter } = await import(join(process.env.GIUL_BENCH_DIST ?? join(root, "dist"), "index.js"));
const node = Object.freeze({ name: "bench", gpuIndex: 0, idleW: 60 });

/** CPU time so far (ns) of the card's sampling thread (0 once it has stopped), the main thread, and the rest. */
function threadNs() {
  let sampler = 0;
  let all = 0;
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      all += ns;
      if (readFileSync(`/proc/self/task/${tid}/comm`, "utf8").startsWith("giul-gpu")) sampler += ns;
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  const main = mainThreadCpuNs() ?? 0;
  return { sampler, main, other: all - sampler - main };
}
/** CPU by thread between two threadNs() readings `ms` apart, % of one core. */
function percent(a, b, ms) {
  const f = (k) => ((b[k] - a[k]) / (ms * 1e6)) * 100;
  return { sampler: f("sampler"), main: f("main"), other: f("other") };
}
/** CPU by thread over `ms` from now, % of one core. */
async function share(ms) {
  const c0 = threadNs();
  const t0 = performance.now();
  await sleep(ms);
  return percent(c0, threadNs(), performance.now() - t0);
}

// Windows back to back for a while (the cadence locks), measured meanwhile.
const c0 = threadNs();
const t0 = performance.now();
while (performance.now() - t0 < seconds * 1000) {
  const m = await Meter.forNode(node).open();
  await sleep(50);
  await m.close();
}
const busy = percent(c0, threadNs(), performance.now() - t0);
const linger = await share(4_500);
await sleep(1_000); // the backoff, 5 s after the last window
const idle = await share(seconds * 1000);
rmSync(dir, { recursive: true, force: true });
const f = (x) => x.toFixed(2);
const row = (what, c) => `| ${what} | ${f(c.sampler)} | ${f(c.main)} | ${f(c.other)} |`;
console.log(
  [
    `## A card's sampler with no window open`,
    ``,
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? "unknown"}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.`,
    `Command: \`node bench/idle.js --seconds ${seconds}\` (libnvidia-ml double, 100 ms counter step, default period).`,
    ``,
    `| % of one core | sampling thread | main thread | other threads |`,
    `|---|---:|---:|---:|`,
    row(`windows of 50 ms back to back (${seconds} s)`, busy),
    row("the 5 s after the last window (the windows' period kept)", linger),
    row(`backed off (from 5 s after the last window, for a minute; ${seconds} s measured)`, idle),
    `| stopped (a minute after that) | 0 | | |`,
    ``,
  ].join("\n"),
);
process.exit(0);
