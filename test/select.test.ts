import { afterAll, describe, expect, it, vi } from "vitest";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// The one place that chooses a backend, and GIUL_BACKEND for diagnosis.

const sc = scenarioForThisProcess({ devices: [{ power: 200 }, { power: 150, counter: false }] });
const { Meter, isGiulError } = await import("../src/index.js");

const ready = nativeReady();
afterAll(() => {
  delete process.env.GIUL_BACKEND;
  sc.remove();
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function backendOf(gpuIndex: number, meter: typeof Meter = Meter): Promise<string | null> {
  const m = await meter.forNode({ name: "n", idleW: 10, gpuIndex }).open();
  await sleep(30);
  await m.close();
  return m.result().backend;
}

describe.runIf(ready)("choosing the backend", () => {
  it("prefers the counter, then NVML power integrated natively", async () => {
    expect(await backendOf(0)).toBe("nvml_counter");
    expect(await backendOf(1)).toBe("nvml_sampler");
  });

  it("GIUL_BACKEND forces a backend that can serve", async () => {
    process.env.GIUL_BACKEND = "nvml_sampler";
    expect(await backendOf(0)).toBe("nvml_sampler");
    process.env.GIUL_BACKEND = "none";
    const m = await Meter.forNode({ name: "n", idleW: 10 }, { joulesPer1kHint: 100 }).open();
    await m.close();
    const e = m.result({ tokens: 10 });
    expect(e.backend).toBe("none");
    expect(e.method).toBe("estimated");
  });

  it("forcing one that cannot work is a clear error, never a silent fallback", async () => {
    process.env.GIUL_BACKEND = "nvml_counter";
    const node = { name: "n", idleW: 10, gpuIndex: 1 };
    const first = Meter.forNode(node); // card 1 not probed under this override yet
    await expect(first.open()).rejects.toSatisfy(
      (e: unknown) => isGiulError(e, "BACKEND_UNAVAILABLE") && /GIUL_BACKEND=nvml_counter/.test(String(e)),
    );
    // now known: refused at forNode, at once
    expect(() => Meter.forNode(node)).toThrow(
      /GIUL_BACKEND=nvml_counter was forced, but it cannot serve card 1/,
    );
    process.env.GIUL_BACKEND = "bogus";
    expect(() => Meter.forNode(node)).toThrow(/GIUL_BACKEND=bogus: expected one of/);
    delete process.env.GIUL_BACKEND;
    // A fresh copy of giul (no selection cached from the probes above) meters card 1 as before.
    vi.resetModules();
    const fresh = await import("../src/index.js");
    expect(await backendOf(1, fresh.Meter)).toBe("nvml_sampler");
  });
});
