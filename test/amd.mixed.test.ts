import { afterAll, describe, expect, it } from "vitest";
import { amdSpec } from "./fakes/amd-scenario.js";
import { amdReady, FAKE_AMDSMI, nativeReady } from "./fakes/paths.js";
import { Scenario, scenarioForThisProcess } from "./fakes/scenario.js";

// A host with both vendors' cards: one NVIDIA card (the NVML double) and one AMD card (the
// libamd_smi double), each with its own scenario. An index could name either: refused, naming the
// field; each card named by its UUID is metered by its own vendor's backend against its scenario,
// and a node over both (one window on two cards) sums them.

const IDLE_W = 50;
const NVIDIA_UUID = "GPU-0a0a0000-0000-4000-8000-000000000001";
const AMD_UUID = "2fff74a1-0000-1000-80a1-000000000007";
const nv = scenarioForThisProcess({
  devices: [{ uuid: NVIDIA_UUID, power: 300, counterStepMs: 10, powerNoiseW: 0.5 }],
});
const amd = new Scenario(amdSpec({ devices: [{ uuid: AMD_UUID, power: 500, powerNoiseW: 3 }] }));
process.env.GIUL_FAKE_AMDSMI_SCENARIO = amd.path;
process.env.GIUL_AMDSMI_LIBRARY = FAKE_AMDSMI;

const { Meter, isGiulError } = await import("../src/index.js");
afterAll(() => {
  nv.remove();
  amd.remove();
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function window(node: Parameters<typeof Meter.forNode>[0], ms: number) {
  const m = await Meter.forNode(node).open();
  await sleep(ms);
  await m.close();
  const t = m.edgeTimes();
  return { e: m.result(), open: t.open as bigint, close: t.close as bigint };
}

describe.runIf(nativeReady() && amdReady())("a host with NVIDIA and AMD cards", () => {
  it("refuses a card named by index, naming gpuIndex and what to use instead", async () => {
    let error: unknown = null;
    try {
      await window({ name: "which", gpuIndex: 0, idleW: IDLE_W }, 10);
    } catch (e) {
      error = e;
    }
    expect(isGiulError(error)).toBe(true);
    expect((error as { field?: string }).field).toBe("gpuIndex");
    expect(String(error)).toMatch(
      /1 NVIDIA and 1 AMD card\(s\): gpuIndex 0 could name either; name the card by gpuUuid/,
    );
  });

  it("meters each card named by UUID with its own vendor's backend, against its own scenario", async () => {
    await window({ name: "warm-amd", gpuUuid: AMD_UUID, idleW: IDLE_W }, 300);
    await window({ name: "warm-nv", gpuUuid: NVIDIA_UUID, idleW: IDLE_W }, 300);
    for (const [uuid, sc, backend] of [
      [AMD_UUID, amd, "amdsmi_counter"],
      [NVIDIA_UUID, nv, "nvml_counter"],
    ] as const) {
      const { e, open, close } = await window({ name: "by-uuid", gpuUuid: uuid, idleW: IDLE_W }, 400);
      expect(e.backend).toBe(backend);
      expect(e.method, e.reason ?? "").toBe("sampled");
      const truth = sc.energyJ(0, open, close) - (IDLE_W * Number(close - open)) / 1e9;
      expect(Math.abs((e.joules as number) - truth)).toBeLessThanOrEqual(e.uncertaintyJoules as number);
    }
  });

  it("one window over both cards takes its part of each, and sums them", async () => {
    const { e, open, close } = await window(
      { name: "both", gpuUuid: [NVIDIA_UUID, AMD_UUID], idleW: IDLE_W },
      500,
    );
    expect(e.backend).toBe("mixed");
    expect(e.method, e.reason ?? "").toBe("sampled");
    const truth =
      nv.energyJ(0, open, close) + amd.energyJ(0, open, close) - (2 * IDLE_W * Number(close - open)) / 1e9;
    expect(Math.abs((e.joules as number) - truth)).toBeLessThanOrEqual(e.uncertaintyJoules as number);
    // Each card by its own vendor's index and UUID.
    expect(e.cards?.map((c) => [c.index, c.uuid, c.backend])).toEqual([
      [0, NVIDIA_UUID, "nvml_counter"],
      [0, AMD_UUID, "amdsmi_counter"],
    ]);
  });

  it("still refuses the index once its NVIDIA card was found by UUID (no cached way round)", async () => {
    await expect(window({ name: "which-again", gpuIndex: 0, idleW: IDLE_W }, 10)).rejects.toMatchObject({
      field: "gpuIndex",
    });
  });
});
