import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SampleCopy } from "../src/edges/sample-copy.js";
import { emptySample } from "../src/track/ring.js";

// The fused counter's copy of the samples answers a span's longest gap from blocks' maxima, not a
// walk of every sample (a window of seconds would walk hundreds). Checked here against the walk
// itself, over a plain list of what was written: random stamps, unreadable samples, a ring that
// wraps many times, copies that skip ahead (the counter fell a ring behind), spans reaching
// outside what is held.

/** One copy: `skip` samples never copied before it, then its stamp step (null: unreadable). */
const step = fc.record({
  skip: fc.oneof(
    { weight: 30, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 300 }) },
  ),
  dt: fc.oneof(
    { weight: 40, arbitrary: fc.integer({ min: 4_000_000, max: 6_000_000 }) },
    // A stall now and then: the one gap a span must find.
    { weight: 1, arbitrary: fc.integer({ min: 10_000_000, max: 2_000_000_000 }) },
    { weight: 1, arbitrary: fc.constant(null) },
  ),
});

/** The longest gap between readable samples among kFrom..kTo, by walking what the model holds. */
function walked(held: Map<number, number>, kFrom: number, kTo: number): number {
  let gap = 0;
  let prev = Number.NaN;
  for (let k = kFrom; k <= kTo; k++) {
    const t = held.get(k);
    if (t === undefined || Number.isNaN(t)) continue;
    if (t - prev > gap) gap = t - prev;
    prev = t;
  }
  return gap;
}

describe("SampleCopy.maxGap", () => {
  it("is the walk's longest gap for any span, as samples come in", () => {
    fc.assert(
      fc.property(
        // Rings of fewer slots than a block, of a few blocks, and of a few blocks and a part.
        fc.oneof(
          fc.integer({ min: 1, max: 70 }),
          fc.constantFrom(128, 256),
          fc.integer({ min: 129, max: 300 }),
        ),
        fc.array(step, { minLength: 1, maxLength: 1500, size: "max" }),
        // Each span: where it starts from the oldest sample held (some before it), and its length.
        fc.array(fc.tuple(fc.integer({ min: -20, max: 320 }), fc.nat({ max: 600 })), {
          minLength: 1,
          maxLength: 40,
        }),
        (capacity, steps, spans) => {
          const copy = new SampleCopy(capacity);
          /** What the copy must still hold: k → stamp (NaN: unreadable). */
          let held = new Map<number, number>();
          const s = emptySample();
          let k = 0;
          let t = 1e9;
          for (const [i, { skip, dt }] of steps.entries()) {
            if (skip > 0) {
              // Nothing before a skip is this run's.
              k += skip;
              held = new Map();
            }
            if (dt === null) copy.write(k, null);
            else {
              t += dt;
              s.t = t;
              copy.write(k, s);
            }
            held.set(k, dt === null ? Number.NaN : t);
            held.delete(k - capacity);
            k += 1;
            // Now and then, and at the end, every span asked.
            if (i % 37 !== 0 && i !== steps.length - 1) continue;
            const oldest = Math.min(...held.keys());
            for (const [offset, len] of spans) {
              const kFrom = Math.max(0, oldest + offset);
              const kTo = kFrom + len;
              expect(copy.maxGap(kFrom, kTo)).toBe(walked(held, kFrom, kTo));
            }
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it("reads nothing from before a copy that skipped ahead", () => {
    const copy = new SampleCopy(8);
    const s = emptySample();
    for (let k = 0; k < 8; k++) {
      s.t = 1000 * k;
      copy.write(k, s);
    }
    s.t = 1_000_000;
    // Samples 8..12 never copied: slots 13 % 8 … hold samples 5..7 from before.
    copy.write(13, s);
    expect(copy.read(7, s)).toBe(false);
    expect(copy.read(13, s)).toBe(true);
    expect(s.t).toBe(1_000_000);
    // The gap from sample 7 (7,000 ns) to 13 is not one of this run's.
    expect(copy.maxGap(0, 13)).toBe(0);
    expect(copy.firstAfter(0, 0)).toBe(13);
  });
});
