import { describe, expect, it } from "vitest";
import { sensorRows, sensorSeen } from "../src/cli/sensor.js";
import type { DeviceSpec } from "./fakes/scenario.js";
import { type SamplerModel, SyntheticCard } from "./fakes/synthetic.js";

// What giul-probe prints of a card's counter (src/cli/sensor.ts), from what the fused counter saw
// on the synthetic card: the counter's own cadence, whatever the power readings are.

/** The "counter updates" row after `seconds` of a card read as `sampler` says. */
function counterRow(device: DeviceSpec, sampler: SamplerModel, seconds = 2): string {
  const card = new SyntheticCard({ power: 180, ...device }, sampler);
  while (card.lastSampleT() < seconds * 1e9) card.advanceOne();
  const rows = sensorRows(sensorSeen(card.track.fusionReport(), "amdsmi_counter", seconds));
  return (rows.find(([name]) => name === "counter updates") as readonly [string, string])[1];
}

describe("giul-probe's counter row", () => {
  it("says a counter updating every ms changes at every read, with averaged power only (MI250)", () => {
    const row = counterRow({ counterStepMs: 1, instantField: false }, { amd: true, periodMs: 10 });
    expect(row).toMatch(/^at every read: faster than it is read/);
  });

  it("says the same with instant power (MI300X)", () => {
    expect(counterRow({ counterStepMs: 1 }, { amd: true, periodMs: 10 })).toMatch(/^at every read/);
  });

  it("times a 100 ms counter read every 10 ms, with averaged power only", () => {
    const row = counterRow({ counterStepMs: 100, instantField: false }, { periodMs: 10 });
    expect(row).toMatch(/^every (9[5-9]|10[0-5])(\.\d)? ms \(median of \d+ well-read updates/);
  });
});
