#!/usr/bin/env node
// npm "install" script. Never fails the install, and never builds what it does not need:
//   1. installed as a dependency, with an addon that loads (the prebuild for this platform, or one
//      an earlier install built): nothing to do, nothing compiled, nothing printed;
//   2. a development checkout (src/ and test/ beside scripts/): builds the addon and the test
//      doubles with cmake-js, unless they are built, and bundles src/ into dist/ (tsup), so that
//      `npm run demo`, the examples and the command-line tools run after `npm ci` alone;
//   3. otherwise, with a toolchain: builds the addon from source with cmake-js. A toolchain is cmake,
//      make or ninja, and a C++ compiler on PATH, and cmake-js and node-addon-api where this package
//      can resolve them (a consumer adds both: BUILD_FROM_SOURCE below);
//   4. otherwise: one line saying that giul runs on its pure-TS paths, what is missing, and the
//      command that builds the addon (the same advice giul-probe gives, src/sources/native/binding.ts).
// GIUL_SKIP_INSTALL_BUILD=1 skips all of it.
"use strict";

const { spawnSync } = require("node:child_process");
const { accessSync, constants, existsSync, statSync } = require("node:fs");
const { delimiter, isAbsolute, join, resolve } = require("node:path");

const root = resolve(__dirname, "..");
const target = `${process.platform}-${process.arch}`;

/** Keep in step with src/sources/native/binding.ts, whose advice giul-probe prints. */
const BUILD_FROM_SOURCE = "`npm install --save-dev cmake-js@8 node-addon-api@8 && npm rebuild giul`";

function onPath(name) {
  if (isAbsolute(name)) return existsSync(name) ? name : null;
  for (const dir of (process.env.PATH || "").split(delimiter)) {
    if (dir === "" || !isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    try {
      if (statSync(candidate).isFile()) {
        accessSync(candidate, constants.X_OK);
        return candidate;
      }
    } catch {
      // not here
    }
  }
  return null;
}

/** null when an addon loads, else why not (first line). */
function addonProblem() {
  try {
    require("node-gyp-build")(root);
    return null;
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error);
    return text.split("\n")[0];
  }
}

function resolves(name) {
  try {
    return require.resolve(`${name}/package.json`, { paths: [root] });
  } catch {
    return null;
  }
}

/** What a source build needs, and which of it is missing. */
function toolchain() {
  const missing = [];
  if (onPath("cmake") === null) missing.push("cmake");
  if (onPath("ninja") === null && onPath("make") === null) missing.push("make or ninja");
  const compilers = [process.env.CXX, "c++", "g++", "clang++"].filter(Boolean);
  if (!compilers.some((name) => onPath(name) !== null)) missing.push("a C++20 compiler");
  const system = missing.length;
  const cmakeJs = resolves("cmake-js");
  if (cmakeJs === null) missing.push("cmake-js");
  if (resolves("node-addon-api") === null) missing.push("node-addon-api");
  return {
    missing,
    system: missing.slice(0, system),
    cmakeJs: cmakeJs === null ? null : join(resolve(cmakeJs, ".."), "bin", "cmake-js"),
  };
}

function build(cmakeJs, args) {
  const result = spawnSync(process.execPath, [cmakeJs, "compile", "--out", "build", ...args], {
    cwd: root,
    stdio: "inherit",
  });
  return result.status === 0 ? null : result.error ? result.error.message : `exit ${result.status}`;
}

/** A checkout: the addon and the test doubles, unless built. */
function buildCheckout() {
  if (existsSync(join(root, "build", "Release", "giul.node"))) return;
  const tools = toolchain();
  if (tools.missing.length > 0 || tools.cmakeJs === null) {
    console.log(`giul: cannot build the addon and the test doubles (missing: ${tools.missing.join(", ")})`);
    return;
  }
  console.log("giul: building the addon and the test doubles with cmake-js");
  const failed = build(tools.cmakeJs, []);
  if (failed !== null)
    console.warn(`giul: the build failed (${failed}); fix it and run \`npm run build:native\``);
}

/** A checkout: dist/ from src/, every time (a pull may have changed src/); quiet unless it fails. */
function bundle() {
  if (resolves("tsup") === null) {
    console.log("giul: tsup is not installed (dev dependencies omitted?): dist/ not built");
    return;
  }
  console.log("giul: bundling src/ into dist/ (npm run build:ts)");
  const npm = process.env.npm_execpath;
  const [command, args] =
    npm !== undefined && /\.[cm]?js$/.test(npm)
      ? [process.execPath, [npm, "run", "build:ts"]]
      : ["npm", ["run", "build:ts"]];
  const result = spawnSync(command, args, { cwd: root, encoding: "utf8" });
  if (result.status !== 0) {
    process.stderr.write(`${result.stdout ?? ""}${result.stderr ?? ""}`);
    const why = result.error ? result.error.message : `exit ${result.status}`;
    console.warn(`giul: bundling failed (${why}); fix it and run \`npm run build:ts\``);
  }
}

const FALLBACK = "giul runs on its pure-TS paths (nvidia-smi, remote giul-agent)";

function main() {
  if (process.env.GIUL_SKIP_INSTALL_BUILD === "1") return;
  const checkout = existsSync(join(root, "src")) && existsSync(join(root, "test"));
  if (checkout) {
    buildCheckout();
    bundle();
    return;
  }

  const problem = addonProblem();
  if (problem === null) return;
  const why = existsSync(join(root, "prebuilds", target))
    ? `the prebuilt addon for ${target} does not load here (${problem})`
    : `no prebuilt addon for ${target} (prebuilds: linux-x64, linux-arm64, glibc)`;
  const tools = toolchain();
  if (tools.missing.length === 0 && tools.cmakeJs !== null) {
    console.log(`giul: ${why}; building it from source with cmake-js`);
    const failed = build(tools.cmakeJs, ["--CDGIUL_BUILD_TEST_DOUBLES=OFF"]);
    if (failed === null) return;
    console.warn(
      `giul: building the addon failed (${failed}); ${FALLBACK}. Fix the build and run \`npm rebuild giul\`.`,
    );
    return;
  }
  const first = tools.system.length > 0 ? `install ${tools.system.join(", ")}, then run` : "run";
  console.log(
    `giul: ${why}, and no toolchain to build one (missing: ${tools.missing.join(", ")}); ${FALLBACK}. ` +
      `To build the addon, ${first} ${BUILD_FROM_SOURCE}.`,
  );
}

try {
  main();
} catch (error) {
  console.warn(`giul: install step skipped (${error instanceof Error ? error.message : String(error)})`);
}
process.exitCode = 0;
