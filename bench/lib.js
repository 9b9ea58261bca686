// What the benchmarks share: the test double's square-wave card, and running a TypeScript entry
// without a loader.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

/**
 * Writes the benchmarks' scenario into `dir` and points the libnvidia-ml test double at it: a card
 * drawing 300 W with a 100 W swing every 50 ms, for an hour from now. `device` adds keys to the
 * device line (e.g. "power_mode=instant"), `latencyUs` makes every NVML call sleep that long.
 */
export function squareWaveScenario(dir, { device = "", latencyUs = 0 } = {}) {
  const scenario = join(dir, "scenario.txt");
  const pts = [];
  for (let t = 0; t < 3_600_000; t += 50)
    pts.push(`${t} ${t % 100 === 0 ? 300 : 400}`, `${t + 49.9} ${t % 100 === 0 ? 300 : 400}`);
  const latency = latencyUs > 0 ? `latency_us ${latencyUs}\n` : "";
  writeFileSync(
    scenario,
    `t0_ns ${process.hrtime.bigint()}\n${latency}device 0 counter_step_ms=10 ${device}\npower 0 ${pts.join(" ")}\n`,
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
