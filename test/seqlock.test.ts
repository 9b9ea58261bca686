import { describe, expect, it } from "vitest";
import type { CardLogLayout, NativeCardLog, NativeSampler, RingLayout } from "../binding.js";
import { NativeCardEventLog } from "../src/sources/native/card-log.js";
import { NativeRing } from "../src/sources/native/descriptor.js";
import { emptySample } from "../src/track/ring.js";
import { emptyLogEntry } from "../src/track/track.js";

// The readers of the addon's shared buffers (the ring, the event log) while a writer is inside a
// write section: the writer here is this test, stopped half-way as a preempted sampling thread
// would be. Layouts as the addon's (binding.d.ts), with small capacities.

const RING: RingLayout = {
  version: 2,
  headerSlots: 16,
  sampleSlots: 10,
  hHead: 1,
  hCapacity: 2,
  hPeriodNs: 3,
  hState: 4,
  hLastError: 5,
  hCounter: 6,
  hPowerSource: 7,
  hCounterStepNs: 8,
  sT: 0,
  sEnergyMj: 1,
  sPowerMw: 2,
  sIntegralMj: 3,
  sFlags: 4,
  sError: 5,
  sFaults: 6,
  sReadNs: 7,
  sPowerT: 8,
  sPowerReadNs: 9,
};
const LOG: CardLogLayout = {
  version: 1,
  headerSlots: 8,
  entrySlots: 8,
  hPublished: 1,
  hCapacity: 2,
  hIdleW: 3,
  hOpen: 4,
  hWeight: 5,
  eT: 0,
  eWeightBefore: 1,
  eWeightAfter: 2,
  eCountAfter: 3,
  eIdleAfter: 4,
  ePid: 5,
  eSlot: 6,
  eKind: 7,
};
const CAPACITY = 8;

/** A writer of slots under the seqlock, as native/sampler_tick.cc and native/ledger_log.cc write. */
class Writer {
  readonly buffer: ArrayBuffer;
  readonly f64: Float64Array;
  readonly u32: Uint32Array;
  count = 0;

  constructor(
    private readonly headerSlots: number,
    private readonly slots: number,
    private readonly countSlot: number,
    /** Writes slot `base`'s fields for `value` (default: value + i / 100 in field i). */
    private readonly fill: (f64: Float64Array, base: number, value: number) => void = (f64, base, value) => {
      for (let i = 0; i < slots; i++) f64[base + i] = value + i / 100;
    },
  ) {
    this.buffer = new ArrayBuffer((headerSlots + CAPACITY * slots) * 8);
    this.f64 = new Float64Array(this.buffer);
    this.u32 = new Uint32Array(this.buffer);
    this.f64[2] = CAPACITY; // hCapacity in both layouts
  }

  /** Opens a section and writes slot `count` with `value` in each field, its count bumped. */
  begin(value: number): void {
    Atomics.add(this.u32, 0, 1);
    const base = this.headerSlots + (this.count % CAPACITY) * this.slots;
    this.fill(this.f64, base, value);
    this.count += 1;
    this.f64[this.countSlot] = this.count;
  }

  end(): void {
    Atomics.add(this.u32, 0, 1);
  }

  /** A whole write: slot k holds k + 1 (its fields k + 1 + i / 100). */
  write(): void {
    this.begin(this.count + 1);
    this.end();
  }
}

function ringOver(w: Writer): NativeRing {
  return new NativeRing({ buffer: w.buffer, epochNs: 0n } as unknown as NativeSampler, RING);
}

describe("the ring read while the sampler is inside a write", () => {
  it("reads the samples known complete, not the one being written nor the one overwritten", () => {
    const w = new Writer(RING.headerSlots, RING.sampleSlots, RING.hHead);
    for (let i = 0; i < 10; i++) w.write(); // samples 0..9; 2..9 held
    const ring = ringOver(w);
    expect(ring.head()).toBe(10);
    w.begin(11); // sample 10 half-written, over the slot of sample 2; the header already says 11
    expect(Atomics.load(w.u32, 0) & 1).toBe(1);
    // head() counts only what is complete, not the header's 11
    expect(ring.head()).toBe(10);
    const s = emptySample();
    for (let k = 4; k <= 9; k++) {
      expect(ring.read(k, s)).toBe(true);
      expect(s.t).toBe(k + 1);
      expect(s.energyMj).toBeCloseTo(k + 1.01, 9);
      expect(s.powerReadNs).toBeCloseTo(k + 1.09, 9);
    }
    expect(ring.read(10, s)).toBe(false); // being written
    expect(ring.read(2, s)).toBe(false); // its slot is being overwritten
    // Not told from the one overwritten while the header may or may not count the new sample yet
    expect(ring.read(3, s)).toBe(false);
    expect(ring.read(1, s)).toBe(false); // long gone
    w.end();
    expect(ring.head()).toBe(11);
    expect(ring.read(10, s)).toBe(true);
    expect(s.t).toBe(11);
    expect(ring.read(2, s)).toBe(false);
  });

  it("takes nothing for complete that it never read consistently", () => {
    const w = new Writer(RING.headerSlots, RING.sampleSlots, RING.hHead);
    for (let i = 0; i < 5; i++) w.write();
    const ring = ringOver(w); // has read nothing yet
    w.begin(6);
    const s = emptySample();
    expect(ring.read(3, s)).toBe(false);
    expect(ring.head()).toBe(0);
    w.end();
    expect(ring.read(3, s)).toBe(true);
    expect(s.t).toBe(4);
    expect(ring.head()).toBe(6);
  });
});

describe("the event log read while another thread's append is inside its write", () => {
  function logOver(w: Writer, appended: () => number): NativeCardEventLog {
    const handle = {
      buffer: w.buffer,
      epochNs: 0n,
      slot: 0,
      scope: "host",
      reason: null,
      append: appended,
    } as unknown as NativeCardLog;
    return new NativeCardEventLog(handle, LOG);
  }
  /** An entry as the addon writes one: at t = value, one window open, idle 4 + value / 100 W. */
  const entry = (f64: Float64Array, base: number, value: number) => {
    f64.set([value, 1, 1, 1, 4 + value / 100, 1234, 0, 1], base);
  };

  it("reads entries known complete, and its own append at once", () => {
    const w = new Writer(LOG.headerSlots, LOG.entrySlots, LOG.hPublished, entry);
    // This thread's appends: whole writes, returning their sequence number.
    const log = logOver(w, () => {
      w.write();
      return w.count - 1;
    });
    for (let i = 0; i < 3; i++) expect(log.append(1, 1, 80, 1)).toBe(i);
    const own = log.append(1, 1, 80, 1); // entry 3
    expect(own).toBe(3);
    w.begin(5); // another thread's append (entry 4), stopped half-way
    const e = emptyLogEntry();
    expect(log.read(3, e)).toBe(true); // this thread's own, never read before
    expect(e.t).toBe(4);
    expect(e.idleAfter).toBeCloseTo(4.04, 9);
    expect(log.read(0, e)).toBe(true);
    expect(e.t).toBe(1);
    expect(log.read(4, e)).toBe(false); // being written
    expect(log.published()).toBe(4); // not the header's 5
    w.end();
    expect(log.published()).toBe(5);
    expect(log.read(4, e)).toBe(true);
    expect(e.t).toBe(5);
  });
});
