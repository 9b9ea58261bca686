/**
 * Accounting workers that fail (for test/offload.test.ts): files GIUL_OFFLOAD_WORKER can name in
 * place of dist/offload-worker.js, written on demand into a temporary folder.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "giul-offload-workers-"));

/** A worker whose file throws as it loads. */
export const BROKEN_WORKER = join(dir, "broken.mjs");
writeFileSync(BROKEN_WORKER, 'throw new Error("this accounting worker is broken");\n');

/** A worker that says it is ready, takes cards, and exits (code 3) at the first poke. */
export const DYING_WORKER = join(dir, "dying.mjs");
writeFileSync(
  DYING_WORKER,
  `import { parentPort } from "node:worker_threads";
parentPort.postMessage({ type: "ready" });
parentPort.on("message", (m) => {
  if (m.type === "poke") process.exit(3);
});
`,
);
