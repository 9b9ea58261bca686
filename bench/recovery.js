#!/usr/bin/env node
// Recovery of the bars after a counter/power disagreement: see bench/recovery.ts.
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { runBundled } from "./lib.js";

await runBundled(fileURLToPath(new URL("recovery.ts", import.meta.url)), tmpdir());
