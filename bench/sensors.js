#!/usr/bin/env node
// Runs bench/sensors.ts (the sensor family's table) without a TypeScript loader: bundles it with
// esbuild (tsup's) into a temporary file and imports that. Arguments are passed through.
//
//   node bench/sensors.js [--windows 400] [--seed 1] [--period 5] [--only name] [--why] [--unaligned]
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { runBundled } from "./lib.js";

await runBundled(fileURLToPath(new URL("sensors.ts", import.meta.url)), tmpdir());
