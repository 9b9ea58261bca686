import { afterEach, describe, expect, it, vi } from "vitest";
import { RingWaits } from "../src/ring/waits.js";
import type { Sample, SampleRing } from "../src/track/ring.js";

/** A ring whose samples the test counts out, with a doorbell (the waits only time deadlines). */
function ringOf(): SampleRing & { written: number } {
  return {
    epochNs: 0n,
    capacity: 1024,
    written: 0,
    head() {
      return this.written;
    },
    read(k: number, out: Sample) {
      out.t = k * 5e6;
      return k < this.written;
    },
    periodNs: () => 5e6,
    counterStepNs: () => 100e6,
    failure: () => null,
  };
}

describe("RingWaits' deadline timer", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("is set once for a crowd waiting on the doorbell, not again at every sample", () => {
    const ring = ringOf();
    ring.written = 10;
    // Time in fractions of a millisecond, as performance.now() gives it, moving on at every look.
    let now = 1000.37;
    const clock = () => {
      now += 0.0007;
      return now;
    };
    const waits = new RingWaits<{ pending: boolean }>(
      {
        ring: () => ring,
        notRunning: () => "not running",
        pending: (e) => e.pending,
        awaitingSample: () => false,
        fail: () => {},
        wake: () => true,
      },
      clock,
    );
    const timers = vi.spyOn(globalThis, "setTimeout");
    const edges = Array.from({ length: 100 }, () => ({ pending: true }));
    const done = vi.fn();
    for (const e of edges) {
      waits.settleThen([e], { finished: done });
      now += 0.013;
    }
    // Samples every 5 ms ring the doorbell for 200 ms: each looks at the waits.
    for (let i = 0; i < 40; i++) {
      now += 5.003;
      ring.written += 1;
      waits.onSample();
    }
    expect(done).not.toHaveBeenCalled();
    // The first wait's deadline is 500 ms on: one timer for it (a crowd costs no timer each).
    expect(timers.mock.calls.length).toBeLessThanOrEqual(1);
    for (const e of edges) e.pending = false;
    ring.written += 1;
    waits.onSample();
    expect(done).toHaveBeenCalledTimes(100);
  });
});
