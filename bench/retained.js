#!/usr/bin/env node
// What a crowd of windows keeps alive, per window, at each stage of its life (issues 10 and 12):
// 10,000 windows on the native path (the libnvidia-ml test double) opened one after another, each
// marked twice, then all closed at once; the heap is measured after a full collection at each
// stage. Unlike CPU time on a shared host, these figures repeat to within a few bytes from run to
// run, and they are what a young-generation collection copies: at 10,000 concurrent windows most
// of a window's cost is the collector's (bench/RESULTS.md, "What a crowd keeps alive").
// Usage: npm run build:ts && [GIUL_ACCOUNTING=worker] node --expose-gc bench/retained.js [--windows N]
//   GIUL_BENCH_DIST=/other/checkout/dist measures another build (with GIUL_ADDON_PATH pointing at a
//   built giul.node when that dist has no build/ beside it).
// Prints a Markdown section for bench/RESULTS.md.
import { rmSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { benchScenario, numberArg } from "./lib.js";

if (typeof globalThis.gc !== "function") throw new Error("run with node --expose-gc");
const root = fileURLToPath(new URL("..", import.meta.url));
const N = numberArg("--windows", 10_000);
const dir = benchScenario(root, "retained");
const dist = process.env.GIUL_BENCH_DIST ?? join(root, "dist");
const { Meter } = await import(pathToFileURL(join(dist, "index.js")).href);

const node = Object.freeze({ name: "bench", gpuIndex: 0, idleW: 60 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** The heap after a full collection, and the memory of array buffers outside it (bytes). */
let outside = 0;
const heap = () => {
  globalThis.gc();
  const m = process.memoryUsage();
  outside = m.arrayBuffers;
  return m.heapUsed;
};

// The card sampling, and every code path run once, before anything is counted. With
// GIUL_ACCOUNTING=worker, until the worker is ready (windows before it are accounted here): the
// figures are then the event loop's side of offloaded windows.
const worker = process.env.GIUL_ACCOUNTING === "worker";
for (let i = 0; i < (worker ? 40 : 3); i++) {
  const m = await Meter.forNode(node).open();
  m.mark("a");
  await m.close();
  m.result();
  if (worker) await sleep(10);
}
await sleep(20);
const h0 = heap();
const outside0 = outside;
const windows = [];
for (let i = 0; i < N; i++) windows.push(await Meter.forNode(node, { joulesPer1kHint: 4000 }).open());
const h1 = heap();
for (const m of windows) m.mark("retrieve");
const h2 = heap();
for (const m of windows) m.mark("generate");
const h3 = heap();
const closes = windows.map((m) => m.close());
const h4 = heap();
const outsideClosing = outside;
await Promise.all(closes);
const h5 = heap();
const records = windows.map((m) => m.result({ tokens: 100 }));
const h6 = heap();
rmSync(dir, { recursive: true, force: true });

const per = (bytes) => Math.round(bytes / N);
console.log(`## What a crowd keeps alive, per window

Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? "?"}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.
Command: \`${worker ? "GIUL_ACCOUNTING=worker " : ""}node --expose-gc bench/retained.js\`${process.env.GIUL_BENCH_DIST ? ` (GIUL_BENCH_DIST=${process.env.GIUL_BENCH_DIST})` : ""}. ${N.toLocaleString("en")} windows on ${records[0].backend}, heap after a
full collection, bytes per window:

| open | + a mark | + a second mark | closing (edges settling) | closed | + its record |
|---:|---:|---:|---:|---:|---:|
| ${per(h1 - h0)} | ${per(h2 - h1)} | ${per(h3 - h2)} | ${per(h4 - h3)} | ${per(h5 - h3)} | ${per(h6 - h5)} |

A closing window keeps ${per(h4 - h0)} bytes alive in all (open, marked twice, closing), and
${per(outsideClosing - outside0)} bytes of array buffers outside the heap, which the collector does not copy.
`);
process.exit(0);
