import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// The rules of shared and exclusive attribution, window by window, on the native counter path:
// what each mode reports, the idle floor windows on a card share, weights, and the rules that
// still hold per window (no measured zero, contention).

const IDLE_W = 60;
const sc = scenarioForThisProcess({
  devices: [
    { power: 260, counterStepMs: 10 }, // 0: a steady 260 W, 200 W above idle
    { power: 50, counterStepMs: 10 }, // 1: below the idle floor the test gives it
    {
      power: 300,
      counterStepMs: 10,
      procs: [{ pid: 7001, usedMib: 4096, name: "python3 train.py" }],
    }, // 2: a tenant resident
  ],
});
const { Meter, isGiulError } = await import("../src/index.js");

const ready = nativeReady();
afterAll(() => sc.remove());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function truthAbove(device: number, from: bigint, to: bigint): number {
  return sc.energyJ(device, from, to) - (IDLE_W * Number(to - from)) / 1e9;
}

describe.runIf(ready)("shared and exclusive attribution", () => {
  const node = { name: "iris", gpuIndex: 0, idleW: IDLE_W };
  // Under test:worker, the windows below are the worker's (those opened before it is ready are not).
  beforeAll(async () => {
    const warm = await Meter.forNode(node).open();
    await warm.close();
  });

  it("two equal windows over the same span each get half of the card; alone, the whole card", async () => {
    const [a, b] = await Promise.all([Meter.forNode(node).open(), Meter.forNode(node).open()]);
    await sleep(300);
    await Promise.all([a.close(), b.close()]);
    const ea = a.result();
    const eb = b.result();
    const ta = a.edgeTimes();
    const tb = b.edgeTimes();
    // Both open from the later opening to the earlier closing: the overlap is split in two.
    const truthA = truthAbove(0, ta.open as bigint, ta.close as bigint);
    const truthB = truthAbove(0, tb.open as bigint, tb.close as bigint);
    expect(ea.attribution).toBe("shared");
    expect(ea.method).toBe("sampled");
    expect(eb.method).toBe("sampled");
    expect(Math.abs((ea.joules as number) - truthA / 2)).toBeLessThan(truthA * 0.02 + 2);
    expect(Math.abs((ea.joules as number) + (eb.joules as number) - (truthA + truthB) / 2)).toBeLessThan(3);
    // The whole card over A's edges, within one counter step at the card's power (10 ms × 260 W).
    expect(Math.abs((ea.cardJoules as number) - truthA)).toBeLessThanOrEqual(truthA * 0.01 + 2.6);
    expect(ea.concurrency?.max).toBe(2);
    expect(ea.concurrency?.mean).toBeGreaterThan(1.9);
    expect(ea.toJSON()).toMatchObject({ attribution: "shared", concurrency_max: 2 });

    const alone = await Meter.forNode(node).open();
    await sleep(200);
    await alone.close();
    const e = alone.result();
    const t = alone.edgeTimes();
    expect(e.concurrency).toEqual({ mean: 1, max: 1 });
    expect(e.joules).toBeCloseTo(e.cardJoules as number, 6);
    expect(
      Math.abs((e.joules as number) - truthAbove(0, t.open as bigint, t.close as bigint)),
    ).toBeLessThanOrEqual(e.uncertaintyJoules as number);
  });

  it("back-to-back windows whose closes are not awaited before the next opens are each the whole card", async () => {
    const closing: Promise<void>[] = [];
    const meters = [];
    for (let i = 0; i < 20; i++) {
      const m = await Meter.forNode(node).open();
      await sleep(30);
      closing.push(m.close()); // the next window opens while this one is still settling
      meters.push(m);
    }
    await Promise.all(closing);
    for (const m of meters) {
      const e = m.result();
      const t = m.edgeTimes();
      expect(e.method, e.reason ?? "").toBe("sampled");
      expect(e.concurrency?.max).toBe(1);
      expect(
        Math.abs((e.joules as number) - truthAbove(0, t.open as bigint, t.close as bigint)),
      ).toBeLessThanOrEqual(e.uncertaintyJoules as number);
    }
  });

  it("weights split the card in proportion, and setWeight takes effect from the call", async () => {
    const heavy = await Meter.forNode(node, { weight: 3 }).open();
    const light = await Meter.forNode(node).open();
    await sleep(200);
    light.setWeight(3); // from here on they are equal
    await sleep(200);
    await Promise.all([heavy.close(), light.close()]);
    const th = heavy.edgeTimes();
    const tl = light.edgeTimes();
    expect(tl.weights.map((w) => w.weight)).toEqual([1, 3]);
    // 200 W above idle: the first 200 ms split 3:1, the next 200 ms 1:1.
    const first = truthAbove(0, tl.open as bigint, tl.weights[1]?.tNs as bigint);
    const second = truthAbove(0, tl.weights[1]?.tNs as bigint, th.close as bigint);
    const el = light.result();
    expect(el.method).toBe("sampled");
    expect(Math.abs((el.joules as number) - (first / 4 + second / 2))).toBeLessThan(2);
    expect(light.weight).toBe(3);
  });

  it("exclusive reports the whole card, and an exclusive window that overlapped another is demoted", async () => {
    const solo = await Meter.forNode(node, { attribution: "exclusive" }).open();
    await sleep(150);
    await solo.close();
    const es = solo.result();
    expect(es.attribution).toBe("exclusive");
    expect(es.method).toBe("sampled");
    expect(es.joules).toBe(es.cardJoules);

    const ex = await Meter.forNode(node, { attribution: "exclusive", joulesPer1kHint: 1000 }).open();
    const other = await Meter.forNode(node).open();
    await sleep(150);
    await Promise.all([ex.close(), other.close()]);
    const e = ex.result({ tokens: 7 });
    expect(e.method).toBe("estimated");
    expect(e.joules).toBe(7);
    expect(e.reason).toMatch(/exclusive attribution, but up to 1 other window was open on the card/);
    const t = ex.edgeTimes();
    expect(
      Math.abs((e.measuredJoules as number) - truthAbove(0, t.open as bigint, t.close as bigint)),
    ).toBeLessThan(4);
    // The shared window beside it still got its share: the exclusive one holds weight 1.
    expect(other.result().method).toBe("sampled");
  });

  it("windows on one card share its idle floor: a different idleW while one is open is refused", async () => {
    const m = await Meter.forNode(node).open();
    const err = await Meter.forNode({ name: "other", gpuIndex: 0, idleW: 75 })
      .open()
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(isGiulError(err, "INVALID_NODE")).toBe(true);
    expect((err as { field?: string }).field).toBe("idleW");
    expect(String(err)).toMatch(/idleW: 75 W, but windows open on the same card charge its idle as 60 W/);
    await sleep(100);
    await m.close();
    expect(m.result().reason).toBeNull();
    expect(m.result().method).toBe("sampled");
    // Once none is open, another floor may be used.
    const later = await Meter.forNode({ name: "other", gpuIndex: 0, idleW: 75 }).open();
    await later.close();
  });

  it("bad weights and attributions are programmer errors naming the field", () => {
    for (const weight of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, "2" as unknown as number]) {
      let thrown: unknown = null;
      try {
        Meter.forNode(node, { weight });
      } catch (e) {
        thrown = e;
      }
      expect(isGiulError(thrown, "INVALID_OPTION")).toBe(true);
      expect((thrown as { field?: string }).field).toBe("weight");
    }
    expect(() => Meter.forNode(node, { attribution: "split" as "shared" })).toThrow(/attribution/);
  });

  it("setWeight only while open, with a valid weight", async () => {
    const m = Meter.forNode(node);
    expect(() => m.setWeight(2)).toThrow(/setWeight\(\): the window is new/);
    await m.open();
    expect(() => m.setWeight(0)).toThrow(/weight: expected a finite number > 0, got 0/);
    await m.close();
    expect(() => m.setWeight(2)).toThrow(/setWeight\(\): the window is closed/);
  });

  it("a share at or below idle is not a sampled zero", async () => {
    const low = { name: "low", gpuIndex: 1, idleW: IDLE_W };
    const [a, b] = await Promise.all([Meter.forNode(low).open(), Meter.forNode(low).open()]);
    await sleep(150);
    await Promise.all([a.close(), b.close()]);
    const e = a.result();
    expect(e.method).toBe("unknown");
    expect(e.joules).toBeNull();
    expect(e.reason).toMatch(/this window's share was -[\d.]+ J above idle .*a failed measurement/);
    expect(e.measuredJoules).toBeLessThan(0);
  });

  it("a tenant on the card still demotes every shared window it touches", async () => {
    const shared = { name: "shared", gpuIndex: 2, idleW: IDLE_W, servingMatch: "vllm" };
    const [a, b] = await Promise.all([Meter.forNode(shared).open(), Meter.forNode(shared).open()]);
    await sleep(150);
    await Promise.all([a.close(), b.close()]);
    for (const m of [a, b]) {
      const e = m.result();
      expect(e.contended).toBe(true);
      expect(e.method).toBe("unknown");
      expect(e.measuredJoules).toBeGreaterThan(0);
      expect(e.reason).toMatch(/python3 train\.py \(pid 7001\)/);
    }
  });
});
