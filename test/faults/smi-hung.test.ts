import { afterAll, describe, expect, it } from "vitest";
import { STALL_RETRY_BASE_MS } from "../../src/ring/waits.js";
import { built, FAKE_NVML, FAKE_SMI } from "../fakes/paths.js";
import { scenarioForThisProcess } from "../fakes/scenario.js";
import { NO_WAIT_MS, report, SLACK_MS, sleep, timed } from "./bounds.js";

// Fault matrix, item 2 on the nvidia-smi path: nvidia-smi hangs in the driver (its NVML calls take
// a minute) and never prints. Before, every request paid about 10 s (5 s in open(), 5 s in
// close()), again with each restarted child. Now the first request pays at most the node's
// timeoutMs, the next ones nothing ("sampler stalled"), and after the back-off one request looks
// again.

process.env.GIUL_DISABLE_ADDON = "1";
process.env.GIUL_NVIDIA_SMI = FAKE_SMI;
const sc = scenarioForThisProcess({ latencyUs: 60_000_000, devices: [{ power: 200 }] });
const { Meter } = await import("../../src/index.js");
afterAll(() => sc.remove());

const node = { name: "hung-smi", idleW: 40 };

async function request() {
  const m = Meter.forNode(node, { joulesPer1kHint: 3000 });
  const opened = await timed(() => m.open());
  await sleep(10);
  const closed = await timed(() => m.close());
  return { openMs: opened.ms, closeMs: closed.ms, energy: m.result({ tokens: 10 }) };
}

describe.runIf(built([FAKE_NVML, FAKE_SMI]))("an nvidia-smi that hangs and never prints", () => {
  it("costs the first request at most timeoutMs, the next ones nothing, once per back-off", async () => {
    const first = await request();
    report(
      `hung nvidia-smi: first request open ${first.openMs.toFixed(0)} ms, close ${first.closeMs.toFixed(0)} ms`,
    );
    expect(first.energy.backend).toBe("smi_sampler");
    expect(first.openMs).toBeLessThan(500 + SLACK_MS);
    expect(first.closeMs).toBeLessThan(NO_WAIT_MS);
    expect(first.energy.method).toBe("estimated");
    expect(first.energy.reason).toMatch(/sampler stalled/);

    const rest = [];
    for (let i = 0; i < 20; i++) rest.push(await request());
    const costs = rest.map((r) => r.openMs + r.closeMs);
    report(`hung nvidia-smi: next 20 requests, longest open+close ${Math.max(...costs).toFixed(0)} ms`);
    for (const r of rest) {
      expect(r.openMs + r.closeMs).toBeLessThan(NO_WAIT_MS);
      expect(r.energy.method).toBe("estimated");
      expect(r.energy.reason).toMatch(/sampler stalled .*not waited on until it samples again/);
    }

    // After the back-off: one request looks again (bounded as the first), the others do not wait.
    await sleep(STALL_RETRY_BASE_MS + 200);
    const looks = [];
    for (let i = 0; i < 5; i++) looks.push(await request());
    report(
      `hung nvidia-smi after the back-off: ${looks.map((r) => (r.openMs + r.closeMs).toFixed(0)).join(", ")} ms`,
    );
    expect(looks.filter((r) => r.openMs + r.closeMs >= NO_WAIT_MS).length).toBeLessThanOrEqual(1);
    for (const r of looks) {
      expect(r.openMs).toBeLessThan(500 + SLACK_MS);
      expect(r.closeMs).toBeLessThan(NO_WAIT_MS);
      expect(r.energy.reason).toMatch(/sampler stalled/);
    }
  }, 30_000);
});
