#!/usr/bin/env node
// `npm run prebuild` (and so `npm pack` / `npm publish`, through prepack): the two prebuilds every
// tarball carries, prebuilds/linux-x64/giul.glibc.node and prebuilds/linux-arm64/giul.glibc.node,
// made by prebuildify (N-API, stripped, tagged glibc so that node-gyp-build never offers them to a
// musl Node) through scripts/prebuildify-gyp.cjs, then checked by scripts/check-prebuilds.cjs. Any
// failure fails the command: a tarball without both prebuilds cannot be packed by accident.
//
// Needs, besides the development dependencies: cmake, ninja or make, g++ for x86_64 and for aarch64
// (Debian/Ubuntu: g++ and g++-aarch64-linux-gnu), binutils, tar and xz. The glibc 2.17 sysroots come
// from the npm registry (scripts/npm-tool.cjs).
"use strict";

const { spawnSync } = require("node:child_process");
const { rmSync } = require("node:fs");
const { join, resolve } = require("node:path");
const { checkPrebuilds } = require("./check-prebuilds.cjs");

const root = resolve(__dirname, "..");
const gnu = { x64: "x86_64-linux-gnu", arm64: "aarch64-linux-gnu" };

function run(args) {
  const result = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit" });
  return result.status === 0;
}

function main() {
  rmSync(join(root, "prebuilds"), { recursive: true, force: true });
  const prebuildify = join(
    resolve(require.resolve("prebuildify/package.json", { paths: [root] }), ".."),
    "bin.js",
  );
  let ok = true;
  try {
    for (const arch of Object.keys(gnu)) {
      console.log(`prebuild: linux-${arch}`);
      ok = run([
        prebuildify,
        "--napi",
        "--strip",
        "--tag-libc",
        "--platform",
        "linux",
        "--arch",
        arch,
        "--strip-bin",
        `${gnu[arch]}-strip`,
        "--node-gyp",
        join(root, "scripts", "prebuildify-gyp.cjs"),
      ]);
      if (!ok) {
        console.error(`prebuild: linux-${arch} failed`);
        break;
      }
    }
  } finally {
    run([join(root, "scripts", "prebuildify-gyp.cjs"), "--restore"]);
  }
  if (!ok) return 1;
  const result = checkPrebuilds(root);
  for (const line of result.lines) console.log(`prebuild: ${line}`);
  for (const problem of result.problems) console.error(`prebuild: ${problem}`);
  return result.problems.length === 0 ? 0 : 1;
}

process.exitCode = main();
