import { describe, expect, it } from "vitest";
import { PowerReadings } from "../src/edges/power-model.js";

// Whether a sensor refreshes at every read (src/edges/read-runs.ts), from readings as the sampler
// takes them: every 5 ms, a little dithered, each the value of the sensor's last refresh.

const PERIOD_MS = 5;

/** Reads a sensor refreshing every `holdMs` (a new value each time: noise at mW) for `reads` reads. */
function read(
  holdMs: number,
  reads: number,
  quantumMw = 1,
  value?: (refresh: number) => number,
): PowerReadings {
  const p = new PowerReadings(4096);
  p.quantumMw = quantumMw;
  for (let k = 0; k < reads; k++) {
    const t = (k * PERIOD_MS + ((k * 0.618) % 1) * 0.8) * 1e6;
    const refresh = Math.floor(t / (holdMs * 1e6));
    const mw = value ? value(refresh) : 200_000 + ((refresh * 7919) % 997);
    p.push(t, 30e3, mw);
  }
  return p;
}

describe("a sensor that refreshes at every read, told from one that holds", () => {
  it("a sensor new at every read is fresh; one whose first run to end spanned two reads is not", () => {
    expect(read(1, 200).fresh()).toBe(true);
    expect(read(1, 3).fresh()).toBe(true);
    // Held 11 ms: its first value to be seen whole was read twice.
    expect(read(11, 12).fresh()).toBe(false);
  });

  it("a sensor held longer than a read is not: 11 ms (most values seen twice), 7 ms and 6 ms (some)", () => {
    for (const hold of [11, 7, 6, 100]) expect(read(hold, 400).fresh(), `${hold} ms`).toBe(false);
  });

  it("whole-watt readings that repeat by their resolution are fresh while most runs are one read", () => {
    // Steady 263 W with a watt of noise: each read shows 262, 263 or 264 W, a third of them the same
    // as the read before.
    const flicker = (refresh: number) =>
      262_000 + 1000 * Math.floor(((Math.abs(Math.sin(refresh * 12.9898)) * 43758.5453) % 1) * 3);
    expect(read(1, 400, 1000, flicker).fresh()).toBe(true);
    // The same readings at mW resolution would be a sensor holding its values.
    expect(read(1, 400, 1, flicker).fresh()).toBe(false);
    // Whole watts held 11 ms: most runs two reads or more.
    expect(read(11, 400, 1000).fresh()).toBe(false);
  });
});
