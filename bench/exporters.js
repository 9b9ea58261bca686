#!/usr/bin/env node
// What the diagnostics channels and giul/otel cost the event loop, per window, at 1,000 concurrent
// windows on the native path (the libnvidia-ml test double).
//
// Each configuration runs in processes of its own, set up once as a server would be, for the
// process's life: no subscriber ("none"), or giul/otel subscribed with its default options, with
// `stageEvents: false`, or with `spanAttributes: false` (metrics only). Every request runs in an
// active span (the SDK's, recording, exported nowhere). Within a process, rounds of 1,000 metered
// requests (open, two marks, close, result) alternate with the same rounds bare, and the process's
// figure is the median over its rounds of the metered round's main-thread CPU less the bare one's,
// per window. A configuration's figure is the median of its processes'; what giul/otel adds is that
// less the "none" processes' figure. The processes of each configuration run interleaved.
//
// (Until the tenth session this benchmark subscribed and unsubscribed giul/otel within one
// process, round by round; a subscriber that does nothing then measured 2.3 µs a window, against
// 0.4 in processes subscribed for good: the alternation itself cost the rounds it measured.)
//
// Usage: npm run bench (bench/meter.js runs this last), or: npx tsup && node bench/exporters.js
//   [--quick] [--rounds N] [--processes P] [--no-otel]. P processes per configuration (default 5,
//   --quick 2); --no-otel runs the "none" configuration only. GIUL_BENCH_DIST=/other/checkout/dist
//   measures another build. Prints a Markdown section for bench/RESULTS.md.
//   --child CONFIG runs one process and prints its figures as JSON (what the parent runs).
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import { benchRequest, mainThreadCpuNs, median, squareWaveScenario } from "./lib.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const dist = process.env.GIUL_BENCH_DIST ?? join(root, "dist");
const argv = process.argv.slice(2);
const quick = argv.includes("--quick");
const numberAfter = (flag, fallback) => {
  const at = argv.indexOf(flag);
  if (at < 0) return fallback;
  const value = Number(argv[at + 1]);
  if (!(Number.isInteger(value) && value > 0)) throw new Error(`${flag}: a positive whole number`);
  return value;
};
const rounds = numberAfter("--rounds", quick ? 10 : 40);
const N = 1000;

/** The configurations: giul/otel's options in each ("none": not subscribed). */
const CONFIGS = {
  none: { label: "metered, no subscriber (metered round − bare round)", options: null },
  default: {
    label: "giul/otel subscribed (default: record on the span, a stage event per stage, metrics)",
    options: {},
  },
  noStages: { label: "… with `stageEvents: false`", options: { stageEvents: false } },
  metricsOnly: { label: "… with `spanAttributes: false` (metrics only)", options: { spanAttributes: false } },
  // Not giul/otel: what it asks of the SDK, asked directly at the end of each metered request with
  // fixed values (the histogram sample, the record's nine attributes, two stage events), giul not
  // subscribed. The floor under the default configuration's figure.
  sdkOnly: { label: "the SDK's own calls alone, made by the request (not giul/otel)", options: "sdk" },
};

const childAt = argv.indexOf("--child");
if (childAt >= 0) {
  const config = CONFIGS[argv[childAt + 1]];
  if (config === undefined) throw new Error(`--child: one of ${Object.keys(CONFIGS).join(", ")}`);
  console.log(JSON.stringify(await child(config.options)));
  process.exit(0);
}

const processes = numberAfter("--processes", quick ? 2 : 5);
const keys = argv.includes("--no-otel") ? ["none"] : Object.keys(CONFIGS);
const runs = Object.fromEntries(keys.map((k) => [k, []]));
const load = [loadavg()[0]];
for (let i = 0; i < processes; i++) {
  // Interleaved, starting one configuration further each time: a host growing busier weighs on all.
  for (let j = 0; j < keys.length; j++) {
    const key = keys[(i + j) % keys.length];
    const got = spawnSync(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), "--child", key, "--rounds", String(rounds)],
      {
        encoding: "utf8",
        env: process.env,
        stdio: ["ignore", "pipe", "inherit"],
        maxBuffer: 1 << 20,
      },
    );
    if (got.status !== 0) throw new Error(`exporters: the ${key} process failed (${got.status})`);
    runs[key].push(JSON.parse(got.stdout.trim().split("\n").at(-1)));
  }
  load.push(loadavg()[0]);
}

const f = (x) => x.toFixed(1);
const cpuOf = (key) => median(runs[key].map((r) => r.cpuUs));
const none = cpuOf("none");
const lines = [
  `## Exporters: per-window cost of giul/otel`,
  ``,
  `Machine: ${cpus().length} × ${cpus()[0]?.model ?? "unknown"}, ${(totalmem() / 2 ** 30) | 0} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}, load average ${Math.min(...load).toFixed(1)}–${Math.max(...load).toFixed(1)}; build: ${dist === join(root, "dist") ? "this checkout" : dist}.`,
  `Command: \`node bench/exporters.js ${argv.join(" ")}\`. ${processes} processes per configuration, interleaved, ${rounds} rounds each of`,
  `${N.toLocaleString("en")} concurrent requests in active spans: main-thread CPU µs per window, the metered round less the bare round,`,
  `each process's median over its rounds; "added" is a configuration's median of those less the unsubscribed processes',`,
  `with a 90 % interval from resampling the processes (one process's figure moves by several µs on a shared host).`,
  ``,
  `| configuration | median µs | added µs | added, 90 % interval | each process |`,
  `|---|---:|---:|---:|---|`,
  ...keys.map((key) => {
    const cpu = cpuOf(key);
    const each = runs[key].map((r) => r.cpuUs);
    const added = key === "none" ? "" : f(cpu - none);
    const interval =
      key === "none"
        ? ""
        : addedInterval(
            each,
            runs.none.map((r) => r.cpuUs),
          )
            .map(f)
            .join(" – ");
    return `| ${CONFIGS[key].label} | ${f(cpu)} | ${added} | ${interval} | ${each.map(f).join(", ")} |`;
  }),
  ``,
  ...(runs.default
    ? [
        `One metrics collection (cards read, histogram and counters exported): median ${f(median(runs.default.map((r) => r.collectUs)))} µs.`,
        ``,
      ]
    : []),
];
console.log(lines.join("\n"));
process.exit(0);

/**
 * The 5th and 95th percentiles of median(with) − median(without) over 2,000 resamplings of each
 * side's processes (with replacement; a fixed seed, so that a run's table reads the same twice).
 */
function addedInterval(withIt, without) {
  let seed = 0x9e3779b9;
  const random = () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const resample = (xs) => xs.map(() => xs[Math.floor(random() * xs.length)]);
  const diffs = Array.from({ length: 2000 }, () => median(resample(withIt)) - median(resample(without)));
  diffs.sort((a, b) => a - b);
  return [diffs[Math.floor(diffs.length * 0.05)], diffs[Math.floor(diffs.length * 0.95)]];
}

/** One process: giul/otel with `options` (null: not subscribed) for its life, then the rounds. */
async function child(options) {
  const dir = mkdtempSync(join(tmpdir(), "giul-bench-exporters-"));
  squareWaveScenario(dir);
  process.env.GIUL_NVML_LIBRARY ??= join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1");
  const { Meter } = await import(pathToFileURL(join(dist, "index.js")).href);
  const { context } = await import("@opentelemetry/api");
  const { AsyncLocalStorageContextManager } = await import("@opentelemetry/context-async-hooks");
  const { MeterProvider, MetricReader } = await import("@opentelemetry/sdk-metrics");
  const { BasicTracerProvider } = await import("@opentelemetry/sdk-trace-base");

  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  // Spans record (attributes and events are kept) but go nowhere: no exporter's cost in the figures.
  const tracer = new BasicTracerProvider().getTracer("bench");
  class Reader extends MetricReader {
    async onShutdown() {}
    async onForceFlush() {}
  }
  const reader = new Reader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const sdkCalls = options === "sdk" ? sdkCallsOf(meterProvider) : null;
  if (options !== null && options !== "sdk") {
    const { instrumentOpenTelemetry } = await import(pathToFileURL(join(dist, "otel.js")).href);
    instrumentOpenTelemetry({ meterProvider, ...options });
  }

  const node = Object.freeze({ name: "bench", gpuIndex: 0, idleW: 60 });
  const forNode = () => Meter.forNode(node, { joulesPer1kHint: 4000 });
  /** Main-thread CPU ms of `n` concurrent requests in active spans, metered or bare. */
  async function round(n, metered) {
    const cpu = mainThreadCpuNs();
    await Promise.all(
      Array.from({ length: n }, (_, i) =>
        tracer.startActiveSpan("POST /generate", async (s) => {
          await benchRequest(metered ? forNode : null, i);
          if (metered && sdkCalls !== null) sdkCalls(s);
          s.end();
        }),
      ),
    );
    const after = mainThreadCpuNs();
    return cpu === null || after === null ? Number.NaN : (after - cpu) / 1e6;
  }

  // Warm up: the card probed, the sampler running, the SDK's and giul's code paths compiled.
  const warm = await Meter.forNode(node).open();
  await warm.close();
  for (let i = 0; i < 3; i++) {
    await round(N, false);
    await round(N, true);
  }
  const cpuUs = [];
  const collectUs = [];
  for (let r = 0; r < rounds; r++) {
    // The order reversed every other round.
    const first = await round(N, r % 2 === 0);
    const second = await round(N, r % 2 !== 0);
    const [metered, bare] = r % 2 === 0 ? [first, second] : [second, first];
    cpuUs.push(((metered - bare) * 1000) / N);
    // A collection (what a scrape or an export interval costs, once, not per window).
    const t0 = performance.now();
    await reader.collect();
    collectUs.push((performance.now() - t0) * 1000);
  }
  rmSync(dir, { recursive: true, force: true });
  return { cpuUs: median(cpuUs), collectUs: median(collectUs) };
}

/** The SDK calls giul/otel's default makes for one window, with fixed values, on `span`. */
function sdkCallsOf(meterProvider) {
  const histogram = meterProvider.getMeter("bench").createHistogram("giul.request.energy", { unit: "J" });
  const labels = Object.freeze({
    "giul.energy.method": "sampled",
    "giul.energy.backend": "nvml_counter",
    "giul.node": "bench",
  });
  const stage = (name, joules) =>
    Object.freeze({
      "giul.stage.name": name,
      "giul.energy.method": "sampled",
      "giul.energy.joules": joules,
      "giul.energy.uncertainty_joules": 0.1,
    });
  const retrieve = stage("retrieve", 1.5);
  const generate = stage("generate", 2.5);
  return (span) => {
    histogram.record(4, labels);
    span.setAttribute("giul.energy.method", "sampled");
    span.setAttribute("giul.energy.backend", "nvml_counter");
    span.setAttribute("giul.energy.attribution", "shared");
    span.setAttribute("giul.energy.contended", false);
    span.setAttribute("giul.node", "bench");
    span.setAttribute("giul.energy.joules", 4);
    span.setAttribute("giul.energy.uncertainty_joules", 0.2);
    span.setAttribute("giul.energy.card_joules", 40);
    span.setAttribute("giul.energy.tokens", 100);
    const now = Date.now();
    span.addEvent("giul.stage", retrieve, [Math.floor(now / 1000), 1000]);
    span.addEvent("giul.stage", generate, [Math.floor(now / 1000), 2000]);
  };
}
