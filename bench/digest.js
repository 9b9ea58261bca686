#!/usr/bin/env node
// Runs bench/digest.ts (what the fused counter costs per sample) without a TypeScript loader:
// bundles it with esbuild (tsup's) into a temporary file and imports that.
//
//   node bench/digest.js
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { runBundled } from "./lib.js";

await runBundled(fileURLToPath(new URL("digest.ts", import.meta.url)), tmpdir());
