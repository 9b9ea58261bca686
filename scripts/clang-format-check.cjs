#!/usr/bin/env node
// Checks the C and C++ sources against .clang-format (`--fix` rewrites them instead):
// native/**/*.{cc,h}, test/fakes/**/*.{c,h}, scripts/toolchain/**/*.{c,h} and bench/**/*.{c,h}. CLANG_FORMAT names the
// binary to use.
"use strict";

const { spawnSync } = require("node:child_process");
const { readFileSync, readdirSync } = require("node:fs");
const { join, relative, resolve } = require("node:path");

const root = resolve(__dirname, "..");
const fix = process.argv.includes("--fix");

function walk(dir, pattern, found) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return found;
  }
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, pattern, found);
    else if (entry.isFile() && pattern.test(entry.name)) found.push(path);
  }
  return found;
}

function findClangFormat() {
  const candidates = process.env.CLANG_FORMAT
    ? [process.env.CLANG_FORMAT]
    : ["clang-format", ...Array.from({ length: 10 }, (_, i) => `clang-format-${20 - i}`)];
  for (const candidate of candidates) {
    const probe = spawnSync(candidate, ["--version"], { encoding: "utf8" });
    if (probe.status === 0) return candidate;
  }
  return null;
}

const files = [
  ...walk(join(root, "native"), /\.(cc|h)$/, []),
  ...walk(join(root, "test", "fakes"), /\.(c|h)$/, []),
  ...walk(join(root, "scripts", "toolchain"), /\.(c|h)$/, []),
  ...walk(join(root, "bench"), /\.(c|h)$/, []),
].sort();

if (files.length === 0) {
  console.log("clang-format: no C/C++ sources to check");
  process.exit(0);
}

const clangFormat = findClangFormat();
if (clangFormat === null) {
  console.error(
    "clang-format: not found. Install it (Debian/Ubuntu: `apt-get install clang-format`) " +
      "or set CLANG_FORMAT to its path.",
  );
  process.exit(1);
}

if (fix) {
  const result = spawnSync(clangFormat, ["-i", ...files], { cwd: root, stdio: "inherit" });
  if (result.status !== 0) process.exit(result.status ?? 1);
  console.log(`clang-format: ${files.length} file(s) formatted`);
  process.exit(0);
}

const unformatted = [];
for (const file of files) {
  const result = spawnSync(clangFormat, ["--style=file", file], {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.status !== 0) {
    console.error(`clang-format: failed on ${relative(root, file)}: ${result.stderr || result.error}`);
    process.exit(1);
  }
  if (result.stdout !== readFileSync(file, "utf8")) unformatted.push(relative(root, file));
}
if (unformatted.length > 0) {
  console.error(
    `clang-format: ${unformatted.length} of ${files.length} file(s) not formatted: ${unformatted.join(", ")}\n` +
      "Run `npm run format` (or `node scripts/clang-format-check.cjs --fix`).",
  );
  process.exit(1);
}
console.log(`clang-format: ${files.length} file(s) formatted correctly`);
