#!/usr/bin/env node
// npm "install" script. Never fails the install:
//   1. an addon already built (build/Release/giul.node) or a prebuild that loads: nothing to do;
//   2. a development checkout (cmake-js installed, cmake on PATH): build the addon and the test
//      doubles with cmake-js;
//   3. otherwise: say in one line that giul runs on its pure-TS paths, and exit 0.
// GIUL_SKIP_INSTALL_BUILD=1 skips all of it.
"use strict";

const { spawnSync } = require("node:child_process");
const { accessSync, constants, existsSync, statSync } = require("node:fs");
const { delimiter, isAbsolute, join, resolve } = require("node:path");

const root = resolve(__dirname, "..");

function onPath(name) {
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

function prebuildLoads() {
  try {
    require("node-gyp-build")(root);
    return true;
  } catch {
    return false;
  }
}

function cmakeJsBin() {
  try {
    return join(
      resolve(require.resolve("cmake-js/package.json", { paths: [root] }), ".."),
      "bin",
      "cmake-js",
    );
  } catch {
    return null;
  }
}

function main() {
  if (process.env.GIUL_SKIP_INSTALL_BUILD === "1") return;
  if (existsSync(join(root, "build", "Release", "giul.node"))) return;
  if (prebuildLoads()) return;
  const cmakeJs = cmakeJsBin();
  if (cmakeJs !== null && onPath("cmake") !== null) {
    console.log("giul: building the addon and the test doubles with cmake-js");
    const result = spawnSync(process.execPath, [cmakeJs, "compile", "--out", "build"], {
      cwd: root,
      stdio: "inherit",
    });
    if (result.status === 0) return;
    console.warn(
      `giul: building the addon failed (${result.error ? result.error.message : `exit ${result.status}`}); ` +
        "giul will run on its pure-TS paths (nvidia-smi, remote agent). Fix the build and run `npm run build:native`.",
    );
    return;
  }
  console.log(
    `giul: no prebuilt addon for ${process.platform}-${process.arch} and no toolchain to build one; ` +
      "giul will run on its pure-TS paths (nvidia-smi, remote giul-agent).",
  );
}

try {
  main();
} catch (error) {
  console.warn(`giul: install step skipped (${error instanceof Error ? error.message : String(error)})`);
}
process.exitCode = 0;
