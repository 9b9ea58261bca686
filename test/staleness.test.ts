import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CounterStaleness } from "../src/edges/staleness.js";

// The bound on how often the energy counter updates (src/edges/staleness.ts), against counters
// whose update instants are known: a regular lattice read at random instants. The bound must never
// fall below the true interval (else a read's value could be staler than it says), and a counter
// that keeps its cadence must never be called stalled; one that stops for three updates must be,
// once a read sees the value standing that long.

/** Reads at `reads` (ns) of a counter updating every `s` ns from `phase`: what the fusion sees. */
function feed(st: CounterStaleness, s: number, phase: number, reads: number[]): string | null {
  const value = (t: number) => Math.floor((t - phase) / s);
  let last = Number.NaN;
  let prevRead = Number.NaN;
  // The read before the current value's first read (its update came after it), as fusion.ts aLo.
  let before = Number.NaN;
  let firstHi = Number.NaN; // this value's first read
  let said: string | null = null;
  for (const t of reads) {
    const v = value(t);
    if (v !== last) {
      // Two updates lie between the read before the previous value's first and this read.
      if (!Number.isNaN(last)) st.step(before, t);
      last = v;
      before = prevRead;
      firstHi = t;
    } else said ??= st.stalled(firstHi, t);
    prevRead = t;
  }
  return said;
}

describe("CounterStaleness", () => {
  it("never bounds the update interval below the truth, and never calls a steady counter stalled", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 10, max: 100 }),
        fc.integer({ min: 0, max: 99 }),
        fc.array(fc.integer({ min: 1, max: 400 }), { minLength: 5, maxLength: 200 }),
        (sMs, phaseMs, gapsMs) => {
          const s = sMs * 1e6;
          const reads: number[] = [];
          let t = 0;
          for (const g of gapsMs) {
            t += g * 1e6 + 0.37e6;
            reads.push(t);
          }
          const st = new CounterStaleness();
          expect(feed(st, s, phaseMs * 1e6, reads)).toBeNull();
          expect(st.bound()).toBeGreaterThanOrEqual(s);
        },
      ),
    );
  });

  it("bounds a 100 ms counter read every 2 ms to within 10 % after three updates, and finds a stall", () => {
    const st = new CounterStaleness();
    const reads = Array.from({ length: 160 }, (_, i) => i * 2e6 + 1e5);
    expect(feed(st, 100e6, 30e6, reads)).toBeNull();
    expect(st.bound()).toBeGreaterThanOrEqual(100e6);
    expect(st.bound()).toBeLessThanOrEqual(1.1 * 1.1 * 100e6);
    // The counter then stands still for 300 ms, read every 50 ms.
    const frozen = 330e6;
    let said: string | null = null;
    for (let t = 340e6; t < 640e6; t += 50e6) said ??= st.stalled(frozen, t);
    expect(said).toMatch(
      /stood still for at least \d+ ms, where it updates at least every \d+ ms: a stalled counter/,
    );
  });

  it("knows nothing before two steps", () => {
    const st = new CounterStaleness();
    expect(st.bound()).toBe(Number.POSITIVE_INFINITY);
    st.step(0, 120e6);
    expect(st.bound()).toBe(Number.POSITIVE_INFINITY);
    expect(st.stalled(0, 10e9)).toBeNull();
  });
});
