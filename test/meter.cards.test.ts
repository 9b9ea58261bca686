import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fairShare, type TruthWindow } from "./fakes/fair-share.js";
import { nativeReady } from "./fakes/paths.js";
import { NVML, type PowerPoint, type ScenarioSpec, scenarioForThisProcess } from "./fakes/scenario.js";

// Windows over several cards (tensor parallel) on the NVML double with 8 cards, each drawing a
// different square wave: each window is charged its weighted share on every card it spans, among
// the windows on that card whatever other cards they span, and its figure is the sum. Every figure
// is scored against the scenario's exact energy, card by card.

const IDLE = [40, 42, 44, 46, 48, 50, 52, 54];

/** Card i: a square wave of its own height and period, so no two cards draw alike. */
function wave(i: number): PowerPoint[] {
  const pts: PowerPoint[] = [];
  const low = 90 + 15 * i;
  const high = 220 + 40 * i;
  const half = 31 + 7 * i;
  let on = false;
  for (let t = 0; t < 900_000; t += half) {
    pts.push([t, on ? high : low]);
    on = !on;
    pts.push([t, on ? high : low]);
  }
  return pts;
}

const uuid = (i: number) => `GPU-7e57ca4d-0000-4000-8000-00000000000${i}`;
const devices = IDLE.map((_, i) => ({ power: wave(i), counterStepMs: 10, uuid: uuid(i) }));
const spec: ScenarioSpec = { devices };
const sc = scenarioForThisProcess(spec);
const { Meter, isGiulError } = await import("../src/index.js");
type MeterT = import("../src/meter/meter.js").Meter;
type EnergyT = import("../src/rules/energy.js").Energy;

const ready = nativeReady();
afterAll(() => sc.remove());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A closed window's part on card `index`, as the truth sees it. */
function partOn(m: MeterT, index: number): TruthWindow | null {
  const t = m.edgeTimes();
  const part =
    t.cards === undefined
      ? m.node.gpuIndex === index || m.node.cards[0]?.gpuUuid === uuid(index)
        ? t
        : undefined
      : t.cards.find((c) => c.index === index);
  if (part === undefined || part.open === null || part.close === null) return null;
  return { open: part.open, close: part.close, weights: part.weights.map((w) => [w.tNs, w.weight] as const) };
}

/** Each window's exact share summed over its cards, and Σ over cards of each card's union above idle. */
function truth(windows: readonly MeterT[], cards: readonly number[]) {
  const shares = windows.map(() => 0);
  let union = 0;
  for (const card of cards) {
    const on = windows.map((m) => partOn(m, card));
    const present = on.flatMap((w, i) => (w === null ? [] : [[i, w] as const]));
    if (present.length === 0) continue;
    const fs = fairShare(
      present.map(([, w]) => w),
      (a, b) => sc.energyJ(card, a, b),
      IDLE[card] as number,
    );
    present.forEach(([i], k) => {
      shares[i] = (shares[i] as number) + (fs.shares[k] as number);
    });
    union += fs.unionAbove;
  }
  return { shares, union };
}

function node(name: string, gpuIndex: number | number[]) {
  const cards = Array.isArray(gpuIndex) ? gpuIndex : [gpuIndex];
  return {
    name,
    gpuIndex,
    idleW: Array.isArray(gpuIndex) ? cards.map((c) => IDLE[c] as number) : (IDLE[gpuIndex] as number),
  };
}

function expectWithinBar(e: EnergyT, exact: number): void {
  expect(e.method, e.reason ?? "").toBe("sampled");
  expect(e.uncertaintyJoules).not.toBeNull();
  expect(Math.abs((e.joules as number) - exact)).toBeLessThanOrEqual(e.uncertaintyJoules as number);
}

describe.runIf(ready)("a window over several cards (tensor parallel)", () => {
  beforeAll(async () => {
    // Probe every card and start its sampler.
    const m = await Meter.forNode(node("warm", [0, 1, 2, 3, 4, 5, 6, 7])).open();
    await m.close();
  });

  it("charges TP=4 windows their share on every card, with windows on other subsets overlapping", async () => {
    const tp = [0, 1, 2, 3];
    const windows: MeterT[] = [];
    const starts: Promise<MeterT>[] = [];
    // Staggered: four TP=4 windows of weights 1..4, one on card 0 alone, one on cards 2–3.
    for (let i = 0; i < 4; i++) {
      starts.push(Meter.forNode(node("tp4", tp), { weight: i + 1 }).open());
      await sleep(40);
    }
    starts.push(Meter.forNode(node("solo", 0)).open());
    await sleep(30);
    starts.push(Meter.forNode(node("pair", [2, 3]), { weight: 2 }).open());
    windows.push(...(await Promise.all(starts)));
    await sleep(120);
    (windows[1] as MeterT).setWeight(5);
    (windows[0] as MeterT).mark("prefill");
    for (const m of windows) {
      await sleep(50);
      await m.close();
    }
    const energies = windows.map((m) => m.result());
    const { shares, union } = truth(windows, tp);
    for (const [i, e] of energies.entries()) expectWithinBar(e, shares[i] as number);
    // The shares add up to the four cards above idle over their union.
    const sum = energies.reduce((s, e) => s + (e.joules as number), 0);
    const bars = energies.reduce((s, e) => s + (e.uncertaintyJoules as number), 0);
    expect(Math.abs(sum - union)).toBeLessThanOrEqual(bars);

    // The record: the top level is the sum; each card is listed.
    const e0 = energies[0] as EnergyT;
    expect(e0.cards?.map((c) => [c.index, c.uuid, c.backend, c.method])).toEqual(
      tp.map((i) => [i, uuid(i), "nvml_counter", "sampled"]),
    );
    const parts = e0.cards ?? [];
    expect(e0.joules).toBeCloseTo(
      parts.reduce((s, c) => s + (c.joules as number), 0),
      9,
    );
    expect(e0.uncertaintyJoules).toBeCloseTo(
      parts.reduce((s, c) => s + (c.uncertaintyJoules as number), 0),
      9,
    );
    expect(e0.idleW).toBe(tp.reduce((s, i) => s + (IDLE[i] as number), 0));
    expect(e0.backend).toBe("nvml_counter");
    const json = e0.toJSON();
    expect(json.cards?.map((c) => c.index)).toEqual(tp);
    expect(json.cards?.[2]).toMatchObject({ uuid: uuid(2), backend: "nvml_counter", contended: false });
    // Each card's part is within its own bar of the card's exact share.
    for (const card of parts) {
      const { shares: s } = truth(windows, [card.index as number]);
      expect(Math.abs((card.joules as number) - (s[0] as number))).toBeLessThanOrEqual(
        card.uncertaintyJoules as number,
      );
    }
    // Card 0 carried the solo window too, cards 2 and 3 the pair: 5 windows there, 4 on card 1.
    expect(parts.map((c) => c.concurrency?.max)).toEqual([5, 4, 5, 5]);
    expect(e0.concurrency?.max).toBe(5);
    // A stage is over all cards, within its bar of the truth over its edges.
    const stage = e0.stages.prefill as EnergyT;
    expect(stage.cards).toHaveLength(4);
    expect(stage.method).toBe("sampled");
    // A one-card node's record is giul 0.2's: no cards field.
    const solo = energies[4] as EnergyT;
    expect(solo.cards).toBeNull();
    expect("cards" in solo.toJSON()).toBe(false);
  });

  it("charges a TP=8 window every card at once, each within its bar", async () => {
    const all = [0, 1, 2, 3, 4, 5, 6, 7];
    const windows = await Promise.all([
      Meter.forNode(node("tp8", all)).open(),
      Meter.forNode(node("tp8", all), { weight: 3 }).open(),
    ]);
    await sleep(250);
    for (const m of windows) await m.close();
    const energies = windows.map((m) => m.result());
    const { shares, union } = truth(windows, all);
    for (const [i, e] of energies.entries()) expectWithinBar(e, shares[i] as number);
    const sum = energies.reduce((s, e) => s + (e.joules as number), 0);
    expect(Math.abs(sum - union)).toBeLessThanOrEqual(
      energies.reduce((s, e) => s + (e.uncertaintyJoules as number), 0),
    );
    expect(energies[0]?.cards).toHaveLength(8);
  });

  it("refuses a window one of whose cards refuses it, naming idleW, and leaves no part open on the others", async () => {
    // Card 2's floor is above its 700 W power limit: the window is refused at open(), and the
    // parts already opened on cards 0 and 1 are closed, so a window alone on card 0 afterwards is
    // charged the whole card above idle (a part left open would take half of it).
    const bad = { name: "refused", gpuIndex: [0, 1, 2], idleW: [IDLE[0] as number, IDLE[1] as number, 800] };
    const refusal = await Meter.forNode(bad)
      .open()
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(isGiulError(refusal) && refusal.field).toBe("idleW");
    const alone = await Meter.forNode(node("alone", 0)).open();
    await sleep(150);
    await alone.close();
    const { shares } = truth([alone], [0]);
    expectWithinBar(alone.result(), shares[0] as number);
  });

  it("names a card lost mid-window: the window is not sampled, the other cards' parts are", async () => {
    const m = await Meter.forNode(node("lost", [4, 5, 6]), { joulesPer1kHint: 2000 }).open();
    await sleep(150);
    sc.update({
      devices: devices.map((d, i) =>
        i === 5 ? { ...d, errors: [{ fromMs: sc.nowMs(), code: NVML.ERROR_GPU_IS_LOST }] } : d,
      ),
    });
    await sleep(150);
    await m.close();
    const e = m.result({ tokens: 100 });
    sc.update(spec);
    expect(e.method).toBe("estimated");
    expect(e.joules).toBe(200);
    expect(e.reason).toMatch(/card 5 \(GPU-[^)]*5\)/);
    expect(e.reason).not.toMatch(/card [46]/);
    const [c4, c5, c6] = e.cards ?? [];
    expect(c5?.method).toBe("unknown");
    expect(c5?.joules).toBeNull();
    expect(c4?.method).toBe("sampled");
    expect(c6?.method).toBe("sampled");
    // Nothing of the lost card is a fabricated zero, and no sum stands for the whole.
    expect(e.measuredJoules).toBeNull();
    await sleep(300); // let the card recover for the next test
  });

  it("meters several cards of one remote giul-agent (?gpu= per card)", async () => {
    const { startAgent } = await import("../src/agent/server.js");
    const agent = await startAgent({ port: 0, gpus: [1, 3], warn: () => {} });
    try {
      const remote = {
        name: "remote-tp",
        isLocal: false,
        powerEndpoint: agent.url,
        gpuIndex: [1, 3],
        idleW: [IDLE[1] as number, IDLE[3] as number],
        timeoutMs: 2000,
      };
      const m = await Meter.forNode(remote).open();
      await sleep(400);
      await m.close();
      const e = m.result();
      expect(e.backend).toBe("remote_agent");
      expect(e.cards?.map((c) => c.index)).toEqual([1, 3]);
      expectWithinBar(e, truth([m], [1, 3]).shares[0] as number);
      for (const c of e.cards ?? []) {
        const exact = truth([m], [c.index as number]).shares[0] as number;
        expect(Math.abs((c.joules as number) - exact)).toBeLessThanOrEqual(c.uncertaintyJoules as number);
      }
      // The same cards named to the agent by UUID: their indices are the agent's, unknown here.
      const { gpuIndex: _byIndex, ...agentNode } = remote;
      const named = await Meter.forNode({
        ...agentNode,
        gpuUuid: [uuid(3), uuid(1)],
        idleW: [IDLE[3] as number, IDLE[1] as number],
      }).open();
      await sleep(300);
      await named.close();
      const n = named.result();
      expect(n.method, n.reason ?? "").toBe("sampled");
      expect(n.cards?.map((c) => [c.index, c.uuid])).toEqual([
        [null, uuid(3)],
        [null, uuid(1)],
      ]);
      const t = named.edgeTimes();
      const exact = [3, 1].reduce((sum, card, i) => {
        const part = t.cards?.[i];
        const w = {
          open: part?.open as bigint,
          close: part?.close as bigint,
          weights: (part?.weights ?? []).map((x) => [x.tNs, x.weight] as const),
        };
        const fs = fairShare([w], (a, b) => sc.energyJ(card, a, b), IDLE[card] as number);
        return sum + (fs.shares[0] as number);
      }, 0);
      expect(Math.abs((n.joules as number) - exact)).toBeLessThanOrEqual(n.uncertaintyJoules as number);
    } finally {
      await agent.close();
    }
  });

  it("names cards by UUID: found among NVML's cards, sharing each with windows that name it by index", async () => {
    // Cards 6 and 1 by UUID (in that order), card 4 by UUID and by index at once.
    const windows = await Promise.all([
      Meter.forNode({
        name: "tp-uuid",
        gpuUuid: [uuid(6), uuid(1)],
        idleW: [IDLE[6], IDLE[1]],
      } as never).open(),
      Meter.forNode({ name: "one-uuid", gpuUuid: uuid(4), idleW: IDLE[4] } as never).open(),
      Meter.forNode(node("one-index", 4), { weight: 3 }).open(),
    ]);
    await sleep(250);
    for (const m of windows) await m.close();
    const [tp, byUuid, byIndex] = windows.map((m) => m.result()) as [EnergyT, EnergyT, EnergyT];
    expect(tp.cards?.map((c) => [c.index, c.uuid])).toEqual([
      [6, uuid(6)],
      [1, uuid(1)],
    ]);
    expectWithinBar(tp, truth([windows[0] as MeterT], [6, 1]).shares[0] as number);
    // Card 4 is one card on one ledger whatever it is called: weights 1 and 3 share it.
    const { shares, union } = truth(windows.slice(1), [4]);
    expectWithinBar(byUuid, shares[0] as number);
    expectWithinBar(byIndex, shares[1] as number);
    expect(Math.abs((byUuid.joules as number) + (byIndex.joules as number) - union)).toBeLessThanOrEqual(
      (byUuid.uncertaintyJoules as number) + (byIndex.uncertaintyJoules as number),
    );
    expect(byUuid.cards).toBeNull();
  });

  it("says which UUID no card has, and never charges a zero for it", async () => {
    const absent = "GPU-7e57ca4d-0000-4000-8000-0000000000ff";
    const m = await Meter.forNode({ name: "absent", gpuUuid: [uuid(2), absent], idleW: 40 } as never, {
      joulesPer1kHint: 2000,
    }).open();
    await sleep(100);
    await m.close();
    const e = m.result({ tokens: 50 });
    expect(e.method).toBe("estimated");
    expect(e.joules).toBe(100);
    expect(e.reason).toContain(`no card on this host has UUID ${absent}`);
    expect(e.cards?.[1]).toMatchObject({ index: null, uuid: absent, method: "unknown", joules: null });
    expect(e.cards?.[0]).toMatchObject({ index: 2, method: "sampled" });
  });

  it("refuses bad node fields with the field named", () => {
    const bad: [unknown, RegExp][] = [
      [{ name: "n", gpuIndex: [], idleW: 40 }, /node\.gpuIndex: expected at least one/],
      [{ name: "n", gpuIndex: [0, 0], idleW: 40 }, /node\.gpuIndex\[1\]: card 0 is listed twice/],
      [{ name: "n", gpuIndex: [0, -1], idleW: 40 }, /node\.gpuIndex\[1\]: expected a non-negative integer/],
      [
        { name: "n", gpuIndex: [0, 1], idleW: [40] },
        /node\.idleW: expected one idle draw per card of gpuIndex \(2\)/,
      ],
      [{ name: "n", gpuIndex: [0, 1], idleW: [40, "x"] }, /node\.idleW\[1\]: expected a finite number/],
      [
        { name: "n", gpuIndex: 0, idleW: [40, 41] },
        /node\.idleW: expected one idle draw per card of gpuIndex \(1\)/,
      ],
      [
        { name: "n", gpuIndex: 0, gpuUuid: uuid(0), idleW: 40 },
        /node\.gpuUuid: name the cards by gpuIndex or by gpuUuid, not both/,
      ],
      [
        { name: "n", gpuUuid: [uuid(0), "a b"], idleW: 40 },
        /node\.gpuUuid\[1\]: expected a card's or MIG slice's UUID/,
      ],
      [
        { name: "n", gpuUuid: [uuid(0), uuid(0)], idleW: 40 },
        /node\.gpuUuid\[1\]: card GPU-\S+ is listed twice/,
      ],
      [{ name: "n", gpuUuid: [], idleW: 40 }, /node\.gpuUuid: expected at least one card UUID/],
      [
        { name: "n", gpuUuid: [uuid(0), uuid(1)], idleW: [40, 41, 42] },
        /node\.idleW: expected one idle draw per card of gpuUuid \(2\)/,
      ],
    ];
    for (const [n, message] of bad) {
      let thrown: unknown;
      try {
        Meter.forNode(n as never);
      } catch (error) {
        thrown = error;
      }
      expect(isGiulError(thrown), String(thrown)).toBe(true);
      expect(String((thrown as Error).message)).toMatch(message);
    }
  });
});
