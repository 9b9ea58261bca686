/**
 * A fresh clone runs in the README's two commands: `npm ci` (which builds the addon, the test
 * doubles and dist/ through the install script), then `npm run demo`; the examples run after
 * `npm ci` alone. The clone is what git hands a new user: the repository's files, tracked and not
 * ignored, copied into a temporary folder (with the work in progress, as CI's clean clone has it).
 * npm ci is asked to prefer the local npm cache (CI filled it with its own npm ci). Slow: an install
 * and a build, about 40 s on a 2-core host.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "./fakes/paths.js";

const git = spawnSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
  cwd: ROOT,
  encoding: "utf8",
});
const inGit = git.status === 0 && git.stdout.length > 0;
if (!inGit) process.stderr.write("clone.test: skipped: not a git checkout (git ls-files failed)\n");

const clone = mkdtempSync(join(tmpdir(), "giul-clone-"));
afterAll(() => rmSync(clone, { recursive: true, force: true }));

/** Without the variables this test run set for itself (a forced backend, a build to use). */
function userEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env))
    if (key.startsWith("GIUL_") || key.startsWith("VITEST")) delete env[key];
  return env;
}

function sh(command: string, args: string[], timeout = 300_000) {
  return spawnSync(command, args, { cwd: clone, encoding: "utf8", env: userEnv(), timeout });
}

let install: ReturnType<typeof sh>;

beforeAll(() => {
  if (!inGit) return;
  for (const file of git.stdout.split("\0")) {
    if (file === "" || !existsSync(join(ROOT, file))) continue; // deleted, not yet committed
    mkdirSync(dirname(join(clone, file)), { recursive: true });
    copyFileSync(join(ROOT, file), join(clone, file));
  }
  install = sh("npm", ["ci", "--prefer-offline", "--no-audit", "--no-fund"]);
}, 400_000);

describe.runIf(inGit)("a fresh clone", () => {
  it("npm ci installs, builds the addon and the test doubles, and bundles dist/", () => {
    expect(install.status, `${install.stdout}\n${install.stderr}`).toBe(0);
    for (const built of [
      "build/Release/giul.node",
      "build/test-doubles/current/libnvidia-ml.so.1",
      "dist/index.js",
      "dist/cli/probe.js",
    ])
      expect(existsSync(join(clone, built)), built).toBe(true);
  });

  it("npm run demo meters three overlapping requests, each as long as the demo makes it", () => {
    const demo = sh("npm", ["run", "--silent", "demo", "--", "--json"], 60_000);
    expect(demo.status, demo.stderr).toBe(0);
    const records = JSON.parse(demo.stdout) as { method: string; seconds: number }[];
    expect(records.map((e) => e.method)).toEqual(["sampled", "sampled", "sampled"]);
    // The demo's requests last 60 ms of prefill and 200, 240, 280 ms of decode (src/cli/probe.ts).
    records.forEach((e, i) => {
      expect(e.seconds).toBeGreaterThanOrEqual(0.26 + 0.04 * i - 0.002);
      expect(e.seconds).toBeLessThan(0.26 + 0.04 * i + 0.25);
    });
  });

  it("examples/quick-start.mjs runs after npm ci alone, and says why a host without a GPU measures nothing", () => {
    const run = sh(process.execPath, ["examples/quick-start.mjs"], 60_000);
    expect(run.status, run.stderr).toBe(0);
    const [line, json] = run.stdout.trim().split("\n");
    expect(line).toMatch(/^(unknown|estimated) /);
    expect(JSON.parse(json as string).reason).toEqual(expect.any(String));
  });
});
