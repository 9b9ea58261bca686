#!/usr/bin/env node
// Backends side by side on a real card: the same windows metered at once through nvml_counter,
// nvml_sampler and smi_sampler (each forced with GIUL_BACKEND for its own Meter), so that the
// sampled figures can be compared with the card's own energy counter.
//
//   node bench/hardware.js [--gpu 0] [--reps 5] [--json out.json]
//
// Run by scripts/gpu-check.sh on a machine with an NVIDIA GPU. Without one it measures whatever
// GIUL_NVML_LIBRARY / PATH provide (the test doubles, for a dry run). idleW is 0 here: the figures
// are the card's whole draw, which is what the backends must agree on.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const { Meter, isGiulError } = await import(join(root, "dist", "index.js"));

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const gpuIndex = Number(arg("--gpu", "0"));
const reps = Number(arg("--reps", "5"));
const jsonOut = arg("--json", null);
const node = Object.freeze({ name: "hardware", gpuIndex, idleW: 0 });
const backends = ["nvml_counter", "nvml_sampler", "smi_sampler"];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function meterWith(backend) {
  process.env.GIUL_BACKEND = backend;
  try {
    return Meter.forNode(node, { periodMs: backend === "smi_sampler" ? 100 : 10 });
  } catch (error) {
    return isGiulError(error) ? error.message : String(error);
  } finally {
    delete process.env.GIUL_BACKEND;
  }
}

// Warm every backend up (probe, start samplers, first samples).
const usable = [];
for (const backend of backends) {
  const m = meterWith(backend);
  if (typeof m === "string") {
    console.log(`${backend}: not usable here: ${m}`);
    continue;
  }
  try {
    await m.open();
    await sleep(300);
    await m.close();
    usable.push(backend);
  } catch (error) {
    console.log(`${backend}: not usable here: ${error.message ?? error}`);
  }
}

const rows = [];
for (const seconds of [0.1, 0.5, 2]) {
  for (let rep = 0; rep < reps; rep++) {
    const meters = usable.map((b) => ({ backend: b, meter: meterWith(b) }));
    await Promise.all(meters.map(({ meter }) => meter.open()));
    await sleep(seconds * 1000);
    await Promise.all(meters.map(({ meter }) => meter.close()));
    const row = { seconds };
    for (const { backend, meter } of meters) {
      const e = meter.result();
      row[backend] = {
        joules: e.joules,
        method: e.method,
        uncertainty: e.uncertaintyJoules,
        seconds: e.seconds,
        reason: e.reason,
      };
    }
    rows.push(row);
  }
}

const fmt = (x) => (x === null || x === undefined ? "—" : x.toFixed(2));
console.log(`\ncard ${gpuIndex}: whole-card joules per window (idleW 0), ± the record's uncertainty\n`);
console.log(["window s", ...usable].map((s) => s.padStart(22)).join(""));
for (const row of rows) {
  const cells = usable.map((b) => {
    const r = row[b];
    return r.method === "sampled" ? `${fmt(r.joules)} ±${fmt(r.uncertainty)}` : r.method;
  });
  console.log([String(row.seconds), ...cells].map((s) => s.padStart(22)).join(""));
}
if (usable.includes("nvml_counter")) {
  for (const b of usable.filter((x) => x !== "nvml_counter")) {
    const rel = rows
      .filter((r) => r.nvml_counter.method === "sampled" && r[b].method === "sampled")
      .map((r) => (r[b].joules - r.nvml_counter.joules) / r.nvml_counter.joules);
    if (rel.length > 0) {
      const mean = rel.reduce((a, x) => a + x, 0) / rel.length;
      const worst = Math.max(...rel.map(Math.abs));
      console.log(
        `${b} vs counter: mean ${(mean * 100).toFixed(2)}%, worst ${(worst * 100).toFixed(2)}% (${rel.length} windows)`,
      );
    }
  }
}
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ gpuIndex, usable, rows }, null, 2));
process.exit(0);
