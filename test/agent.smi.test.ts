import { afterAll, describe, expect, it } from "vitest";
import { built, FAKE_NVML, FAKE_SMI, FAKE_SMI_BIN } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// giul-agent on a host without the addon (no prebuild for the platform): power and energy from
// the smi_sampler, and the card's state (name, memory, utilization, processes) from nvidia-smi, so
// that a remote Meter's contention checks and probeNode work through it. The nvidia-smi stand-in
// reads the NVML double's scenario.

const sc = scenarioForThisProcess({
  devices: [
    {
      name: "NVIDIA L40S",
      power: 180,
      memTotalMib: 46068,
      memUsedMib: 5120,
      utilGpu: 64,
      procs: [
        { pid: 4242, usedMib: 4096, name: "/usr/bin/python3 -m vllm" },
        { pid: 777, usedMib: "na", name: "Xorg" },
      ],
    },
    // unified memory, no utilization: null, never 0
    { name: "GB10", power: 40, memSupported: false, utilSupported: false },
  ],
});
process.env.GIUL_DISABLE_ADDON = "1";
process.env.PATH = `${FAKE_SMI_BIN}:${process.env.PATH ?? ""}`;
delete process.env.GIUL_NVIDIA_SMI;

const { startAgent } = await import("../src/agent/server.js");
type Agent = Awaited<ReturnType<typeof startAgent>>;

// skipped where the doubles are not built (a failure in CI)
const ready = built([FAKE_SMI, FAKE_NVML], "the nvidia-smi stand-in or the NVML double");

let agent: Agent | null = null;
afterAll(async () => {
  await agent?.close();
  sc.remove();
});

async function power(gpu: number): Promise<Record<string, unknown>> {
  const r = await fetch(`${agent?.url}/power?gpu=${gpu}`);
  expect(r.status).toBe(200);
  return (await r.json()) as Record<string, unknown>;
}

describe.runIf(ready)("giul-agent without the addon", () => {
  it("serves the Python agent's fields from nvidia-smi: the state is read, not null", async () => {
    agent = await startAgent({ port: 0, gpus: [0, 1], periodMs: 100, warn: () => {} });
    expect(agent.monitors.map((m) => m.backend)).toEqual(["smi_sampler", "smi_sampler"]);
    const p = await power(0);
    expect(p.name).toBe("NVIDIA L40S");
    expect(p.memory_total_mib).toBe(46068);
    expect(p.memory_used_mib).toBe(5120);
    expect(p.memory_free_mib).toBe(46068 - 5120);
    expect(p.utilization_pct).toBe(64);
    expect(p.compute_apps).toEqual([
      { pid: 4242, used_mib: 4096, name: "/usr/bin/python3 -m vllm" },
      { pid: 777, used_mib: null, name: "Xorg" },
    ]);
    expect(p.watts).toBeCloseTo(180, 1);
    expect(p.backend).toBe("smi_sampler");

    const q = await power(1);
    expect(q.name).toBe("GB10");
    expect(q.memory_total_mib).toBeNull();
    expect(q.memory_used_mib).toBeNull();
    expect(q.memory_free_mib).toBeNull();
    expect(q.utilization_pct).toBeNull();
    expect(q.compute_apps).toEqual([]);
    expect(q.watts).toBeCloseTo(40, 1);
  });
});
