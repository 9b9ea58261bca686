import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counterAdvanceBounds } from "./fakes/card-energy.js";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// The cards the exporters report (src/select/in-use.ts, src/exporters/cards.ts): who each card
// is, its power and its never-decreasing energy, read from the running sampler against the NVML
// double's ground truth, with no NVML call on the JavaScript thread.

const callsFile = join(mkdtempSync(join(tmpdir(), "giul-calls-")), "calls.txt");
writeFileSync(callsFile, "");
const POWER_W = 310;
const sc = scenarioForThisProcess({
  driverVersion: "575.51.03",
  callsFile,
  callsTid: true,
  devices: [{ name: "NVIDIA H200", uuid: "GPU-a1b2c3d4-0000-4000-8000-000000000042", power: POWER_W }],
});
const { Meter } = await import("../src/index.js");
const { cardsInUse, cardInUse } = await import("../src/select/in-use.js");
const { CardFigureReader } = await import("../src/exporters/cards.js");
const { cardAttributes } = await import("../src/exporters/names.js");

const ready = nativeReady();
afterAll(() => sc.remove());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const node = { name: "iris", gpuIndex: 0, idleW: 60 };

describe.runIf(ready)("the cards in use", () => {
  beforeAll(async () => {
    const m = await Meter.forNode(node).open();
    await m.close();
  });

  it("lists the local card a Meter opened, named as the hardware conventions want", () => {
    const cards = cardsInUse();
    expect(cards.map((c) => [c.gpuIndex, c.backend])).toEqual([[0, "nvml_counter"]]);
    expect(cardInUse(0)?.identity).toEqual({
      id: "GPU-a1b2c3d4-0000-4000-8000-000000000042",
      name: "NVIDIA H200",
      vendor: "NVIDIA",
      driverVersion: "575.51.03",
    });
    expect(cardAttributes(cards[0]?.identity as never)).toEqual({
      "hw.id": "GPU-a1b2c3d4-0000-4000-8000-000000000042",
      "hw.type": "gpu",
      "hw.name": "NVIDIA H200",
      "hw.vendor": "NVIDIA",
      "hw.driver_version": "575.51.03",
    });
  });

  it("reads power and an energy that advances by the scenario's energy, with no NVML call on this thread", async () => {
    const m = await Meter.forNode(node).open(); // keeps the sampler running
    try {
      const reader = new CardFigureReader();
      const readings = cardInUse(0)?.readings;
      const before = readFileSync(callsFile, "utf8").length;
      const at = () => readings?.latest()?.tNs as bigint;
      const b1 = at();
      const first = reader.read();
      const a1 = at();
      expect(first).toHaveLength(1);
      expect(first[0]?.energyJ).toBe(0);
      expect(first[0]?.powerW).toBeCloseTo(POWER_W, 6);
      for (let i = 0; i < 100; i++) reader.read();
      await sleep(900);
      const b2 = at();
      const second = reader.read();
      const a2 = at();
      const calls = readFileSync(callsFile, "utf8").slice(before).trim().split("\n");
      // Every NVML call meanwhile was the sampler's own thread's.
      expect(calls.length).toBeGreaterThan(20);
      expect(calls.filter((line) => line.endsWith(` ${process.pid}`))).toEqual([]);
      // The total advanced by the card's energy between the two samples read, within the
      // counter's update step (10 ms at 310 W).
      const { lo, hi } = counterAdvanceBounds(
        sc,
        0,
        { before: b1, after: a1 },
        { before: b2, after: a2 },
        POWER_W * 0.01,
      );
      expect(lo).toBeGreaterThan(250);
      expect(second[0]?.energyJ).toBeGreaterThanOrEqual(lo);
      expect(second[0]?.energyJ).toBeLessThanOrEqual(hi);
    } finally {
      await m.close();
    }
  });
});
