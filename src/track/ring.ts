import type { Result } from "../vocabulary/measurement.js";

/**
 * A ring of samples, as every sampling backend hands them to RingTrack: the addon's (NativeRing,
 * memory shared with the sampling thread) and those written from JavaScript (JsRing). Only the
 * source of samples differs between backends; the window arithmetic over them is RingTrack's.
 */

/** One reading, as both rings store it. Times are ns relative to the ring's epoch. */
export interface Sample {
  t: number;
  energyMj: number;
  powerMw: number;
  integralMj: number;
  flags: number;
  error: number;
  faults: number;
  /** Duration of the read stamped by t (ns): its value belongs to some instant in it. */
  readNs: number;
  /** The power read's own stamp (ns relative to the epoch, the middle of its call); NaN: as t. */
  powerT: number;
  /** Duration of the power read (ns): its value belongs to some instant in it. */
  powerReadNs: number;
}

/** A sample of zeros: a scratch object for a ring's `read()` to fill. */
export function emptySample(): Sample {
  return {
    t: 0,
    energyMj: 0,
    powerMw: 0,
    integralMj: 0,
    flags: 0,
    error: 0,
    faults: 0,
    readNs: 0,
    powerT: 0,
    powerReadNs: 0,
  };
}

/** Bits of Sample.flags (the same values as the addon's `flags`). */
export const FLAG = Object.freeze({
  ENERGY_OK: 1,
  POWER_OK: 2,
  COUNTER_BACKWARDS: 4,
  COUNTER_JUMP: 8,
  READ_FAILED: 16,
});

/** A sequence of samples k = 0, 1, 2, … of which the last `capacity` are kept. */
export interface SampleRing {
  readonly epochNs: bigint;
  readonly capacity: number;
  /** Number of samples written so far. */
  head(): number;
  /** Copies sample k into `out`; false when k is not (or no longer) held. */
  read(k: number, out: Sample): boolean;
  /** The sampling period now (ns). */
  periodNs(): number;
  /**
   * The energy counter's update step, estimated from above (ns), 0 when unknown: the smallest
   * interval from the last reading before a change to the reading that saw the next change. It is
   * never below the true step (about one period above it), however late the sampler ran.
   */
  counterStepNs(): number;
  /** The power readings' resolution in mW (1 where absent: NVML's mW). */
  powerQuantumMw?(): number;
  /** Why no sample can be expected (the source failed for good), or null. */
  failure(): string | null;
}

/** Where a ring comes from: opened on first use, closed a while after the last window leaves. */
export interface RingSource {
  /** Which cumulative column is the energy: the counter or the integral of power. */
  readonly column: "energy" | "integral";
  /** Power comes from a source that averages over about a second (nvmlDeviceGetPowerUsage). */
  readonly averagedPower: boolean;
  /**
   * Where averaged power comes from, for the record's caveat when `averagedPower` is true
   * ("nvmlDeviceGetPowerUsage", "nvidia-smi's power.draw", …).
   */
  readonly averagedPowerSource: string;
  /** Why the card is read this way rather than by its counter (one refused), for the record. */
  readonly note?: string | null;
  open(periodMs: number): Result<SampleRing>;
  setPeriod(periodMs: number): void;
  close(): void;
  /** Describe an NVML (or other) error code carried by a sample. */
  describeError(code: number): string;
  /**
   * Where the source has one (the native sampler), a doorbell: `onSample` runs after the sampler's
   * next published sample following each {@link RingSource.wake}, so that a wait for a sample ends
   * when it is written rather than when a timer next looks. Installed once per opened ring; false
   * when the source has none.
   */
  doorbell?(onSample: () => void): boolean;
  /**
   * Arms the doorbell; with `read`, asks the sampler for a read now (an edge waits for it); with
   * `counterOnly`, it rings only after a sample whose energy counter read changed or failed.
   */
  wake?(read: boolean, counterOnly?: boolean): void;
  /** Where the source can: asks for a read now without ringing the doorbell after it (an edge's). */
  read?(): void;
}

/**
 * Least and most power among a ring's samples from `sinceNs` (CLOCK_MONOTONIC) to the newest, and
 * the sample before (its power held into the range), mW; null when none read power.
 */
export function powerRangeOf(
  ring: SampleRing,
  sinceNs: bigint,
  s: Sample,
): { readonly minMw: number; readonly maxMw: number } | null {
  const since = Number(sinceNs - ring.epochNs);
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  const oldest = Math.max(0, ring.head() - ring.capacity);
  for (let k = ring.head() - 1; k >= oldest; k--) {
    if (!ring.read(k, s)) continue;
    if (!Number.isNaN(s.powerMw)) {
      if (s.powerMw < min) min = s.powerMw;
      if (s.powerMw > max) max = s.powerMw;
    }
    if (s.t < since) break;
  }
  return Number.isFinite(max) ? { minMw: min, maxMw: max } : null;
}
