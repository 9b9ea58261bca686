#!/usr/bin/env node
// Runs bench/accuracy.ts (the accuracy tables) without a TypeScript loader: bundles it with
// esbuild (tsup's) into a temporary file and imports that. Arguments are passed through.
//
//   node bench/accuracy.js [--windows 10000] [--json out.json]
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { runBundled } from "./lib.js";

await runBundled(fileURLToPath(new URL("accuracy.ts", import.meta.url)), tmpdir());
