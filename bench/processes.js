#!/usr/bin/env node
// One card, many processes (issue 35): what each window is charged, and what they add up to,
// against the card's exact energy; see bench/processes.ts. Run through:
//   npm run build:ts && node bench/processes.js [--dist <other build's dist>]
import { fileURLToPath } from "node:url";
import { runBundled } from "./lib.js";

// Bundled beside this file, so that test/fakes/paths.ts finds the package root from the bundle.
await runBundled(
  fileURLToPath(new URL("processes.ts", import.meta.url)),
  fileURLToPath(new URL(".", import.meta.url)),
);
