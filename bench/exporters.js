#!/usr/bin/env node
// What the diagnostics channels and giul/otel cost the event loop, per window, at 1,000 concurrent
// windows on the native path (the libnvidia-ml test double), against the same rounds without them:
//   - no subscriber: a metered round minus the same round bare (the Meter's own cost, channels
//     idle: what every user pays);
//   - giul/otel subscribed, every request in an active span (context captured at open, the record
//     and two stage events on the span, a histogram sample and a counter increment): the same
//     metered round with the instrumentation on, minus it off, paired within each round, the order
//     alternating between rounds.
// Usage: npm run bench (bench/meter.js runs this last), or: npx tsup && node bench/exporters.js
//   [--quick] [--rounds N] [--no-otel] [--processes P]; GIUL_BENCH_DIST=/other/checkout/dist measures
//   another build (with --no-otel for one without giul/otel), to compare the no-subscriber cost before
//   and after. With --processes, P processes run one after another and each row is the median of
//   their medians, each process's listed: on a shared host one process's median differs from the
//   next's by more than a change under study (3 to 8 µs for the same build).
// Prints a Markdown section for bench/RESULTS.md.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import { benchRequest, mainThreadCpuNs, median, pct, squareWaveScenario } from "./lib.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const quick = process.argv.includes("--quick");
const withOtel = !process.argv.includes("--no-otel");
const dist = process.env.GIUL_BENCH_DIST ?? join(root, "dist");
const processesAt = process.argv.indexOf("--processes");
if (processesAt > 0) {
  const count = Number(process.argv[processesAt + 1]);
  if (!(Number.isInteger(count) && count > 0)) throw new Error("--processes: a positive whole number");
  const args = process.argv.slice(2).filter((_, i) => i !== processesAt - 2 && i !== processesAt - 1);
  console.log(acrossProcesses(count, args));
  process.exit(0);
}
const asJson = process.argv.includes("--json");

const dir = mkdtempSync(join(tmpdir(), "giul-bench-exporters-"));
squareWaveScenario(dir);
process.env.GIUL_NVML_LIBRARY ??= join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1");

const { Meter } = await import(pathToFileURL(join(dist, "index.js")).href);
const { context } = await import("@opentelemetry/api");
const { AsyncLocalStorageContextManager } = await import("@opentelemetry/context-async-hooks");
const { MeterProvider, MetricReader } = await import("@opentelemetry/sdk-metrics");
const { BasicTracerProvider } = await import("@opentelemetry/sdk-trace-base");
const otelEntry = withOtel ? await import(pathToFileURL(join(dist, "otel.js")).href) : null;

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
// Spans record (attributes and events are kept) but go nowhere: no exporter's cost in the figures.
const tracer = new BasicTracerProvider().getTracer("bench");
class Reader extends MetricReader {
  async onShutdown() {}
  async onForceFlush() {}
}
const reader = new Reader();
const meterProvider = new MeterProvider({ readers: [reader] });

const node = Object.freeze({ name: "bench", gpuIndex: 0, idleW: 60 });
/** One request, metered (open, 2 marks, close, result) or bare. */
const requestBody = (withMeter, i) =>
  benchRequest(withMeter ? () => Meter.forNode(node, { joulesPer1kHint: 4000 }) : null, i);

/** Event-loop active ms of `n` concurrent requests; the main thread's CPU ms in `lastCpuMs`. */
let lastCpuMs = Number.NaN;
async function round(n, { meter, span }) {
  const cpu = mainThreadCpuNs();
  const before = performance.eventLoopUtilization();
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      span
        ? tracer.startActiveSpan("POST /generate", async (s) => {
            await requestBody(meter, i);
            s.end();
          })
        : requestBody(meter, i),
    ),
  );
  const active = performance.eventLoopUtilization(before).active;
  const after = mainThreadCpuNs();
  lastCpuMs = cpu === null || after === null ? Number.NaN : (after - cpu) / 1e6;
  return active;
}

/** giul/otel's configurations measured: the default, and the two ways to make it cheaper. */
const VARIANTS = [
  {
    key: "default",
    label: "giul/otel subscribed (default: record on the span, a stage event per stage, metrics)",
    options: {},
  },
  { key: "noStages", label: "… with `stageEvents: false`", options: { stageEvents: false } },
  {
    key: "metricsOnly",
    label: "… with `spanAttributes: false` (metrics only)",
    options: { spanAttributes: false },
  },
];

async function otelRound(n, options) {
  const instrumentation = otelEntry.instrumentOpenTelemetry({ meterProvider, ...options });
  try {
    return await round(n, { meter: true, span: true });
  } finally {
    instrumentation.disable();
  }
}

const N = 1000;
// Warm up: the card probed, the sampler running, the SDK's code paths compiled.
const warm = await Meter.forNode(node).open();
await warm.close();
for (let i = 0; i < 3; i++) {
  await round(N, { meter: false, span: false });
  await round(N, { meter: true, span: false });
  if (otelEntry) {
    await round(N, { meter: true, span: true });
    for (const v of VARIANTS) await otelRound(N, v.options);
  }
}

const roundsArg = process.argv.indexOf("--rounds");
const rounds = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : quick ? 5 : 20;
if (!(Number.isInteger(rounds) && rounds > 0)) throw new Error("--rounds: a positive whole number");
const noSub = { elu: [], cpu: [] };
const added = Object.fromEntries(VARIANTS.map((v) => [v.key, { elu: [], cpu: [] }]));
const spanned = [];
const withDefault = [];
const collectUs = [];
for (let r = 0; r < rounds; r++) {
  const bare = await round(N, { meter: false, span: false });
  const bareCpu = lastCpuMs;
  const metered = await round(N, { meter: true, span: false });
  noSub.elu.push(((metered - bare) * 1000) / N);
  noSub.cpu.push(((lastCpuMs - bareCpu) * 1000) / N);
  if (!otelEntry) continue;
  // The same spanned, metered round with the instrumentation off and in each configuration, the
  // order reversed every other round; each configuration is paired with that round's "off".
  const order = [null, ...VARIANTS];
  if (r % 2 === 1) order.reverse();
  const got = new Map();
  for (const v of order) {
    const elu = v === null ? await round(N, { meter: true, span: true }) : await otelRound(N, v.options);
    got.set(v?.key ?? "off", { elu, cpu: lastCpuMs });
  }
  const off = got.get("off");
  for (const v of VARIANTS) {
    const on = got.get(v.key);
    added[v.key].elu.push(((on.elu - off.elu) * 1000) / N);
    added[v.key].cpu.push(((on.cpu - off.cpu) * 1000) / N);
  }
  spanned.push(off.elu);
  withDefault.push(got.get("default").elu);
  // A collection (what a scrape or an export interval costs, once, not per window).
  const instrumentation = otelEntry.instrumentOpenTelemetry({ meterProvider });
  const t0 = performance.now();
  await reader.collect();
  collectUs.push((performance.now() - t0) * 1000);
  instrumentation.disable();
}
rmSync(dir, { recursive: true, force: true });

if (asJson) {
  // One process's medians, for acrossProcesses().
  const byKey = Object.fromEntries(VARIANTS.map((v) => [v.key, median(added[v.key].cpu)]));
  console.log(JSON.stringify({ noSubscriber: median(noSub.cpu), ...(otelEntry ? byKey : {}) }));
  process.exit(0);
}

const f = (x) => x.toFixed(1);
const lines = [
  `## Exporters: per-window cost of the diagnostics channels and giul/otel`,
  ``,
  `Machine: ${cpus().length} × ${cpus()[0]?.model ?? "unknown"}, ${(totalmem() / 2 ** 30) | 0} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}; build: ${dist === join(root, "dist") ? "this checkout" : dist}.`,
  `Command: \`node bench/exporters.js${quick ? " --quick" : ""}${roundsArg > 0 ? ` --rounds ${rounds}` : ""}${withOtel ? "" : " --no-otel"}\` (run by \`npm run bench\` after bench/meter.js).`,
  ``,
  `µs per window (open + 2 marks + close + result) at ${N.toLocaleString("en")} concurrent windows, ${rounds} rounds; the`,
  `main thread's CPU time (schedstat) and event-loop active time (which also counts time spent waiting for a core):`,
  ``,
  `| what | main thread CPU: median µs | p90 µs | event loop active: median µs | p90 µs |`,
  `|---|---:|---:|---:|---:|`,
  `| metered, no subscriber (metered round − bare round) | ${f(median(noSub.cpu))} | ${f(pct(noSub.cpu, 90))} | ${f(median(noSub.elu))} | ${f(pct(noSub.elu, 90))} |`,
  ...(otelEntry
    ? [
        ...VARIANTS.map((v) => {
          const x = added[v.key];
          return `| ${v.label}: added per window, each request in an active span | ${f(median(x.cpu))} | ${f(pct(x.cpu, 90))} | ${f(median(x.elu))} | ${f(pct(x.elu, 90))} |`;
        }),
        ``,
        `Spanned metered rounds, median event-loop active ms: ${f(median(spanned))} without giul/otel, ${f(median(withDefault))} with it (default).`,
        `One metrics collection (cards read, histogram and counters exported): median ${f(median(collectUs))} µs.`,
      ]
    : []),
  ``,
];
console.log(lines.join("\n"));
process.exit(0);

/** Runs `count` processes of this bench with `args` (--json), and tabulates their medians. */
function acrossProcesses(count, args) {
  const runs = [];
  for (let i = 0; i < count; i++) {
    const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), ...args, "--json"], {
      encoding: "utf8",
      env: process.env,
      stdio: ["ignore", "pipe", "inherit"],
      maxBuffer: 1 << 20,
    });
    if (child.status !== 0)
      throw new Error(`exporters: process ${i + 1} of ${count} failed (${child.status})`);
    runs.push(JSON.parse(child.stdout.trim().split("\n").at(-1)));
  }
  const rows = [
    ["noSubscriber", "metered, no subscriber (metered round − bare round)"],
    ["default", "giul/otel subscribed (default): added per window"],
    ["noStages", "… with `stageEvents: false`: added per window"],
    ["metricsOnly", "… with `spanAttributes: false` (metrics only): added per window"],
  ].filter(([key]) => runs[0][key] !== undefined);
  const f = (x) => x.toFixed(1);
  return [
    `## Exporters: per-window cost of giul/otel, across processes`,
    ``,
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? "unknown"}, ${(totalmem() / 2 ** 30) | 0} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}; build: ${dist === join(root, "dist") ? "this checkout" : dist}.`,
    `Command: \`node bench/exporters.js ${[...args, "--processes", String(count)].join(" ")}\`. Main-thread CPU µs per window at`,
    `1,000 concurrent windows: each process's median over its rounds, and the median of those.`,
    ``,
    `| what | median of the processes | each process |`,
    `|---|---:|---|`,
    ...rows.map(([key, label]) => {
      const each = runs.map((r) => r[key]);
      return `| ${label} | ${f(median(each))} | ${each.map(f).join(", ")} |`;
    }),
    ``,
  ].join("\n");
}
