#!/usr/bin/env node
// Runs bench/edge-eval.ts (what one window edge costs on the fused counter) without a TypeScript loader:
// bundles it with esbuild (tsup's) into a temporary file and imports that.
//
//   node bench/edge-eval.js
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { runBundled } from "./lib.js";

await runBundled(fileURLToPath(new URL("edge-eval.ts", import.meta.url)), tmpdir());
