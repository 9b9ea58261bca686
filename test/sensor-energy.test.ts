import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { medianOf } from "../src/edges/cadence.js";
import { energyBounds, GainEvidence, PowerReadings, SENSOR_MODELS } from "../src/edges/power-model.js";
import { SensorEnergyMemo } from "../src/edges/sensor-energy.js";

// The memo (running sums under CONTINUOUS, a memo under the held readings) must give exactly what a
// walk over every reading gives (energyBounds), only summed in another order: checked here on
// random readings, with failed reads, repeated values, a ring that wraps, and spans reaching
// outside the readings held.

const reading = fc.record({
  gapNs: fc.integer({ min: 1, max: 20_000_000 }),
  readNs: fc.integer({ min: 0, max: 200_000 }),
  mw: fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: 700_000 }) },
    { weight: 3, arbitrary: fc.constantFrom(100_000, 400_000) },
    { weight: 1, arbitrary: fc.constant(Number.NaN) },
  ),
});

function close(actual: number, expected: number): void {
  if (!Number.isFinite(expected)) expect(actual).toBe(expected);
  else expect(Math.abs(actual - expected)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(expected)));
}

describe("SensorEnergyMemo", () => {
  it("gives energyBounds' bounds for any span, under every model, as readings come in", () => {
    fc.assert(
      fc.property(
        fc.array(reading, { minLength: 2, maxLength: 120 }),
        fc.integer({ min: 8, max: 64 }),
        fc.array(
          fc.tuple(
            fc.double({ min: -0.1, max: 1.1, noNaN: true }),
            fc.double({ min: 0, max: 0.5, noNaN: true }),
          ),
          {
            minLength: 1,
            maxLength: 8,
          },
        ),
        (readings, capacity, spans) => {
          const p = new PowerReadings(capacity);
          const memo = new SensorEnergyMemo(p);
          const got = { lo: 0, hi: 0 };
          const want = { lo: 0, hi: 0 };
          let t = 0;
          for (const r of readings) {
            t += r.gapNs;
            p.push(t, r.readNs, r.mw);
            const first = p.atOf(Math.max(0, p.head - p.capacity));
            const width = t - first;
            for (const [a, len] of spans) {
              const x = first + a * width;
              const y = x + len * width;
              for (const model of SENSOR_MODELS) {
                memo.energy(x, y, model, got);
                energyBounds(p, x, y, model, want);
                close(got.lo, want.lo);
                close(got.hi, want.hi);
              }
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("charges a known square wave between two readings exactly as a walk does", () => {
    // 10 ms reads of a 100↔400 W wave (37 ms halves): the continuous bound over 200 ms.
    const p = new PowerReadings(4096);
    const memo = new SensorEnergyMemo(p);
    for (let k = 0; k < 100; k++) {
      const t = k * 10e6;
      p.push(t, 50e3, Math.floor(t / 37e6) % 2 === 0 ? 100_000 : 400_000);
    }
    const got = { lo: 0, hi: 0 };
    memo.energy(105e6, 305e6, SENSOR_MODELS[0] as 0, got);
    // Truth: 200 ms of the wave; the bound must hold it and be no wider than a walk's.
    let truth = 0;
    for (let t = 105e6; t < 305e6; t += 1e3) truth += (Math.floor(t / 37e6) % 2 === 0 ? 100 : 400) * 1e-6;
    expect(got.lo).toBeLessThanOrEqual(truth * 1000);
    expect(got.hi).toBeGreaterThanOrEqual(truth * 1000);
    const want = { lo: 0, hi: 0 };
    energyBounds(p, 105e6, 305e6, 0, want);
    close(got.lo, want.lo);
    close(got.hi, want.hi);
  });
});

describe("medianOf (the counter cadence's medians)", () => {
  it("is the middle of the sorted values, found without sorting", () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: -1e9, max: 1e9, noNaN: true }), { minLength: 1, maxLength: 70 }),
        (xs) => {
          const sorted = [...xs].sort((a, b) => a - b);
          // === (not Object.is): 0 and −0 are the same middle.
          expect(medianOf(Float64Array.from(xs), xs.length) === sorted[xs.length >> 1]).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("GainEvidence (the gains the counter's steps allow)", () => {
  it("keeps the intersection of the last steps' gains, less the one step narrowest on each side, and counts the informative ones", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.double({ min: 0.3, max: 1.2, noNaN: true }),
            fc.oneof(fc.double({ min: 0.8, max: 2.5, noNaN: true }), fc.constant(Number.POSITIVE_INFINITY)),
            fc.boolean(),
          ),
          { minLength: 66, maxLength: 200 },
        ),
        (steps) => {
          const e = new GainEvidence();
          steps.forEach(([lo, hi, informative], i) => {
            e.push(lo, hi, informative);
            const last = steps.slice(Math.max(0, i + 1 - 64), i + 1);
            // Past one step, the largest lo and the smallest hi are left out (one fault each side).
            const los = last.map((s) => s[0]).sort((a, b) => b - a);
            const his = last.map((s) => s[1]).sort((a, b) => a - b);
            const trim = last.length >= 2 ? 1 : 0;
            const gLo = Math.max(1 / 3, los[trim] as number);
            const gHi = Math.min(3, his[trim] as number);
            expect(e.gainLo).toBe(gLo);
            expect(e.gainHi).toBe(gHi);
            expect(e.informativeCount).toBe(last.filter((s) => s[2]).length);
          });
        },
      ),
      { numRuns: 200 },
    );
  });

  it("one step that no gain near the truth explains (a jump the judge let through) sets no gain", () => {
    const e = new GainEvidence();
    // A sensor that reads true (gain 1): every step allows it, but for one early jump.
    const steps: [number, number][] = [
      [0.6, 1.7],
      [0.8, 1.3],
      [2.0, 64],
      [0.9, 1.2],
      [0.7, 1.1],
    ];
    for (const [lo, hi] of steps) e.push(lo, hi, true);
    expect(e.consistent()).toBe(true);
    expect(e.gainLo).toBeLessThanOrEqual(1);
    expect(e.gainHi).toBeGreaterThanOrEqual(1);
    // A second such step is a contradiction: no one gain suits the steps.
    e.push(1.9, 30, true);
    expect(e.consistent()).toBe(false);
  });
});
