// What the benchmarks share: the test double's square-wave card, the request they meter, their
// quantiles, and running a TypeScript entry without a loader.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

/**
 * Writes the benchmarks' scenario into `dir` and points the libnvidia-ml test double at it: a card
 * drawing 300 W with a 100 W swing every 50 ms, for an hour from now. `device` adds keys to the
 * device line (e.g. "power_mode=instant"), `latencyUs` makes every NVML call sleep that long.
 */
export function squareWaveScenario(dir, { device = "", latencyUs = 0, cards = 1 } = {}) {
  const scenario = join(dir, "scenario.txt");
  const pts = [];
  for (let t = 0; t < 3_600_000; t += 50)
    pts.push(`${t} ${t % 100 === 0 ? 300 : 400}`, `${t + 49.9} ${t % 100 === 0 ? 300 : 400}`);
  const latency = latencyUs > 0 ? `latency_us ${latencyUs}\n` : "";
  writeFileSync(
    scenario,
    `t0_ns ${process.hrtime.bigint()}\n${latency}` +
      Array.from(
        { length: cards },
        (_, i) => `device ${i} counter_step_ms=10 ${device}\npower ${i} ${pts.join(" ")}\n`,
      ).join(""),
  );
  process.env.GIUL_FAKE_NVML_SCENARIO = scenario;
  return scenario;
}

/**
 * Bundles a TypeScript entry with esbuild (tsup's) into a temporary folder in `beside` and imports
 * it; the folder is removed on the way out, also when the entry ends with process.exit().
 */
export async function runBundled(entry, beside) {
  const dir = mkdtempSync(join(beside, ".giul-bench-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  const outfile = join(dir, "entry.mjs");
  // Loaded here, not at the top: the benchmarks that only write a scenario run without esbuild
  // (scripts/gpu-check.sh carries no node_modules but node-gyp-build).
  const { build } = await import("esbuild");
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile,
    logLevel: "error",
  });
  await import(pathToFileURL(outfile).href);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Throws unless `backend` is the native addon's: a build that did not load it (a dist with none
 * beside it, and no GIUL_ADDON_PATH) would be measured on another backend, far cheaper, unsaid.
 */
export function expectNative(backend, dist) {
  if (!String(backend).startsWith("nvml_"))
    throw new Error(`${dist}: windows are metered by ${backend}, not the native addon (set GIUL_ADDON_PATH)`);
}

/**
 * The main thread's CPU time so far (ns), from /proc/self/task/<pid>/schedstat: what the event
 * loop actually ran, without the time it sat runnable while other processes had the cores (which
 * event-loop utilization counts as active, and which a loaded host inflates many times); null
 * where the file is not there.
 */
export function mainThreadCpuNs() {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8").split(" ")[0]);
  } catch {
    return null;
  }
}

/** The p-th percentile of xs (the sorted value at floor(n × p / 100)); NaN when empty. */
export function pct(xs, p) {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))];
}

export const median = (xs) => pct(xs, 50);

/** GIUL_BENCH_EXTRA_WORK_MS, read once: an environment read inside the measured loop costs both variants. */
const EXTRA_WORK_MS = Number(process.env.GIUL_BENCH_EXTRA_WORK_MS ?? 0);

/**
 * One request as the benchmarks run it: 5–24 ms of work (GIUL_BENCH_EXTRA_WORK_MS more), a mark,
 * 5 ms, a mark, then close and result. `meter` makes the request's Meter (then opened first), or is
 * null for the same request bare. With `closeMs`, a Meter's close latency is pushed there: ms from
 * its closing edge to close() resolving.
 */
export async function benchRequest(meter, i, closeMs = null) {
  const m = meter === null ? null : await meter().open();
  await sleep(5 + (i % 20) + EXTRA_WORK_MS);
  m?.mark("retrieve");
  await sleep(5);
  m?.mark("generate");
  if (m) {
    await m.close();
    if (closeMs !== null) {
      const resolved = process.hrtime.bigint();
      const edge = m.edgeTimes().close;
      if (edge !== null) closeMs.push(Number(resolved - edge) / 1e6);
    }
    m.result({ tokens: 100 });
  }
}

/**
 * The addon (GIUL_ADDON_PATH, else the build of the checkout at `root`) with NVML initialised, for
 * the benchmarks that call it directly. Throws where NVML does not load.
 */
export async function nativeAddon(root) {
  const require = createRequire(import.meta.url);
  const addon = process.env.GIUL_ADDON_PATH
    ? require(process.env.GIUL_ADDON_PATH)
    : require("node-gyp-build")(root);
  const init = await addon.nvmlInit();
  if (init.ok === false) throw new Error(`nvmlInit: ${init.reason}`);
  return addon;
}

/**
 * A folder of its own for a benchmark (`name`), the square-wave scenario written there, and the
 * test double of this checkout (`root`) as the NVML library unless GIUL_NVML_LIBRARY names another.
 * Remove the folder at the end.
 */
export function benchScenario(root, name) {
  const dir = mkdtempSync(join(tmpdir(), `giul-bench-${name}-`));
  squareWaveScenario(dir);
  process.env.GIUL_NVML_LIBRARY ??= join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1");
  return dir;
}

/** The number after `flag` on the command line, or `fallback`. */
export function numberArg(flag, fallback) {
  const at = process.argv.indexOf(flag);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
}
