#!/usr/bin/env node
// Runs bench/accuracy.ts (the accuracy tables) without a TypeScript loader: bundles it with
// esbuild (tsup's) into a temporary file and imports that. Arguments are passed through.
//
//   node bench/accuracy.js [--windows 10000] [--json out.json]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

const entry = fileURLToPath(new URL("accuracy.ts", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "giul-accuracy-"));
const outfile = join(dir, "accuracy.mjs");
try {
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile,
    logLevel: "error",
  });
  await import(pathToFileURL(outfile).href);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
