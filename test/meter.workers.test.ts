import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { afterAll, describe, expect, it } from "vitest";
import { nativeReady, ROOT } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// The package (not only the addon) in worker_threads: 20 workers each load giul, meter windows
// (one left open) and are terminated. Nothing crashes, every window measured, and no thread is left.

const sc = scenarioForThisProcess({ devices: [{ power: 250 }] });
afterAll(() => sc.remove());
const DIST = join(ROOT, "dist", "index.js");

const workerSource = `
import { parentPort } from "node:worker_threads";
const { Meter } = await import(${JSON.stringify(DIST)});
const node = { name: "worker", idleW: 50 };
const m = await Meter.forNode(node).open();
await new Promise((r) => setTimeout(r, 60));
await m.close();
const left = await Meter.forNode(node).open();
left.mark("still-open");
parentPort.postMessage(m.result().toJSON());
`;

const samplerThreads = () =>
  readdirSync("/proc/self/task").filter((tid) => {
    try {
      return readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim().startsWith("giul-gpu");
    } catch {
      return false;
    }
  }).length;

async function waitFor(what: string, ok: () => boolean, ms = 15_000): Promise<void> {
  const t0 = Date.now();
  while (!ok()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The fields of Energy.toJSON() this test reads. */
interface WindowJson {
  method: string;
  backend: string;
  joules: number;
  seconds: number;
  uncertainty_joules: number;
}

describe.runIf(nativeReady())("giul in worker_threads", () => {
  it("20 workers load it, meter, and are terminated: no crash, no thread left", async () => {
    for (let round = 0; round < 20; round++) {
      const worker = new Worker(workerSource, { eval: true, env: process.env });
      const record = await new Promise<WindowJson>((resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
      });
      expect(record.backend).toBe("nvml_counter");
      expect(record.method).toBe("sampled");
      // a constant 250 W card, 50 W idle: the truth is 200 W over the window's own length
      expect(Math.abs(record.joules - 200 * record.seconds)).toBeLessThanOrEqual(record.uncertainty_joules);
      await worker.terminate();
    }
    // Each terminated worker's environment released its sampler reference: the thread stops.
    await waitFor("the sampler threads to stop", () => samplerThreads() === 0);
  }, 120_000);
});
