/**
 * vitest globalSetup: makes sure what the suites run against exists and is newer than its sources
 * (the addon in build/Release, the test doubles in build/test-doubles, the bundle in dist/), and
 * builds whatever is missing or stale, once per run. Fast when everything is up to date: it only
 * compares modification times.
 *
 * GIUL_TEST_NO_BUILD=1 skips it; GIUL_ADDON_PATH / GIUL_TEST_DOUBLES_DIR (someone's own build)
 * skip the addon / the doubles.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, renameSync, rmSync, statSync, utimesSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { withLock } from "./fakes/lock.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

function newest(paths: readonly string[], pattern: RegExp): number {
  let latest = 0;
  for (const path of paths) {
    let stat: ReturnType<typeof statSync>;
    try {
      stat = statSync(path);
    } catch {
      continue;
    }
    if (stat.isDirectory()) {
      const children = readdirSync(path).map((name) => join(path, name));
      latest = Math.max(latest, newest(children, pattern));
    } else if (pattern.test(path)) {
      latest = Math.max(latest, stat.mtimeMs);
    }
  }
  return latest;
}

/** The oldest of the outputs, or 0 when one is missing. */
function oldest(paths: readonly string[]): number {
  let earliest = Number.POSITIVE_INFINITY;
  for (const path of paths) {
    if (!existsSync(path)) return 0;
    earliest = Math.min(earliest, statSync(path).mtimeMs);
  }
  return earliest;
}

function run(what: string, command: string, args: readonly string[]): boolean {
  const started = Date.now();
  process.stderr.write(`global-setup: ${what}\n`);
  const result = spawnSync(command, args, { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
  if (result.status !== 0) {
    // Warn rather than stop the run: the suites that need this output fail with their own message.
    process.stderr.write(
      `global-setup: ${what} FAILED (${result.error?.message ?? `exit ${result.status}`}); run it by hand: ${[command, ...args].join(" ")}\n`,
    );
    return false;
  }
  process.stderr.write(`global-setup: ${what}: done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  return true;
}

function nativeOutputs(): string[] {
  const outputs: string[] = [];
  if (process.env.GIUL_ADDON_PATH === undefined) outputs.push(join(ROOT, "build", "Release", "giul.node"));
  if (process.env.GIUL_TEST_DOUBLES_DIR === undefined) {
    const doubles = join(ROOT, "build", "test-doubles");
    if (existsSync(join(ROOT, "test", "fakes", "nvml", "fake_nvml.c"))) {
      outputs.push(
        join(doubles, "current", "libnvidia-ml.so.1"),
        join(doubles, "legacy", "libnvidia-ml.so.1"),
      );
    }
    if (existsSync(join(ROOT, "test", "fakes", "smi", "nvidia_smi.c"))) {
      outputs.push(join(doubles, "bin", "nvidia-smi"));
    }
  }
  return outputs;
}

function nativeStale(outputs: readonly string[]): boolean {
  if (outputs.length === 0) return false;
  const sources = newest(
    [join(ROOT, "native"), join(ROOT, "test", "fakes"), join(ROOT, "CMakeLists.txt")],
    /(\.(cc|h|c)|CMakeLists\.txt)$/,
  );
  return oldest(outputs) < sources;
}

function distStale(): boolean {
  const outputs = ["index.js", "index.cjs", "index.d.ts", "index.d.cts", "cli/probe.js"].map((file) =>
    join(ROOT, "dist", file),
  );
  const sources = newest(
    [join(ROOT, "src"), join(ROOT, "binding.d.ts"), join(ROOT, "tsup.config.ts"), join(ROOT, "package.json")],
    /\.(ts|json)$/,
  );
  return oldest(outputs) < sources;
}

/**
 * Bundles into a staging folder beside dist/ (same depth as dist/)
 * and swaps it in. tsup's `clean` would otherwise leave dist/ empty for the whole build, and
 * another vitest run in this checkout that is using dist/ at that moment fails with "Cannot find
 * module dist/index.js" (seen with several people testing in one checkout).
 */
function bundleDist(): void {
  const dist = join(ROOT, "dist");
  const staging = join(ROOT, `.dist-staging-${process.pid}`);
  const old = join(ROOT, `.dist-old-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  const built = run("bundling src/ into dist/ (tsup)", process.execPath, [
    join(ROOT, "node_modules", "tsup", "dist", "cli-default.js"),
    "--out-dir",
    staging,
  ]);
  if (built) {
    if (existsSync(dist)) renameSync(dist, old);
    renameSync(staging, dist);
  }
  rmSync(staging, { recursive: true, force: true });
  rmSync(old, { recursive: true, force: true });
}

export async function setup(): Promise<void> {
  if (process.env.GIUL_TEST_NO_BUILD === "1") return;
  const outputs = nativeOutputs();
  const native = nativeStale(outputs);
  const dist = distStale();
  if (!native && !dist) return;
  // Serialises builds between vitest runs started at the same time in this checkout.
  await withLock(join(ROOT, "build", ".global-setup.lock"), 10 * 60_000, () => {
    // Another run may have built while this one waited.
    if (nativeStale(outputs)) {
      const cmakeJs = join(ROOT, "node_modules", "cmake-js", "bin", "cmake-js");
      const built = run("building the addon and the test doubles (cmake-js build)", process.execPath, [
        cmakeJs,
        "build",
        "--out",
        "build",
      ]);
      // ninja relinks only what changed; mark every output as current so the next run skips the build.
      const now = new Date();
      if (built) for (const output of outputs) if (existsSync(output)) utimesSync(output, now, now);
    }
    if (distStale()) bundleDist();
  });
}
