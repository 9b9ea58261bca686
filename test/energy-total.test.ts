import { describe, expect, it } from "vitest";
import { EnergyTotal, freshPowerW } from "../src/edges/energy-total.js";
import type { LatestSample } from "../src/track/track.js";

// hw.energy's counter (src/edges/energy-total.ts): never decreasing, never more than the card
// drew, across faults, counter resets and restarts of the sampler.

const S = 1_000_000_000n;
const track = {};

function sample(tS: number, cumulativeMj: number, extra: Partial<LatestSample> = {}): LatestSample {
  return {
    tNs: BigInt(Math.round(tS * 1e9)),
    index: 0,
    cumulativeMj,
    powerMw: 300_000,
    faults: 0,
    generation: 1,
    ...extra,
  };
}

describe("EnergyTotal", () => {
  it("starts at 0 on its first reading and adds the column's increases", () => {
    const t = new EnergyTotal();
    expect(t.totalJ).toBeNull();
    expect(t.observe(null, "energy", track)).toBeNull();
    expect(t.observe(sample(10, 5_000_000), "energy", track)).toBe(0);
    expect(t.observe(sample(11, 5_300_000), "energy", track)).toBeCloseTo(300, 9);
    expect(t.observe(sample(11, 5_300_000), "energy", track)).toBeCloseTo(300, 9); // same sample again
    expect(t.observe(sample(13, 5_900_000), "energy", track)).toBeCloseTo(900, 9);
    expect(t.totalJ).toBeCloseTo(900, 9);
  });

  it("never goes back: a counter that resets (driver reload) is a new base", () => {
    const t = new EnergyTotal();
    t.observe(sample(0, 9_000_000), "energy", track);
    t.observe(sample(1, 9_300_000), "energy", track);
    expect(t.observe(sample(2, 100_000), "energy", track)).toBeCloseTo(300, 9);
    expect(t.observe(sample(3, 400_000), "energy", track)).toBeCloseTo(600, 9);
  });

  it("does not count an increase across a fault the sampler recorded, nor one faster than any card", () => {
    const t = new EnergyTotal();
    t.observe(sample(0, 0), "energy", track);
    expect(t.observe(sample(1, 300_000, { faults: 1 }), "energy", track)).toBe(0);
    expect(t.observe(sample(2, 600_000, { faults: 1 }), "energy", track)).toBeCloseTo(300, 9);
    // 10 MJ in a second: a bogus jump, not counted; the next increase is.
    expect(t.observe(sample(3, 10_600_000, { faults: 1 }), "energy", track)).toBeCloseTo(300, 9);
    expect(t.observe(sample(4, 10_900_000, { faults: 1 }), "energy", track)).toBeCloseTo(600, 9);
  });

  it("counts the card's own counter across a restart of the sampler, not an integral of power", () => {
    const counter = new EnergyTotal();
    counter.observe(sample(0, 1_000_000, { generation: 1 }), "energy", track);
    // The sampler stopped for 20 s and ran again: the counter kept counting meanwhile.
    expect(counter.observe(sample(20, 7_000_000, { generation: 2 }), "energy", track)).toBeCloseTo(6000, 9);
    // A new track of the same card (selection probed again): still the card's counter.
    expect(counter.observe(sample(21, 7_300_000, { generation: 1 }), "energy", {})).toBeCloseTo(6300, 9);

    const integral = new EnergyTotal();
    integral.observe(sample(0, 50_000, { generation: 1 }), "integral", track);
    integral.observe(sample(1, 350_000, { generation: 1 }), "integral", track);
    // The integral starts again with each run: nothing is counted across, and it never goes back.
    expect(integral.observe(sample(20, 400_000, { generation: 2 }), "integral", track)).toBeCloseTo(300, 9);
    expect(integral.observe(sample(21, 700_000, { generation: 2 }), "integral", track)).toBeCloseTo(600, 9);
  });

  it("skips a sample whose cumulative read failed", () => {
    const t = new EnergyTotal();
    t.observe(sample(0, 0), "energy", track);
    expect(t.observe(sample(1, Number.NaN), "energy", track)).toBe(0);
    expect(t.observe(sample(2, 600_000), "energy", track)).toBeCloseTo(600, 9);
  });
});

describe("freshPowerW", () => {
  it("gives the newest power while it is younger than 1 s (or 5 periods), else null", () => {
    const s = sample(10, 0, { powerMw: 312_500 });
    expect(freshPowerW(s, 10e6, 10n * S + 500_000_000n)).toBeCloseTo(312.5, 9);
    expect(freshPowerW(s, 10e6, 11n * S + 1n)).toBeNull();
    expect(freshPowerW(s, 500e6, 12n * S)).toBeCloseTo(312.5, 9);
    expect(freshPowerW(sample(10, 0, { powerMw: Number.NaN }), 10e6, 10n * S)).toBeNull();
    expect(freshPowerW(null, 10e6, 10n * S)).toBeNull();
  });
});
