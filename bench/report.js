#!/usr/bin/env node
// giul-report on a large log: wall time and peak memory (max RSS, /usr/bin/time) for N records
// (default 1,000,000) of giul-proxy's shape, written once to a temporary file, then reported as
// --json and as HTML. The log is streamed, never held: memory should not grow with N beyond a few
// numbers per record (8 bytes for each figure kept for the quantiles).
//
// Usage: npm run build:ts && node bench/report.js [--records N]
import { spawnSync } from "node:child_process";
import { createWriteStream, mkdtempSync, rmSync, statSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const at = process.argv.indexOf("--records");
const n = at >= 0 ? Number(process.argv[at + 1]) : 1_000_000;
const dir = mkdtempSync(join(tmpdir(), "giul-bench-report-"));
const log = join(dir, "energy.ndjson");

const out = createWriteStream(log);
const t0 = Date.parse("2026-12-01T10:00:00Z");
for (let i = 0; i < n; i++) {
  const joules = 5 + (i % 997) * 0.37;
  const method = i % 20 === 7 ? "unknown" : i % 10 === 3 ? "estimated" : "sampled";
  const record = {
    request_id: `r${i}`,
    joules: method === "unknown" ? null : joules,
    method,
    backend: "nvml_counter",
    seconds: 0.4 + (i % 7) * 0.1,
    idle_w: 60,
    tokens: 40 + (i % 300),
    joules_per_1k_tokens: null,
    stages: {
      prefill: { joules: joules / 4, method: "sampled" },
      decode: { joules: (3 * joules) / 4, method: "sampled" },
    },
    contended: false,
    reason: null,
    uncertainty_joules: method === "sampled" ? joules * 0.02 : null,
    card_joules: joules * 1.3,
    model: ["llama-70b", "mistral-7b", "qwen-32b"][i % 3],
    started_at: new Date(t0 + i * 20).toISOString(),
    duration_ms: 400 + (i % 7) * 100,
  };
  if (!out.write(`${JSON.stringify(record)}\n`)) await new Promise((r) => out.once("drain", r));
}
await new Promise((r) => out.end(r));
const mb = statSync(log).size / 2 ** 20;

const cli = join(root, "dist", "cli", "report.js");
function measure(args) {
  const run = spawnSync("/usr/bin/time", ["-f", "%e %M", process.execPath, cli, ...args, log], {
    encoding: "utf8",
    maxBuffer: 1 << 28,
  });
  if (run.status !== 0) throw new Error(`giul-report failed: ${run.stderr}`);
  const [seconds, kb] = run.stderr.trim().split("\n").pop().split(" ").map(Number);
  return { seconds, mib: kb / 1024 };
}
const json = measure(["--json"]);
const html = measure(["--out", join(dir, "report.html")]);
const page = statSync(join(dir, "report.html")).size / 1024;
rmSync(dir, { recursive: true, force: true });
const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? "?"}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
console.log(`Machine: ${machine}, ${new Date().toISOString().slice(0, 10)}.
Command: \`node bench/report.js --records ${n}\`: a ${mb.toFixed(0)} MiB log of ${n.toLocaleString("en")} giul-proxy records.

| output | wall time | peak memory (max RSS) |
|---|---:|---:|
| --json | ${json.seconds.toFixed(1)} s | ${json.mib.toFixed(0)} MiB |
| HTML (${page.toFixed(0)} KiB page) | ${html.seconds.toFixed(1)} s | ${html.mib.toFixed(0)} MiB |`);
