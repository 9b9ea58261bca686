#!/usr/bin/env node
// Runs bench/fusion-hw.ts (the fused counter on a real card, under load) without a TypeScript
// loader: bundles it with esbuild (tsup's) into a temporary file and imports that. Arguments are
// passed through.
//
//   node bench/fusion-hw.js [--gpu 0] [--seconds 60] [--load ./gpu-load] [--json out.json]
import { fileURLToPath } from "node:url";
import { runBundled } from "./lib.js";

// Beside the package (not in /tmp): src/sources/native/binding.ts finds the addon from its own location.
await runBundled(
  fileURLToPath(new URL("fusion-hw.ts", import.meta.url)),
  fileURLToPath(new URL("..", import.meta.url)),
);
