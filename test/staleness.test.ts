import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CounterStaleness } from "../src/edges/staleness.js";

// The bound on how often the energy counter updates (src/edges/staleness.ts), against counters
// whose update instants are known. The bound must never fall below an interval the reads have
// placed (else a read's value could be staler than it says), a counter that keeps its cadence must
// never be seen standing too long, and what is seen standing is covered from then on: a slower
// cadence costs one judgement, never every later window.

/** Reads at `reads` (ns) of a counter updating at `updates` (ns, sorted): what the fusion sees. */
function feed(st: CounterStaleness, updates: number[], reads: number[]): number {
  const value = (t: number) => {
    let n = 0;
    while (n < updates.length && (updates[n] as number) <= t) n++;
    return n;
  };
  let last = Number.NaN;
  let prevRead = Number.NaN;
  let lo = Number.NaN; // the current value's update lies in (lo, hi]
  let hi = Number.NaN;
  let standsLong = 0;
  for (const t of reads) {
    const v = value(t);
    if (v !== last) {
      if (!Number.isNaN(last)) st.step(lo, hi, prevRead, t);
      last = v;
      lo = Number.isNaN(prevRead) ? Number.NEGATIVE_INFINITY : prevRead;
      hi = t;
    } else if (st.standsLong(hi, t)) standsLong++;
    prevRead = t;
  }
  return standsLong;
}

const lattice = (s: number, phase: number, until: number) =>
  Array.from({ length: Math.ceil((until - phase) / s) }, (_, j) => phase + j * s);

describe("CounterStaleness", () => {
  it("never bounds the update interval below the truth, and never sees a steady counter stand", () => {
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
          expect(feed(st, lattice(s, phaseMs * 1e6, t + s), reads)).toBe(0);
          expect(st.bound()).toBeGreaterThanOrEqual(s);
        },
      ),
    );
  });

  it("bounds a wandering counter above its longest placed interval", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 20, max: 100 }),
        fc.array(fc.double({ min: -0.2, max: 0.2, noNaN: true }), { minLength: 20, maxLength: 80 }),
        (sMs, wander) => {
          const s = sMs * 1e6;
          const updates = wander.map((w, j) => (j + 1) * s + w * s);
          const reads = Array.from(
            { length: Math.ceil(((wander.length + 1) * s) / 2e6) },
            (_, i) => i * 2e6 + 1e5,
          );
          const st = new CounterStaleness();
          feed(st, updates, reads);
          let longest = 0;
          for (let j = 1; j < updates.length; j++)
            longest = Math.max(longest, (updates[j] as number) - (updates[j - 1] as number));
          expect(st.bound()).toBeGreaterThanOrEqual(longest);
        },
      ),
    );
  });

  it("bounds a 100 ms counter read every 2 ms to within 10 %, then covers a stand once judged", () => {
    const st = new CounterStaleness();
    const reads = Array.from({ length: 160 }, (_, i) => i * 2e6 + 1e5);
    expect(feed(st, lattice(100e6, 30e6, 400e6), reads)).toBe(0);
    expect(st.bound()).toBeGreaterThanOrEqual(100e6);
    expect(st.bound()).toBeLessThanOrEqual(1.1 * 1.1 * 100e6);
    // The counter then stands still for 300 ms: seen standing long, and described.
    expect(st.standsLong(330e6, 630e6)).toBe(true);
    expect(st.describe(330e6, 630e6)).toMatch(
      /stood still for at least 300 ms, where it had updated at least every \d+ ms/,
    );
    // Judged (a new cadence, or a stall caught), the stand is covered from now on.
    st.widen(300e6);
    expect(st.standsLong(330e6, 630e6)).toBe(false);
  });

  it("knows nothing before two placed steps, and counts none its reads cannot place", () => {
    const st = new CounterStaleness();
    expect(st.bound()).toBe(Number.POSITIVE_INFINITY);
    st.step(0, 5e6, 100e6, 105e6);
    expect(st.bound()).toBe(Number.POSITIVE_INFINITY);
    // Read every second, a 100 ms counter's steps say nothing of its interval.
    st.step(1000e6, 2000e6, 2000e6, 3000e6);
    expect(st.bound()).toBe(Number.POSITIVE_INFINITY);
    expect(st.standsLong(0, 10e9)).toBe(false);
  });
});
