import { readdirSync, readFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { STALL_RETRY_BASE_MS, WAIT_CAP_MS, WAIT_FLOOR_MS } from "../../src/ring/waits.js";
import { nativeReady } from "../fakes/paths.js";
import { scenarioForThisProcess } from "../fakes/scenario.js";
import { NO_WAIT_MS, report, SLACK_MS, sleep, timed } from "./bounds.js";

// Fault matrix, item 2 on the native path: the sampling thread gets stuck in driver calls (3 s
// each) while windows keep coming. The first request pays a bounded close (a small multiple of the
// period observed, at least the floor); once the sampler is known stalled, requests do not wait on
// it and say "sampler stalled"; after the back-off one request looks again; when the card answers
// again, windows are measured again.

const CARD = { power: 300 };
const SLOW = [
  { us: 3_000_000, fn: "nvmlDeviceGetTotalEnergyConsumption" },
  { us: 3_000_000, fn: "nvmlDeviceGetFieldValues" },
];
const sc = scenarioForThisProcess({ devices: [CARD] });
const { Meter } = await import("../../src/index.js");
afterAll(() => sc.remove());

const node = { name: "stuck-driver", idleW: 50 };
const hint = { joulesPer1kHint: 4000 };

/** Opens and closes a window of `holdMs`; how long open() and close() took, and the record. */
async function request(holdMs = 20) {
  const m = Meter.forNode(node, hint);
  const opened = await timed(() => m.open());
  await sleep(holdMs);
  const closed = await timed(() => m.close());
  return { openMs: opened.ms, closeMs: closed.ms, energy: m.result({ tokens: 10 }) };
}

describe.runIf(nativeReady())("a sampling thread stuck in the driver", () => {
  it("costs one request a bounded close, then none until the back-off is over; measured again once it answers", async () => {
    const warm = await request(50);
    expect(warm.energy.method).toBe("sampled");

    sc.update({ latency: SLOW, devices: [CARD] });
    await sleep(50); // the thread is now inside a 3 s call

    // The first request: its opening edge has a sample before it, its closing edge waits for one
    // at most the bound (10 ms samples: the floor), then the sampler is known stalled.
    const first = await request();
    report(
      `stuck sampler: first request open ${first.openMs.toFixed(0)} ms, close ${first.closeMs.toFixed(0)} ms`,
    );
    expect(first.openMs).toBeLessThan(NO_WAIT_MS);
    expect(first.closeMs).toBeGreaterThanOrEqual(WAIT_FLOOR_MS - 20);
    expect(first.closeMs).toBeLessThan(WAIT_FLOOR_MS + SLACK_MS);
    expect(first.energy.method).toBe("estimated");
    expect(first.energy.joules).toBe(40);
    expect(first.energy.reason).toMatch(
      /(opening|closing) edge: the sampler stalled: no sample came within \d+ ms after the edge/,
    );

    // Every request after it: no wait at all, the reason said at once.
    const rest = [];
    for (let i = 0; i < 5; i++) rest.push(await request());
    report(
      `stuck sampler: next requests open+close ${rest.map((r) => (r.openMs + r.closeMs).toFixed(0)).join(", ")} ms`,
    );
    for (const r of rest) {
      expect(r.openMs + r.closeMs).toBeLessThan(NO_WAIT_MS);
      expect(r.energy.method).toBe("estimated");
      expect(r.energy.reason).toMatch(/sampler stalled .*not waited on until it samples again/);
    }

    // After the back-off, one request looks again (bounded by the cap), the others still do not.
    await sleep(STALL_RETRY_BASE_MS + 200);
    const looks = [];
    for (let i = 0; i < 3; i++) looks.push(await request());
    report(
      `stuck sampler after the back-off: ${looks.map((r) => (r.openMs + r.closeMs).toFixed(0)).join(", ")} ms`,
    );
    const waited = looks.filter((r) => r.openMs + r.closeMs >= NO_WAIT_MS);
    expect(waited.length).toBeLessThanOrEqual(1);
    for (const r of looks) {
      expect(r.openMs + r.closeMs).toBeLessThan(WAIT_CAP_MS + SLACK_MS);
      expect(r.energy.method).toBe("estimated");
      // The sampler's own stall, or its stuck thread's (the track let it go after the linger).
      expect(r.energy.reason).toMatch(/stalled/);
    }

    // The card answers again: the thread finishes the call it is in, samples at its pace, and
    // windows are measured again.
    sc.update({ devices: [CARD] });
    const t0 = performance.now();
    let measured = null;
    while (performance.now() - t0 < 15_000) {
      const r = await request(30);
      expect(r.openMs).toBeLessThan(WAIT_CAP_MS + SLACK_MS);
      if (r.energy.method === "sampled") {
        measured = r;
        break;
      }
      await sleep(100);
    }
    report(`stuck sampler: measured again ${(performance.now() - t0).toFixed(0)} ms after the card answered`);
    expect(measured).not.toBeNull();
  }, 60_000);

  it("a driver call that never returns holds one thread, however often the card's sampler is let go and started again", async () => {
    const warm = await request(50);
    expect(warm.energy.method).toBe("sampled");
    sc.update({ latency: SLOW.map((l) => ({ ...l, us: 60_000_000 })), devices: [CARD] });
    await sleep(50);
    const counts: number[] = [];
    for (let cycle = 0; cycle < 3; cycle++) {
      const r = await request();
      expect(r.openMs + r.closeMs).toBeLessThan(WAIT_CAP_MS + SLACK_MS);
      expect(r.energy.reason).toMatch(/stalled/);
      counts.push(samplerThreads());
      await sleep(LINGER_MS + 300); // the track lets the sampler go; the next window starts one
    }
    report(`driver call that never returns: sampler threads per cycle ${counts.join(", ")}`);
    for (const n of counts) expect(n).toBe(1);
    sc.update({ devices: [CARD] });
  }, 60_000);
});

/** The track keeps a sampler this long after its last window (ring-track.ts). */
const LINGER_MS = 5_000;

/** Threads of this process named giul-gpu0 (the native sampler's), stuck or running. */
function samplerThreads(): number {
  return readdirSync("/proc/self/task").filter((t) => {
    try {
      return readFileSync(`/proc/self/task/${t}/comm`, "utf8").trim() === "giul-gpu0";
    } catch {
      return false;
    }
  }).length;
}
