import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { amdScenarioForThisProcess } from "./fakes/amd-scenario.js";
import { fairShare, truthWindow } from "./fakes/fair-share.js";
import { amdReady } from "./fakes/paths.js";

// An MI250X's die pair on the libamd_smi double: die 0's counter counts the energy of both dies,
// die 1's counts none (energyOf, counterRate 0). Both dies are metered on die 0's counter and
// share it: a window on either die takes its share of the pair, and the shares add up to the
// pair's energy above its idle draw, counted once.

const PAIR_IDLE_W = 120; // the pair's idle draw: both dies, as die 0's counter counts them
const sc = amdScenarioForThisProcess({
  devices: [
    { name: "AMD Instinct MI250X", power: 300, powerNoiseW: 3, amdPower: "average", energyOf: 1 },
    { name: "AMD Instinct MI250X", power: 200, powerNoiseW: 3, amdPower: "average", counterRate: 0 },
  ],
});
const { Meter } = await import("../src/index.js");
afterAll(() => sc.remove());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pairJ = (a: bigint, b: bigint) => sc.energyJ(0, a, b) + sc.energyJ(1, a, b);
const die = (gpuIndex: number) => ({ name: `die${gpuIndex}`, gpuIndex, idleW: PAIR_IDLE_W });

describe.runIf(amdReady())("an MI250X die pair: one counter for both dies", () => {
  beforeAll(async () => {
    for (const i of [0, 1]) {
      const m = await Meter.forNode(die(i)).open();
      await sleep(200);
      await m.close();
    }
  });

  it("a window on the die that counts nothing is metered on its partner's counter, and says so", async () => {
    const m = await Meter.forNode(die(1)).open();
    await sleep(400);
    await m.close();
    const e = m.result();
    const t = m.edgeTimes();
    const truth =
      pairJ(t.open as bigint, t.close as bigint) -
      (PAIR_IDLE_W * Number((t.close as bigint) - (t.open as bigint))) / 1e9;
    expect(e.backend).toBe("amdsmi_counter");
    expect(e.reason).toMatch(/die 0's counter counts the energy of dies 0 and 1 \(an MI250 die pair\)/);
    expect(Math.abs((e.joules as number) - truth)).toBeLessThanOrEqual(e.uncertaintyJoules as number);
  });

  it("windows on both dies share the pair: each its share, adding up to the pair once", async () => {
    const a = await Meter.forNode(die(0)).open();
    await sleep(150);
    const b = await Meter.forNode(die(1)).open();
    await sleep(300);
    await a.close();
    await sleep(150);
    await b.close();
    const windows = [a, b].map(truthWindow);
    const truth = fairShare(windows, pairJ, PAIR_IDLE_W);
    const [ea, eb] = [a.result(), b.result()];
    let sum = 0;
    let bars = 0;
    [ea, eb].forEach((e, i) => {
      expect(e.method, e.reason ?? "").toBe("sampled");
      expect(Math.abs((e.joules as number) - (truth.shares[i] as number))).toBeLessThanOrEqual(
        e.uncertaintyJoules as number,
      );
      sum += e.joules as number;
      bars += e.uncertaintyJoules as number;
    });
    // Counted once: the pair's energy above its idle over the union, not twice die 1's.
    expect(Math.abs(sum - truth.unionAbove)).toBeLessThanOrEqual(bars);
  });
});
