import { AsyncLocalStorage } from "node:async_hooks";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// The diagnostics channels (src/diagnostics.ts): what fires, when, once, with what, against the
// NVML double's ground truth.

const sc = scenarioForThisProcess({ devices: [{ power: 310, counterStepMs: 10 }] });
const { Meter, GIUL_CHANNELS } = await import("../src/index.js");
type EnergyMessage = import("../src/index.js").EnergyMessage;
type WindowOpenMessage = import("../src/index.js").WindowOpenMessage;
type WindowCloseMessage = import("../src/index.js").WindowCloseMessage;

const ready = nativeReady();
afterAll(() => sc.remove());

const IDLE_W = 60;
const node = { name: "iris", gpuIndex: 0, idleW: IDLE_W };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Seen =
  | { kind: "open"; message: WindowOpenMessage }
  | { kind: "close"; message: WindowCloseMessage }
  | { kind: "energy"; message: EnergyMessage };

let seen: Seen[] = [];
const onOpen = (message: unknown) => seen.push({ kind: "open", message: message as WindowOpenMessage });
const onClose = (message: unknown) => seen.push({ kind: "close", message: message as WindowCloseMessage });
const onEnergy = (message: unknown) => seen.push({ kind: "energy", message: message as EnergyMessage });

function listen(): void {
  subscribe(GIUL_CHANNELS.windowOpen, onOpen);
  subscribe(GIUL_CHANNELS.windowClose, onClose);
  subscribe(GIUL_CHANNELS.energy, onEnergy);
}
function stop(): void {
  unsubscribe(GIUL_CHANNELS.windowOpen, onOpen);
  unsubscribe(GIUL_CHANNELS.windowClose, onClose);
  unsubscribe(GIUL_CHANNELS.energy, onEnergy);
}
const energies = () => seen.filter((s) => s.kind === "energy").map((s) => s.message as EnergyMessage);

describe.runIf(ready)("giul's diagnostics channels", () => {
  beforeAll(async () => {
    const m = await Meter.forNode(node).open();
    await m.close();
  });
  afterEach(() => {
    stop();
    seen = [];
  });

  it("names its channels giul:window:open, giul:window:close and giul:energy", () => {
    expect(GIUL_CHANNELS).toEqual({
      windowOpen: "giul:window:open",
      windowClose: "giul:window:close",
      energy: "giul:energy",
    });
  });

  it("fires open, close and energy once per window, in that order, with the window's edges and record", async () => {
    listen();
    const m = await Meter.forNode(node, { joulesPer1kHint: 4000 }).open();
    expect(seen.map((s) => s.kind)).toEqual(["open"]);
    await sleep(60);
    m.mark("generate");
    await sleep(20);
    await m.close();
    const e = m.result({ tokens: 300 });
    await sleep(5);
    expect(seen.map((s) => s.kind)).toEqual(["open", "close", "energy"]);
    const edges = m.edgeTimes();
    const [open, close, energy] = seen.map((s) => s.message) as [
      WindowOpenMessage,
      WindowCloseMessage,
      EnergyMessage,
    ];
    expect(open.meter).toBe(m);
    expect(open.backend).toBe("nvml_counter");
    expect(open.node.name).toBe("iris");
    expect(open.openNs).toBe(edges.open);
    expect(close.meter).toBe(m);
    // The open message comes back with the close and energy messages: what a subscriber kept on it.
    expect(close.opening).toBe(open);
    expect(energy.opening).toBe(open);
    expect(close.openNs).toBe(edges.open);
    expect(close.closeNs).toBe(edges.close);
    // The record published is the one result() returned: same object, tokens included.
    expect(energy.meter).toBe(m);
    expect(energy.energy).toBe(e);
    expect(energy.openNs).toBe(edges.open);
    expect(energy.closeNs).toBe(edges.close);
    expect(energy.energy.tokens).toBe(300);
    expect(energy.energy.method).toBe("sampled");
    // openMs / closeMs: the same edges on performance.now()'s clock (one pair of readings lines the
    // two clocks up, within microseconds: the tightest of a few, performance.now() read on both
    // sides, so that a preemption between two readings does not count).
    let hr = 0n;
    let now = 0;
    let width = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 5; i++) {
      const before = performance.now();
      const ns = process.hrtime.bigint();
      const after = performance.now();
      if (after - before < width) [width, hr, now] = [after - before, ns, (before + after) / 2];
    }
    const onPerformanceClock = (ns: bigint | null) => now - Number(hr - (ns as bigint)) / 1e6;
    for (const message of [open, close, energy])
      expect(Math.abs(message.openMs - onPerformanceClock(edges.open))).toBeLessThan(0.05);
    for (const message of [close, energy])
      expect(Math.abs(message.closeMs - onPerformanceClock(edges.close))).toBeLessThan(0.05);
    // … and it is the card's energy above idle over the window's own edges.
    const truth =
      sc.energyJ(0, edges.open as bigint, edges.close as bigint) -
      (IDLE_W * Number((edges.close as bigint) - (edges.open as bigint))) / 1e9;
    expect(Math.abs((energy.energy.joules as number) - truth)).toBeLessThanOrEqual(
      energy.energy.uncertaintyJoules as number,
    );
    // A later result() publishes nothing more.
    m.result({ tokens: 1 });
    await sleep(5);
    expect(energies()).toHaveLength(1);
  });

  it("publishes right after close's tick, without tokens, when result() is never called", async () => {
    listen();
    const m = await Meter.forNode(node, { joulesPer1kHint: 4000 }).open();
    await sleep(40);
    await m.close();
    expect(energies()).toHaveLength(0); // not yet: a result() in this tick would carry tokens
    await new Promise((r) => setImmediate(r));
    expect(energies()).toHaveLength(1);
    const published = energies()[0]?.energy;
    expect(published?.tokens).toBeNull();
    expect(published?.toJSON()).toEqual(m.result().toJSON());
  });

  it("carries measure()'s tokens, and a result() called after the tick does not publish again", async () => {
    listen();
    const { energy } = await Meter.forNode(node).measure(
      async () => {
        await sleep(30);
        return { tokens: 77 };
      },
      { tokens: (v) => v.tokens },
    );
    expect(energies().map((m) => m.energy)).toEqual([energy]);
    expect(energy.tokens).toBe(77);

    const late = await Meter.forNode(node).open();
    await sleep(30);
    await late.close();
    await sleep(10);
    late.result({ tokens: 9 });
    expect(energies()).toHaveLength(2);
    expect(energies()[1]?.energy.tokens).toBeNull();
  });

  it("publishes the record of a window that could not be measured too (unknown)", async () => {
    listen();
    const unmeterable = {
      name: "far",
      idleW: 10,
      isLocal: false,
      powerEndpoint: "http://127.0.0.1:9",
      timeoutMs: 50,
    };
    const m = await Meter.forNode(unmeterable).open();
    await m.close();
    await new Promise((r) => setImmediate(r));
    const [published] = energies();
    expect(published?.energy.method).toBe("unknown");
    expect(published?.energy.joules).toBeNull();
    expect(published?.node.name).toBe("far");
  });

  it("runs the open subscriber in the caller's async context", async () => {
    const als = new AsyncLocalStorage<string>();
    const stores: (string | undefined)[] = [];
    const capture = () => stores.push(als.getStore());
    subscribe(GIUL_CHANNELS.windowOpen, capture);
    try {
      await Promise.all(
        ["request-a", "request-b"].map((id) =>
          als.run(id, async () => {
            const m = await Meter.forNode(node).open();
            await sleep(10);
            await m.close();
          }),
        ),
      );
    } finally {
      unsubscribe(GIUL_CHANNELS.windowOpen, capture);
    }
    expect(stores.sort()).toEqual(["request-a", "request-b"]);
  });

  it("owes nothing when nobody listened at close: a subscriber joining later gets no stale record", async () => {
    const m = await Meter.forNode(node).open();
    await sleep(20);
    await m.close();
    listen();
    m.result({ tokens: 5 });
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual([]);
  });

  it("hands on no open message where nobody listened at open", async () => {
    const m = await Meter.forNode(node).open();
    listen();
    await sleep(20);
    await m.close();
    m.result();
    expect(seen.map((s) => s.kind)).toEqual(["close", "energy"]);
    const [close, energy] = seen.map((s) => s.message) as [WindowCloseMessage, EnergyMessage];
    expect(close.opening).toBeNull();
    expect(energy.opening).toBeNull();
    expect(energy.meter).toBe(m);
  });

  it("fires once per window at 200 concurrent windows", async () => {
    listen();
    const meters = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const m = await Meter.forNode(node).open();
        await sleep(5 + (i % 13));
        await m.close();
        if (i % 2 === 0) m.result({ tokens: i });
        return m;
      }),
    );
    await new Promise((r) => setImmediate(r));
    const byMeter = new Map<unknown, number>();
    for (const e of energies()) byMeter.set(e.meter, (byMeter.get(e.meter) ?? 0) + 1);
    expect(byMeter.size).toBe(200);
    expect([...byMeter.values()].every((n) => n === 1)).toBe(true);
    for (const [i, m] of meters.entries()) {
      const published = energies().find((e) => e.meter === m)?.energy;
      expect(published?.tokens).toBe(i % 2 === 0 ? i : null);
    }
    expect(seen.filter((s) => s.kind === "open")).toHaveLength(200);
    expect(seen.filter((s) => s.kind === "close")).toHaveLength(200);
  });
});
