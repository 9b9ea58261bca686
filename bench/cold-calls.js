#!/usr/bin/env node
// Why one window on its own costs ten times a window in a crowd (issue 12): what the same calls
// cost right after the event loop slept 10 ms (as a lone request's edges are taken, a few ms of
// work apart) against at once again. On the libnvidia-ml test double:
//   - performance.now(), and a read of process.env (forNode reads GIUL_BACKEND);
//   - the append to the card's event log every window edge makes (the addon's, in shared memory),
//     first after the sleep and then at once again;
//   - the read the edge then asks the card's sampling thread for (a futex wake);
//   - the same append after another native call made first (the sampler's setPeriod, same period).
// Usage: npm run build:ts && node bench/cold-calls.js [--rounds 300]
//   It reaches the log and the sampler through a window's private fields (a benchmark, not an API).
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { median, pct, sleep, squareWaveScenario } from "./lib.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const i = process.argv.indexOf("--rounds");
const rounds = i > 0 ? Number(process.argv[i + 1]) : 300;
const dir = mkdtempSync(join(tmpdir(), "giul-bench-cold-"));
squareWaveScenario(dir, { device: "power_mode=instant" });
process.env.GIUL_NVML_LIBRARY ??= join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1");
const { Meter } = await import(join(process.env.GIUL_BENCH_DIST ?? join(root, "dist"), "index.js"));
const node = Object.freeze({ name: "bench", gpuIndex: 0, idleW: 60 });

const window = await Meter.forNode(node).open();
const log = window.ledger?.log;
const sampler = window.ledger?.track?.source?.sampler;
if (window.backend !== "nvml_counter" || log?.scope !== "host" || typeof sampler?.wake !== "function") {
  console.error(`no native sampler to measure (backend ${window.backend})`);
  process.exit(1);
}

const names = ["now", "env", "append", "append again", "wake", "setPeriod", "append after setPeriod"];
const us = Object.fromEntries(names.map((n) => [n, { cold: [], warm: [] }]));
/** Times fn() right after a 10 ms sleep (cold) and at once after that (warm), µs. */
async function time(name, fn) {
  await sleep(10);
  let t = performance.now();
  fn();
  us[name].cold.push((performance.now() - t) * 1000);
  t = performance.now();
  fn();
  us[name].warm.push((performance.now() - t) * 1000);
}
let sink = 0;
for (let r = 0; r < rounds; r++) {
  await time("now", () => {
    sink += performance.now();
  });
  await time("env", () => {
    sink += process.env.GIUL_BACKEND === undefined ? 0 : 1;
  });
  await sleep(10);
  let t = performance.now();
  log.append(0, 0, Number.NaN, 4);
  us.append.cold.push((performance.now() - t) * 1000);
  t = performance.now();
  log.append(0, 0, Number.NaN, 4);
  us["append again"].cold.push((performance.now() - t) * 1000);
  t = performance.now();
  sampler.wake(true);
  us.wake.cold.push((performance.now() - t) * 1000);
  await sleep(10);
  t = performance.now();
  sampler.setPeriod(5);
  us.setPeriod.cold.push((performance.now() - t) * 1000);
  t = performance.now();
  log.append(0, 0, Number.NaN, 4);
  us["append after setPeriod"].cold.push((performance.now() - t) * 1000);
}
await window.close();
rmSync(dir, { recursive: true, force: true });
const f = (xs) => (xs.length === 0 ? "" : `${median(xs).toFixed(1)} / ${pct(xs, 90).toFixed(1)}`);
console.log(
  [
    `## The same calls after a 10 ms sleep and at once again`,
    ``,
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? "unknown"}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.`,
    `Command: \`node bench/cold-calls.js --rounds ${rounds}\` (libnvidia-ml double; µs, median / p90).`,
    ``,
    `| call | after a 10 ms sleep | at once again |`,
    `|---|---:|---:|`,
    `| performance.now() | ${f(us.now.cold)} | ${f(us.now.warm)} |`,
    `| read process.env.GIUL_BACKEND | ${f(us.env.cold)} | ${f(us.env.warm)} |`,
    `| append to the card's event log (shared memory, its lock) | ${f(us.append.cold)} | ${f(us["append again"].cold)} |`,
    `| ask the sampler for a read (a futex wake) | ${f(us.wake.cold)} | |`,
    `| native setPeriod (same period), first after the sleep | ${f(us.setPeriod.cold)} | |`,
    `| append right after it | ${f(us["append after setPeriod"].cold)} | |`,
    ``,
  ].join("\n"),
);
if (Number.isNaN(sink)) console.log("(sink)");
process.exit(0);
