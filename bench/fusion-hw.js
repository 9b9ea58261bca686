#!/usr/bin/env node
// Runs bench/fusion-hw.ts (the fused counter on a real card, under load) without a TypeScript
// loader: bundles it with esbuild (tsup's) into a temporary file and imports that. Arguments are
// passed through.
//
//   node bench/fusion-hw.js [--gpu 0] [--seconds 60] [--load ./gpu-load] [--json out.json]
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

const entry = fileURLToPath(new URL("fusion-hw.ts", import.meta.url));
// Beside the package (not in /tmp): src/binding.ts finds the addon from its own location.
const dir = mkdtempSync(join(fileURLToPath(new URL("..", import.meta.url)), ".fusion-hw-"));
const outfile = join(dir, "fusion-hw.mjs");
// The check ends with process.exit(): remove the bundle on the way out, whichever way that is.
process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
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
