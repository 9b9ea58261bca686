import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { afterAll, describe, expect, it } from "vitest";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// Every NVML call of this card takes 20 ms, and the double records which thread made each call.
// While a window is open, no call may come from the JS thread (this process's main thread, whose
// thread id is the pid): open(), mark() and close() leave NVML to the sampler and the thread pool.
// Thread ids, not elapsed time, decide, so a loaded machine cannot make this fail or pass.

const dir = mkdtempSync(join(tmpdir(), "giul-latency-"));
const callsFile = join(dir, "calls.txt");
writeFileSync(callsFile, "");
const sc = scenarioForThisProcess({
  latencyUs: 20_000,
  callsFile,
  callsTid: true,
  devices: [{ power: 250 }],
});
const { Meter } = await import("../src/index.js");

const ready = nativeReady();
afterAll(() => {
  sc.remove();
  rmSync(dir, { recursive: true, force: true });
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The calls recorded from byte `from` of the calls file on: symbol and thread id. */
function callsSince(from: number): { sym: string; tid: number }[] {
  return readFileSync(callsFile)
    .subarray(from)
    .toString("utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      const [sym, tid] = l.split(" ");
      return { sym: sym ?? "", tid: Number(tid) };
    });
}

describe.runIf(ready)("no NVML call on the JS thread while a window is open", () => {
  it("open, three marks and close make no NVML call on the JS thread", async () => {
    const node = { name: "slow", idleW: 40 };
    const warm = await Meter.forNode(node).open(); // probes the card (off the JS thread too)
    await warm.close();

    for (let round = 0; round < 3; round++) {
      const from = statSync(callsFile).size;
      const before = performance.eventLoopUtilization();
      const m = await Meter.forNode(node).open();
      await sleep(60);
      m.mark("a");
      await sleep(60);
      m.mark("b");
      await sleep(60);
      m.mark("c");
      await m.close();
      const elu = performance.eventLoopUtilization(before);
      const calls = callsSince(from);
      // The sampler kept reading through the window, each call with a thread id: the record works.
      expect(calls.length).toBeGreaterThan(0);
      for (const c of calls) expect(Number.isInteger(c.tid) && c.tid > 0, c.sym).toBe(true);
      expect(calls.filter((c) => c.tid === process.pid).map((c) => c.sym)).toEqual([]);
      const e = m.result();
      // the window is still measured, just with slower sampling (each tick is two 20 ms calls)
      expect(e.method).toBe("sampled");
      expect(e.maxGapMs as number).toBeGreaterThanOrEqual(40);
      // For the record only (wall-clock, so not asserted): the JS thread's busy time in the window.
      console.log(
        `round ${round}: event loop active ${elu.active.toFixed(1)} ms, ${calls.length} NVML calls`,
      );
    }
  });
});
