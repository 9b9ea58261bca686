import { afterAll, describe, expect, it } from "vitest";
import { nativeReady } from "./fakes/paths.js";

// The native path's end-to-end suite (./meter.nvml.test.ts: every figure against the scenario's
// exact energy, 1,000 concurrent windows against the exact weighted fair share) with the windows
// accounted by the accounting worker (GIUL_ACCOUNTING=worker, src/offload/), and a check that the
// worker, not this thread, did it.

process.env.GIUL_ACCOUNTING = "worker";
await import("./meter.nvml.test.js");
const { offloadClient } = await import("../src/offload/client.js");

describe.runIf(nativeReady())("accounted by the accounting worker", () => {
  afterAll(() => {
    delete process.env.GIUL_ACCOUNTING;
  });

  it("the windows above were measured in the worker, not on this thread", () => {
    const client = offloadClient();
    expect(client).not.toBeNull();
    // Every window of the suite above closed through it (1,000 concurrent ones among them).
    expect(client?.received ?? 0).toBeGreaterThan(1000);
    expect(client?.dead).toBeNull();
  });
});
