#!/usr/bin/env node
// Checks the prebuilds before they are packed (prepack runs it through scripts/prebuild.cjs):
//   node scripts/check-prebuilds.cjs [package root]   (default: this checkout)
// Exits 1, naming every problem, unless prebuilds/ holds exactly one file for each of linux-x64 and
// linux-arm64, each an ELF shared object for its machine that
//   - needs no glibc symbol version newer than GLIBC_2.28 (RHEL/Rocky 8; Ubuntu 20.04 is 2.31),
//   - needs no libstdc++ at all (no GLIBCXX_ or CXXABI_ version, no libstdc++.so.6: it is linked
//     statically) and no libgcc_s version newer than GCC_7.0.0,
//   - needs no shared library outside glibc's own and libgcc_s,
//   - leaves no symbol unresolved without a version except Node-API's (napi_*, node_api_*), which
//     Node provides: an unversioned reference to a newer glibc's symbol would only fail when it is
//     first called,
//   - exports nothing but the two Node-API entry points.
// Reads the files with binutils' readelf, which reads every architecture's ELF.
"use strict";

const { spawnSync } = require("node:child_process");
const { readdirSync, statSync } = require("node:fs");
const { join, relative, resolve } = require("node:path");

/** The prebuilds every tarball carries: folder under prebuilds/ → readelf's name of the machine. */
const TARGETS = { "linux-x64": "Advanced Micro Devices X86-64", "linux-arm64": "AArch64" };
const GLIBC_FLOOR = "2.28";
const GCC_FLOOR = "7.0.0";
const SYSTEM_LIBRARIES = new Set([
  "libc.so.6",
  "libm.so.6",
  "libdl.so.2",
  "libpthread.so.0",
  "librt.so.1",
  "libgcc_s.so.1",
  "ld-linux-x86-64.so.2",
  "ld-linux-aarch64.so.1",
]);
const ENTRY_POINTS = ["napi_register_module_v1", "node_api_module_get_api_version_v1"];
const NODE_API = /^(napi_|node_api_)/;

function readelf(args, file) {
  const result = spawnSync("readelf", ["-W", ...args, file], { encoding: "utf8" });
  if (result.status !== 0) {
    throw new Error(
      `readelf ${args.join(" ")} ${file}: ${result.error ? result.error.message : result.stderr.trim()} (readelf is in binutils)`,
    );
  }
  return result.stdout;
}

/** "2.17" vs "2.28" → negative, zero or positive. */
function compareVersions(a, b) {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * What a shared object needs and exports, as readelf reports it: `versions` are the symbol versions
 * it needs (.gnu.version_r, `readelf -V`), by prefix (GLIBC, GLIBCXX, CXXABI, GCC, …).
 */
function inspect(file) {
  const header = readelf(["-h"], file);
  const machine = /Machine:\s+(.+)/.exec(header)?.[1]?.trim() ?? "unknown";
  const type = /Type:\s+(\S+)/.exec(header)?.[1] ?? "unknown";

  const versions = {};
  const versionText = readelf(["-V"], file);
  const needs = versionText.indexOf(".gnu.version_r");
  if (needs !== -1) {
    for (const match of versionText.slice(needs).matchAll(/Name: ([A-Z_]+)_([0-9.]+)/g)) {
      const [, prefix, version] = match;
      versions[prefix] ??= [];
      if (!versions[prefix].includes(version)) versions[prefix].push(version);
    }
  }
  for (const list of Object.values(versions)) list.sort(compareVersions);

  const needed = [...readelf(["-d"], file).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map(
    (m) => m[1],
  );

  const unversioned = [];
  const exported = [];
  for (const line of readelf(["--dyn-syms"], file).split("\n")) {
    // Num: Value Size Type Bind Vis Ndx Name
    const cols = line.trim().split(/\s+/);
    if (cols.length < 8 || !/^\d+:$/.test(cols[0])) continue;
    const [, , , symbolType, bind, visibility, index, name] = cols;
    if (name === undefined || symbolType === "SECTION" || symbolType === "FILE") continue;
    if (index === "UND") {
      if (bind !== "WEAK" && !name.includes("@") && !NODE_API.test(name)) unversioned.push(name);
    } else if (bind !== "LOCAL" && visibility === "DEFAULT") {
      exported.push(name.replace(/@.*/, ""));
    }
  }
  return { file, machine, type, size: statSync(file).size, versions, needed, unversioned, exported };
}

/** What is wrong with one prebuild for `target` (a key of TARGETS); empty when nothing is. */
function problems(facts, target) {
  const found = [];
  if (facts.type !== "DYN") found.push(`is ${facts.type}, not a shared object`);
  if (facts.machine !== TARGETS[target]) found.push(`is built for ${facts.machine}, not ${TARGETS[target]}`);
  const newest = (prefix) => facts.versions[prefix]?.at(-1);
  const glibc = newest("GLIBC");
  if (glibc !== undefined && compareVersions(glibc, GLIBC_FLOOR) > 0) {
    const over = facts.versions.GLIBC.filter((v) => compareVersions(v, GLIBC_FLOOR) > 0);
    found.push(`needs glibc ${over.map((v) => `GLIBC_${v}`).join(", ")}, newer than GLIBC_${GLIBC_FLOOR}`);
  }
  for (const prefix of ["GLIBCXX", "CXXABI"]) {
    if (facts.versions[prefix] !== undefined) {
      found.push(
        `needs the system's libstdc++ (${facts.versions[prefix].map((v) => `${prefix}_${v}`).join(", ")}): link it statically`,
      );
    }
  }
  const gcc = newest("GCC");
  if (gcc !== undefined && compareVersions(gcc, GCC_FLOOR) > 0) {
    found.push(`needs libgcc_s GCC_${gcc}, newer than GCC_${GCC_FLOOR}`);
  }
  const foreign = facts.needed.filter((lib) => !SYSTEM_LIBRARIES.has(lib));
  if (foreign.length > 0) found.push(`needs ${foreign.join(", ")}, not part of glibc or libgcc_s`);
  if (facts.unversioned.length > 0) {
    found.push(`leaves ${facts.unversioned.join(", ")} unresolved without a version`);
  }
  const extra = facts.exported.filter((name) => !ENTRY_POINTS.includes(name));
  if (extra.length > 0) {
    found.push(
      `exports ${extra.length} symbol(s) beyond the Node-API entry points (${extra.slice(0, 3).join(", ")}…)`,
    );
  }
  return found;
}

/** Every problem with `<root>/prebuilds`, and a line of facts per prebuild. */
function checkPrebuilds(root) {
  const lines = [];
  const found = [];
  const dir = join(root, "prebuilds");
  let present = [];
  try {
    present = readdirSync(dir);
  } catch {
    return { lines, problems: [`${dir} does not exist: run \`npm run prebuild\``] };
  }
  for (const extra of present.filter((name) => !(name in TARGETS))) {
    found.push(`prebuilds/${extra} is not a published target (${Object.keys(TARGETS).join(", ")})`);
  }
  for (const target of Object.keys(TARGETS)) {
    let files = [];
    try {
      files = readdirSync(join(dir, target));
    } catch {
      // reported below
    }
    if (files.length !== 1) {
      found.push(
        `prebuilds/${target} holds ${files.length === 0 ? "nothing" : files.join(", ")}: expected one addon`,
      );
      continue;
    }
    const file = join(dir, target, files[0]);
    const facts = inspect(file);
    const name = relative(root, file);
    for (const problem of problems(facts, target)) found.push(`${name} ${problem}`);
    const versions = Object.entries(facts.versions)
      .map(([prefix, list]) => `${prefix}_${list.at(-1)}`)
      .join(", ");
    lines.push(
      `${name}: ${facts.machine}, ${(facts.size / 1024).toFixed(0)} KiB, newest versions needed ${versions}, ` +
        `libraries ${facts.needed.join(" ")}`,
    );
  }
  return { lines, problems: found };
}

module.exports = { TARGETS, GLIBC_FLOOR, compareVersions, inspect, problems, checkPrebuilds };

if (require.main === module) {
  const root = resolve(process.argv[2] ?? resolve(__dirname, ".."));
  try {
    const result = checkPrebuilds(root);
    for (const line of result.lines) console.log(`check-prebuilds: ${line}`);
    if (result.problems.length > 0) {
      for (const problem of result.problems) console.error(`check-prebuilds: ${problem}`);
      process.exit(1);
    }
  } catch (error) {
    console.error(`check-prebuilds: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}
