import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { amdScenarioForThisProcess } from "./fakes/amd-scenario.js";
import { fairShare, truthWindow } from "./fakes/fair-share.js";
import { amdReady } from "./fakes/paths.js";

// An MI300X partitioned into four GPUs (one socket, four processors in AMD SMI) on the libamd_smi
// double: partition 0's counter and power are the socket's, the others have none of their own.
// Every partition is metered on that counter and shares it: a window on any partition takes its
// share of the socket, and the shares add up to the socket's energy above its idle, counted once.

const SOCKET_IDLE_W = 150; // the socket's idle draw, as partition 0's counter counts it
const partition = (socket: number) => ({
  name: "AMD Instinct MI300X",
  socket,
  counter: false,
  powerSupported: false,
  power: 0,
});
const sc = amdScenarioForThisProcess({
  devices: [
    { name: "AMD Instinct MI300X", socket: 0, power: 520, powerNoiseW: 3 },
    partition(0),
    partition(0),
    partition(0),
  ],
});
const { Meter } = await import("../src/index.js");
afterAll(() => sc.remove());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const socketJ = (a: bigint, b: bigint) => sc.energyJ(0, a, b);
const on = (gpuIndex: number) => ({ name: `xcp${gpuIndex}`, gpuIndex, idleW: SOCKET_IDLE_W });

describe.runIf(amdReady())("a partitioned MI300X: one counter for its socket's partitions", () => {
  beforeAll(async () => {
    const m = await Meter.forNode(on(0)).open();
    await sleep(300);
    await m.close();
  });

  it("windows on three partitions share the socket: each its share, adding up to it once", async () => {
    const a = await Meter.forNode(on(1)).open();
    await sleep(100);
    const b = await Meter.forNode(on(2)).open();
    await sleep(100);
    const c = await Meter.forNode(on(3)).open();
    await sleep(250);
    await a.close();
    await sleep(100);
    await b.close();
    await c.close();
    const meters = [a, b, c];
    const truth = fairShare(meters.map(truthWindow), socketJ, SOCKET_IDLE_W);
    let sum = 0;
    let bars = 0;
    meters.forEach((m, i) => {
      const e = m.result();
      expect(e.backend).toBe("amdsmi_counter");
      expect(e.method, e.reason ?? "").toBe("sampled");
      expect(e.reason).toMatch(
        /partition 0's counter counts its socket's 4 partitions \(a partitioned MI300X\)/,
      );
      expect(Math.abs((e.joules as number) - (truth.shares[i] as number))).toBeLessThanOrEqual(
        e.uncertaintyJoules as number,
      );
      sum += e.joules as number;
      bars += e.uncertaintyJoules as number;
    });
    expect(Math.abs(sum - truth.unionAbove)).toBeLessThanOrEqual(bars);
  });
});
