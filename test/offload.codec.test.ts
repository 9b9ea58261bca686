import { describe, expect, it } from "vitest";
import type { ShareMeasurement } from "../src/energy.js";
import type { SpanMeasurement } from "../src/measurement.js";
import type { Outcome, SpanOutcome } from "../src/meter-measure.js";
import { decodeOutcomes, encodeOutcomes, type PackedOutcome } from "../src/offload/codec.js";
import type { OutcomeItem } from "../src/offload/protocol.js";

// The accounting worker's outcomes as rows of numbers (src/offload/codec.ts): what the window's
// environment reads back must be what the worker measured, span by span.

const share = (above: number, card: number | null, caveat: string | null): ShareMeasurement => ({
  ok: true,
  share: true,
  aboveJoules: above,
  cardAboveJoules: card,
  uncertaintyJoules: above / 50,
  samples: 7,
  maxGapMs: 5.25,
  caveat,
});
const gross = (joules: number): SpanMeasurement => ({
  ok: true,
  grossJoules: joules,
  samples: 3,
  maxGapMs: 11.5,
  uncertaintyJoules: 0.125,
  caveat: null,
});
const failed = (reason: string): SpanMeasurement => ({ ok: false, reason });
const span = (
  measurement: SpanMeasurement | ShareMeasurement,
  seconds: number,
  concurrency: { mean: number; max: number } | null,
): SpanOutcome => ({ measurement, seconds, concurrency });

const names = [
  { name: "retrieve", tokens: null },
  { name: "generate", tokens: 12 },
];

/** Three windows: shared with two stages, an exclusive (gross) one without stages, a failed one. */
const items: OutcomeItem[] = [
  [
    7,
    {
      total: span(share(12.5, 40.25, "a caveat"), 0.75, { mean: 3.5, max: 5 }),
      stages: [
        { name: "", tokens: null, ...span(share(4.5, null, null), 0.25, { mean: 2, max: 3 }) },
        { name: "", tokens: null, ...span(share(8, 30, null), 0.5, { mean: 4.25, max: 5 }) },
      ],
    },
  ],
  [8, { total: span(gross(99.5), 1.5, null), stages: [] }],
  [
    9,
    {
      total: span(failed("the card's counter went backwards"), 0.01, null),
      stages: [{ name: "", tokens: null, ...span(failed("no sample after the edge"), 0.01, null) }],
    },
  ],
];

function roundTrip(waited: (owner: number) => boolean = () => true): Map<number, PackedOutcome> {
  const { numbers, strings } = encodeOutcomes(items);
  const got = new Map<number, PackedOutcome>();
  decodeOutcomes(
    new Float64Array(numbers),
    [...strings],
    (owner) => (waited(owner) ? owner : undefined),
    (owner, outcome) => got.set(owner, outcome),
  );
  return got;
}

const expected = (owner: number): Outcome => (items.find(([o]) => o === owner) as OutcomeItem)[1];

describe("the accounting worker's outcomes, packed", () => {
  it("reads every span back as the worker measured it, one span at a time", () => {
    const got = roundTrip();
    expect([...got.keys()]).toEqual([7, 8, 9]);
    for (const [owner, packed] of got) {
      const want = expected(owner);
      expect(packed.stageCount).toBe(want.stages.length);
      const spans = [want.total, ...want.stages];
      for (let i = 0; i < spans.length; i++) {
        const s = spans[i] as SpanOutcome;
        // span() hands out one shared object: its fields are copied before the next call.
        const read = packed.span(i);
        expect({ ...read, measurement: { ...read.measurement } }).toEqual({
          measurement: s.measurement,
          seconds: s.seconds,
          concurrency: s.concurrency,
        });
      }
    }
  });

  it("unpacks into objects of its own, its stages named by the window", () => {
    const got = roundTrip();
    const packed = got.get(7) as PackedOutcome;
    const outcome = packed.unpack(names);
    const want = expected(7);
    expect(outcome.total).toEqual(want.total);
    expect(outcome.stages.map((s) => [s.name, s.tokens])).toEqual([
      ["retrieve", null],
      ["generate", 12],
    ]);
    expect(outcome.stages.map((s) => s.measurement)).toEqual(want.stages.map((s) => s.measurement));
    // Its own objects: reading another span afterwards changes nothing in them.
    packed.span(1);
    expect(outcome.total).toEqual(want.total);
    // Stages that do not match the window's marks: none named.
    expect(packed.unpack(names.slice(0, 1)).stages).toEqual([]);
  });

  it("skips the windows nobody waits for, and reads the next ones where they are", () => {
    const got = roundTrip((owner) => owner !== 7);
    expect([...got.keys()]).toEqual([8, 9]);
    expect((got.get(8) as PackedOutcome).span(0).measurement).toEqual(gross(99.5));
    expect((got.get(9) as PackedOutcome).span(1).measurement).toEqual(failed("no sample after the edge"));
  });
});
