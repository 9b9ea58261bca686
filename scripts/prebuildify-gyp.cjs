#!/usr/bin/env node
// Stands in for node-gyp under prebuildify (`prebuildify --node-gyp scripts/prebuildify-gyp.cjs`).
// prebuildify runs `<this> rebuild --target=<node version> --devdir=<cache> --arch=<arch>
// --release|--debug` in the package root, then takes the first *.node in build/Release (it moves
// it into prebuilds/<platform>-<arch>/, and strips it with --strip).
//
// The addon is built with cmake-js in its own folder (build/prebuild-<arch>, without the test
// doubles, Node-API headers from the node-api-headers package, so no download), with the toolchain
// of the published prebuilds: scripts/toolchain/linux-<arch>.cmake, the host's GCC against a glibc
// 2.17 sysroot (fetched from the npm registry by scripts/npm-tool.cjs), libstdc++ static
// (GIUL_PORTABLE). It is then copied to build/Release/giul.node for prebuildify to take. A
// development build already there is kept aside and put back by `<this> --restore`
// (scripts/prebuild.cjs does, whatever happened).
"use strict";

const { spawnSync } = require("node:child_process");
const { copyFileSync, existsSync, mkdirSync, renameSync } = require("node:fs");
const { join, resolve } = require("node:path");
const { toolPath } = require("./npm-tool.cjs");

const root = resolve(__dirname, "..");
const release = join(root, "build", "Release");
const devAddon = join(release, "giul.node");
const keptAside = join(root, "build", "giul.node.development");

function fail(message) {
  console.error(`prebuildify-gyp: ${message}`);
  process.exit(1);
}

function restore() {
  if (existsSync(keptAside)) {
    mkdirSync(release, { recursive: true });
    if (!existsSync(devAddon)) renameSync(keptAside, devAddon);
  }
}

function rebuild(args) {
  const option = (name) => {
    const hit = args.find((arg) => arg.startsWith(`--${name}=`));
    return hit === undefined ? undefined : hit.slice(name.length + 3);
  };
  const debug = args.includes("--debug");
  const arch = option("arch") ?? process.arch;
  if (arch !== "x64" && arch !== "arm64") fail(`no prebuild toolchain for linux-${arch}`);
  const outDir = join(root, "build", `prebuild-${arch}`);
  let sysroot;
  try {
    sysroot = toolPath(`sysroot-${arch}`);
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  const cmakeJs = join(
    resolve(require.resolve("cmake-js/package.json", { paths: [root] }), ".."),
    "bin",
    "cmake-js",
  );
  const cmakeArgs = [
    cmakeJs,
    "rebuild",
    "--out",
    outDir,
    "--arch",
    arch,
    "--CDGIUL_BUILD_TEST_DOUBLES=OFF",
    "--CDGIUL_PORTABLE=ON",
    `--CDCMAKE_TOOLCHAIN_FILE=${join(root, "scripts", "toolchain", `linux-${arch}.cmake`)}`,
    `--CDGIUL_SYSROOT=${sysroot}`,
  ];
  if (debug) cmakeArgs.push("--debug");
  const result = spawnSync(process.execPath, cmakeArgs, { cwd: root, stdio: "inherit" });
  if (result.status !== 0)
    fail(`cmake-js exited with ${result.error ? result.error.message : result.status}`);

  // CMakeLists.txt puts the addon in <out>/Release whatever the configuration.
  const built = join(outDir, "Release", "giul.node");
  if (!existsSync(built)) fail(`cmake-js succeeded but ${built} is missing`);
  mkdirSync(release, { recursive: true });
  if (existsSync(devAddon) && !existsSync(keptAside)) renameSync(devAddon, keptAside);
  copyFileSync(built, devAddon);
}

const [command, ...rest] = process.argv.slice(2);
if (command === "--restore") restore();
else if (command === "rebuild") rebuild(rest);
else fail(`unsupported command ${JSON.stringify(command)} (prebuildify only asks for "rebuild")`);
