import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeReady } from "./fakes/paths.js";
import { type ProcSpec, scenarioForThisProcess } from "./fakes/scenario.js";

// Contention and probeNode on the native path: the double's resident processes are the truth.

const callsFile = join(mkdtempSync(join(tmpdir(), "giul-calls-")), "calls.txt");
writeFileSync(callsFile, "");
const SERVER: ProcSpec = { pid: 1000, usedMib: 60_000, name: "VLLM::EngineCore" };
const XORG: ProcSpec = { pid: 1001, usedMib: 594, name: "/usr/lib/xorg/Xorg" };
const base = { power: 320, memUsedMib: 61_000, utilGpu: 87 };
const sc = scenarioForThisProcess({ callsFile, devices: [{ ...base, procs: [SERVER, XORG] }] });
const { Meter, probeNode, poolFits } = await import("../src/index.js");

const ready = nativeReady();
afterAll(() => sc.remove());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const shared = {
  name: "iris",
  idleW: 16,
  servingMatch: "vllm",
  contentionIgnore: ["chrome", "Xorg"],
  contentionFloorMib: 512,
};
const withProcs = (procs: ProcSpec[], extra: object = {}) =>
  sc.update({ callsFile, devices: [{ ...base, procs, ...extra }] });

const processReads = () =>
  readFileSync(callsFile, "utf8")
    .split("\n")
    .filter((l) => l.startsWith("nvmlDeviceGetComputeRunningProcesses")).length;

async function window(node: object, ms: number, hint?: number) {
  const m = await Meter.forNode(
    node as typeof shared,
    hint === undefined ? {} : { joulesPer1kHint: hint },
  ).open();
  await sleep(ms);
  m.mark("all");
  await m.close();
  return m.result({ tokens: 100 });
}

describe.runIf(ready)("contention on a shared card", () => {
  // Under test:worker, the windows below are the worker's (those opened before it is ready are not).
  beforeAll(async () => {
    const warm = await Meter.forNode({ name: "warm", gpuIndex: 0, idleW: 50 }).open();
    await warm.close();
  });
  it("our server and a display ignored by name: not contended, measured", async () => {
    const e = await window(shared, 150);
    expect(e.method).toBe("sampled");
    expect(e.contended).toBe(false);
    expect(e.contentionChecked).toBe(true);
    expect(e.contendedBy).toEqual([]);
  });

  it("two processes matching servingMatch: contended, demoted, the measured number kept", async () => {
    withProcs([SERVER, { pid: 1002, usedMib: 12_000, name: "VLLM::EngineCore" }, XORG]);
    const e = await window(shared, 150, 4000);
    expect(e.contended).toBe(true);
    expect(e.method).toBe("estimated");
    expect(e.joules).toBe(400);
    expect(e.measuredJoules as number).toBeGreaterThan(0);
    expect(e.contendedBy.map((p) => p.pid).sort()).toEqual([1000, 1002]);
    expect(e.contendedBy.find((p) => p.pid === 1002)).toEqual({
      pid: 1002,
      name: "VLLM::EngineCore",
      usedMib: 12_000,
    });
    // the stages are demoted too
    expect(e.stages.all?.contended).toBe(true);
    expect(e.stages.all?.method).not.toBe("sampled");
    expect(e.toJSON().contended_by).toContainEqual({ pid: 1002, name: "VLLM::EngineCore", used_mib: 12_000 });
  });

  it("a process under the floor is too small to matter; one above it is a tenant", async () => {
    withProcs([SERVER, XORG, { pid: 2000, usedMib: 300, name: "python3" }]);
    expect((await window(shared, 120)).contended).toBe(false);
    withProcs([SERVER, XORG, { pid: 2001, usedMib: 9_000, name: "python3" }]);
    const e = await window(shared, 120);
    expect(e.contended).toBe(true);
    expect(e.contendedBy).toEqual([{ pid: 2001, name: "python3", usedMib: 9_000 }]);
    expect(e.method).toBe("unknown");
  });

  it("a tenant present only at the closing edge is seen", async () => {
    const arrives = sc.nowMs() + 200;
    withProcs([SERVER, { pid: 3000, usedMib: 20_000, name: "eval.py", fromMs: arrives }]);
    const e = await window(shared, 300);
    expect(e.contended).toBe(true);
    expect(e.contendedBy.map((p) => p.pid)).toEqual([3000]);
  });

  it("a tenant that comes and goes strictly inside a window is missed at the edges, seen when watching", async () => {
    const from = sc.nowMs() + 150;
    withProcs([SERVER, { pid: 3100, usedMib: 20_000, name: "burst.py", fromMs: from, untilMs: from + 250 }]);
    const missed = await window(shared, 600);
    expect(missed.contended).toBe(false); // the known gap, in the honest direction

    const from2 = sc.nowMs() + 150;
    withProcs([
      SERVER,
      { pid: 3101, usedMib: 20_000, name: "burst.py", fromMs: from2, untilMs: from2 + 250 },
    ]);
    const m = await Meter.forNode(shared, { watchContention: true }).open();
    await sleep(600);
    await m.close();
    const seen = m.result();
    expect(seen.contended).toBe(true);
    expect(seen.contendedBy.map((p) => p.pid)).toEqual([3101]);
  });

  it("an unreadable process list is not 'no tenants': the window says it could not check", async () => {
    withProcs([SERVER], {
      errors: [{ fromMs: sc.nowMs(), code: 999, fn: "nvmlDeviceGetComputeRunningProcesses" }],
    });
    await sleep(150); // let an earlier snapshot age out of the coalescing interval
    const e = await window(shared, 150);
    expect(e.contentionChecked).toBe(false);
    expect(e.contended).toBe(false);
    expect(e.reason).toMatch(/contention could not be checked at the opening edge/);
    expect(e.toJSON().contention_checked).toBe(false);
    withProcs([SERVER]);
  });

  it("a dedicated node looks nothing up", async () => {
    await sleep(150);
    const before = processReads();
    const e = await window({ name: "dedicated", idleW: 16 }, 150);
    expect(processReads()).toBe(before);
    expect(e.contentionChecked).toBeNull();
    expect(e.method).toBe("sampled");
  });

  it("1,000 windows a second read the process list at most 10 times a second", async () => {
    // calibrate: how many NVML process-list calls one read makes (the two-call pattern)
    await sleep(150);
    let before = processReads();
    await probeNode(shared);
    const perRead = processReads() - before;
    expect(perRead).toBeGreaterThanOrEqual(1);

    await sleep(150);
    before = processReads();
    const t0 = Date.now();
    const windows: Promise<unknown>[] = [];
    while (Date.now() - t0 < 2000) {
      for (let i = 0; i < 10; i++) windows.push(window(shared, 5 + (i % 20)));
      await sleep(10);
    }
    const results = (await Promise.all(windows)) as { contended: boolean; method: string }[];
    const seconds = (Date.now() - t0) / 1000;
    const reads = (processReads() - before) / perRead;
    expect(results.length).toBeGreaterThan(1500);
    expect(results.every((e) => !e.contended)).toBe(true);
    expect(reads / seconds).toBeLessThanOrEqual(11);
  });
});

describe.runIf(ready)("probeNode", () => {
  it("reads memory, utilization and resident processes from the card", async () => {
    withProcs([SERVER, XORG, { pid: 4000, usedMib: "na", name: "wddm-like" }]);
    const state = await probeNode(shared);
    expect(state).not.toBeNull();
    expect(state?.memoryTotalMib).toBe(81_559);
    expect(state?.memoryUsedMib).toBe(61_000);
    expect(state?.memoryFreeMib).toBe(81_559 - 61_000);
    expect(state?.utilizationPct).toBe(87);
    expect(state?.computeApps).toContainEqual({ pid: 1000, usedMib: 60_000, name: "VLLM::EngineCore" });
    expect(state?.computeApps).toContainEqual({ pid: 4000, usedMib: null, name: "wddm-like" });
  });

  it("says whether a pool sized as a fraction of total memory would fit, naming the shortfall", async () => {
    const state = await probeNode(shared);
    const fit = poolFits(state, 0.9);
    expect(fit.fits).toBe(false);
    expect(fit.shortfallMib).toBe(Math.ceil(0.9 * 81_559 - (81_559 - 61_000)));
    expect(fit.reason).toMatch(/short by \d+ MiB/);
    expect(poolFits(state, 0.2).fits).toBe(true);
    expect(poolFits(null, 0.5).fits).toBeNull();
    expect(() => poolFits(state, 1.5)).toThrow(/gpuMemoryUtilization/);
  });

  it("resolves null when the card cannot be read, never throws for the card's sake", async () => {
    expect(await probeNode({ name: "nine", idleW: 1, gpuIndex: 9 })).toBeNull();
    expect(
      await probeNode({ name: "far", idleW: 1, isLocal: false, powerEndpoint: "http://127.0.0.1:1" }),
    ).toBeNull();
  });

  it("a remote node without a powerEndpoint is a programmer error naming the field", async () => {
    await expect(probeNode({ name: "far", idleW: 1, isLocal: false })).rejects.toThrow(
      /node\.powerEndpoint: required when isLocal is false/,
    );
  });
});
