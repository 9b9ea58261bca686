#!/usr/bin/env node
// A window over 8 cards against 8 one-card windows, one on each card, opened, marked and closed
// together (what the window over 8 cards does by hand): main-thread CPU per request, at N
// concurrent requests, the two alternated process by process. Equal figures mean the window over
// several cards costs nothing beyond its parts' own ledger work.
//
// Usage: npm run build:ts && node bench/cards.js [N=100] [ROUNDS=30] [PAIRS=3]
//   the child: node bench/cards.js --child <tp|split> N ROUNDS (GIUL_BENCH_DIST, GIUL_ADDON_PATH)
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { benchRequest, expectNative, mainThreadCpuNs, median, squareWaveScenario } from "./lib.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const CARDS = 8;

async function child(mode, n, rounds) {
  const dir = mkdtempSync(join(tmpdir(), "giul-bench-cards-"));
  squareWaveScenario(dir, { cards: CARDS });
  process.env.GIUL_NVML_LIBRARY ??= join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1");
  const dist = process.env.GIUL_BENCH_DIST ?? join(root, "dist");
  const { Meter } = await import(pathToFileURL(join(dist, "index.js")).href);
  const nodes = Array.from({ length: CARDS }, (_, i) =>
    Object.freeze({ name: `c${i}`, gpuIndex: i, idleW: 60 }),
  );
  const tp = Object.freeze({ name: "tp", gpuIndex: nodes.map((_, i) => i), idleW: 60 });
  /** 8 one-card windows driven as one. */
  class Split {
    ms = nodes.map((node) => Meter.forNode(node, { joulesPer1kHint: 4000 }));
    async open() {
      await Promise.all(this.ms.map((m) => m.open()));
      return this;
    }
    mark(name) {
      for (const m of this.ms) m.mark(name);
    }
    async close() {
      await Promise.all(this.ms.map((m) => m.close()));
    }
    result(options) {
      return this.ms.map((m) => m.result(options));
    }
  }
  const make = mode === "split" ? () => new Split() : () => Meter.forNode(tp, { joulesPer1kHint: 4000 });
  const first = await make().open();
  await first.close();
  expectNative(mode === "split" ? first.ms[0].backend : first.backend, dist);
  const cpu = [];
  for (let r = 0; r < rounds + 3; r++) {
    const c0 = mainThreadCpuNs();
    await Promise.all(Array.from({ length: n }, (_, i) => benchRequest(make, i)));
    if (r >= 3) cpu.push((mainThreadCpuNs() - c0) / 1e3 / n);
  }
  rmSync(dir, { recursive: true, force: true });
  process.stdout.write(`${median(cpu)}\n`);
  process.exit(0);
}

const argv = process.argv.slice(2);
if (argv[0] === "--child") {
  await child(argv[1], Number(argv[2]), Number(argv[3]));
} else {
  const [n = "100", rounds = "30", pairs = "3"] = argv;
  const figures = { tp: [], split: [] };
  for (let p = 0; p < Number(pairs); p++) {
    for (const mode of ["tp", "split"]) {
      const out = execFileSync(process.execPath, [
        fileURLToPath(import.meta.url),
        "--child",
        mode,
        n,
        rounds,
      ]);
      figures[mode].push(Number(String(out).trim()));
    }
  }
  const f = (xs) => xs.map((x) => x.toFixed(1)).join(", ");
  console.log(`${n} concurrent, main-thread µs per request (bare loop not subtracted):`);
  console.log(`  one window over ${CARDS} cards: ${f(figures.tp)} (median ${median(figures.tp).toFixed(1)})`);
  console.log(
    `  ${CARDS} one-card windows:      ${f(figures.split)} (median ${median(figures.split).toFixed(1)})`,
  );
}
