#!/usr/bin/env node
// Runs clang-tidy (the checks in .clang-tidy) over native/*.cc, with the compile commands that
// `cmake-js configure` writes into build/tidy. Optional: where clang-tidy is not installed this
// says it skipped and exits 0, so it is `npm run tidy` and not part of `npm run lint` or CI.
// CLANG_TIDY names the binary to use; JOBS how many files to check at once (default: the CPUs).
"use strict";

const { spawn, spawnSync } = require("node:child_process");
const { existsSync, readdirSync } = require("node:fs");
const { availableParallelism, cpus } = require("node:os");
const { join, relative, resolve } = require("node:path");

const root = resolve(__dirname, "..");
const buildDir = join(root, "build", "tidy");

function findClangTidy() {
  const candidates = process.env.CLANG_TIDY
    ? [process.env.CLANG_TIDY]
    : ["clang-tidy", ...Array.from({ length: 10 }, (_, i) => `clang-tidy-${20 - i}`)];
  for (const candidate of candidates) {
    const probe = spawnSync(candidate, ["--version"], { encoding: "utf8" });
    if (probe.status === 0) return candidate;
  }
  return null;
}

const files = readdirSync(join(root, "native"))
  .filter((name) => name.endsWith(".cc"))
  .sort()
  .map((name) => join(root, "native", name));

if (files.length === 0) {
  console.log("clang-tidy: no C++ sources to check");
  process.exit(0);
}

const clangTidy = findClangTidy();
if (clangTidy === null) {
  console.log(
    "clang-tidy: not found, so nothing was checked (skipped). Install it (Debian/Ubuntu: " +
      "`apt-get install clang-tidy`) or set CLANG_TIDY to its path.",
  );
  process.exit(0);
}

// The compile commands of the addon alone (no test doubles), configured afresh each run so that a
// new source file is always in them. Configuring takes about a second; nothing is compiled.
let cmakeJs;
try {
  cmakeJs = require.resolve("cmake-js/bin/cmake-js", { paths: [root] });
} catch {
  console.error("clang-tidy: cmake-js is not installed; run `npm install` first.");
  process.exit(1);
}
const configure = spawnSync(
  process.execPath,
  [
    cmakeJs,
    "configure",
    "--out",
    relative(root, buildDir),
    "--CDCMAKE_EXPORT_COMPILE_COMMANDS=ON",
    "--CDGIUL_BUILD_TEST_DOUBLES=OFF",
  ],
  { cwd: root, encoding: "utf8" },
);
if (configure.status !== 0 || !existsSync(join(buildDir, "compile_commands.json"))) {
  console.error(`clang-tidy: cmake-js configure failed:\n${configure.stdout}${configure.stderr}`);
  process.exit(1);
}

function tidy(file) {
  return new Promise((done) => {
    const child = spawn(clangTidy, ["-p", buildDir, "--quiet", file], { cwd: root });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += chunk;
    });
    child.stderr.on("data", (chunk) => {
      output += chunk;
    });
    child.on("error", (error) => done({ file, status: 1, output: String(error) }));
    child.on("close", (status) => done({ file, status, output }));
  });
}

async function main() {
  const jobs = Number(process.env.JOBS) || (availableParallelism?.() ?? cpus().length);
  const queue = [...files];
  const failed = [];
  const worker = async () => {
    for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
      const result = await tidy(file);
      if (result.status !== 0) {
        failed.push(relative(root, file));
        // "N warnings generated." counts what --quiet hid in system headers: noise.
        const text = result.output
          .split("\n")
          .filter((line) => !/^\d+ warnings? (and \d+ errors? )?generated\.$/.test(line))
          .join("\n")
          .trim();
        console.error(text);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, jobs) }, worker));
  if (failed.length > 0) {
    console.error(
      `clang-tidy: ${failed.length} of ${files.length} file(s) with findings: ${failed.sort().join(", ")}`,
    );
    process.exit(1);
  }
  console.log(`clang-tidy: ${files.length} file(s) clean`);
}

main();
