import { MAX_PLAUSIBLE_MW } from "../edges/uncertainty.js";
import { FLAG, type Sample, type SampleRing } from "../track/ring.js";

const SLOTS = 10;

/**
 * A ring written from JavaScript (the nvidia-smi sampler, a polled agent, tests), with the same
 * columns and fault rules as the addon's: running trapezoid integral of power, counter
 * backwards/jump flags, a read that failed after succeeding, cumulative faults.
 *
 * Gaps. A run of failed reads (a push with neither energy nor power) is a gap, and the first good
 * reading after it is preceded by a second sample of the gap's first error at the same instant,
 * written here: an edge taken anywhere inside the gap then has a failed read on both sides and
 * fails with that error, instead of the flat integral across the gap counting that part of its
 * window as 0 J.
 */
export class JsRing implements SampleRing {
  readonly epochNs: bigint;
  readonly capacity: number;
  private readonly data: Float64Array;
  private written = 0;
  private period: number;
  private stepNs = 0;
  /** Time of the last reading that still showed the value before the latest change. */
  private beforeChangeT = Number.NaN;
  private lastEnergyT = Number.NaN;
  private lastEnergy = Number.NaN;
  private lastPowerT = Number.NaN;
  private lastPower = Number.NaN;
  private integral = 0;
  private faults = 0;
  private everEnergy = false;
  private everPower = false;
  private failed: string | null = null;
  /** A failed read has been pushed since the last good one; its error code. */
  private inGap = false;
  private gapError = 0;

  /** The power readings' resolution (mW): 1, or 1000 for a tool that prints whole watts. */
  private readonly quantumMw: number;

  constructor(options: { epochNs: bigint; capacity?: number; periodNs: number; powerQuantumMw?: number }) {
    this.quantumMw = options.powerQuantumMw ?? 1;
    this.epochNs = options.epochNs;
    this.capacity = options.capacity ?? 16384;
    this.period = options.periodNs;
    this.data = new Float64Array(this.capacity * SLOTS);
  }

  /**
   * Appends a reading taken at `tNs` (CLOCK_MONOTONIC). `energyMj`/`powerMw` are NaN when that read
   * failed or is not offered; `error` is the failure's code; `readNs` how long the read took (its
   * value belongs to some instant in it). The power read may carry its own stamp (`powerTNs`, the
   * middle of its call) and duration; without one it is taken at `tNs`.
   */
  push(
    tNs: bigint,
    energyMj: number,
    powerMw: number,
    error = 0,
    readNs = 0,
    powerTNs: bigint | null = null,
    powerReadNs = 0,
  ): void {
    if (Number.isNaN(energyMj) && Number.isNaN(powerMw)) {
      if (!this.inGap) {
        this.inGap = true;
        this.gapError = error;
      }
    } else if (this.inGap) {
      this.inGap = false;
      this.write(tNs, Number.NaN, Number.NaN, this.gapError, 0, null, 0);
    }
    this.write(tNs, energyMj, powerMw, error, readNs, powerTNs, powerReadNs);
  }

  /** Failed reads have been pushed since the last good one: the next good reading ends a gap. */
  gapOpen(): boolean {
    return this.inGap;
  }

  private write(
    tNs: bigint,
    energyMj: number,
    powerMw: number,
    error: number,
    readNs: number,
    powerTNs: bigint | null,
    powerReadNs: number,
  ): void {
    const t = Number(tNs - this.epochNs);
    const powerT = powerTNs === null ? t : Number(powerTNs - this.epochNs);
    let flags = 0;
    let fault = false;
    if (!Number.isNaN(energyMj)) {
      flags |= FLAG.ENERGY_OK;
      if (!Number.isNaN(this.lastEnergy)) {
        if (energyMj < this.lastEnergy) {
          flags |= FLAG.COUNTER_BACKWARDS;
          fault = true;
        } else if (energyMj > this.lastEnergy) {
          // The previous change happened after beforeChangeT and this one by t: the true rate is
          // at least delta / dt, and the counter's update step is at most dt (as in the addon).
          const dt = t - this.beforeChangeT;
          if (dt > 0 && ((energyMj - this.lastEnergy) / dt) * 1e9 > MAX_PLAUSIBLE_MW) {
            flags |= FLAG.COUNTER_JUMP;
            fault = true;
          }
          if (dt > 0 && (this.stepNs === 0 || dt < this.stepNs)) this.stepNs = dt;
        }
      }
      if (energyMj !== this.lastEnergy) this.beforeChangeT = this.lastEnergyT;
      this.lastEnergy = energyMj;
      this.lastEnergyT = t;
      this.everEnergy = true;
    } else if (this.everEnergy) {
      flags |= FLAG.READ_FAILED;
      fault = true;
    }
    if (!Number.isNaN(powerMw)) {
      flags |= FLAG.POWER_OK;
      if (!Number.isNaN(this.lastPower))
        this.integral += ((this.lastPower + powerMw) / 2) * ((powerT - this.lastPowerT) / 1e9);
      this.lastPower = powerMw;
      this.lastPowerT = powerT;
      this.everPower = true;
    } else if (this.everPower) {
      flags |= FLAG.READ_FAILED;
      fault = true;
      // The integral cannot bridge a failed read: the next good reading starts a new segment.
      this.lastPower = Number.NaN;
    }
    if (fault) this.faults += 1;
    const base = (this.written % this.capacity) * SLOTS;
    const d = this.data;
    d[base] = t;
    d[base + 1] = energyMj;
    d[base + 2] = powerMw;
    d[base + 3] = this.integral;
    d[base + 4] = flags;
    d[base + 5] = error;
    d[base + 6] = this.faults;
    d[base + 7] = readNs;
    d[base + 8] = powerT;
    d[base + 9] = powerReadNs;
    this.written += 1;
  }

  /** The source has failed for good (the child cannot be started, say). */
  fail(reason: string | null): void {
    this.failed = reason;
  }

  setPeriodNs(periodNs: number): void {
    this.period = periodNs;
  }

  head(): number {
    return this.written;
  }

  read(k: number, out: Sample): boolean {
    if (k < 0 || k >= this.written || k < this.written - this.capacity) return false;
    const base = (k % this.capacity) * SLOTS;
    const d = this.data;
    out.t = d[base] as number;
    out.energyMj = d[base + 1] as number;
    out.powerMw = d[base + 2] as number;
    out.integralMj = d[base + 3] as number;
    out.flags = d[base + 4] as number;
    out.error = d[base + 5] as number;
    out.faults = d[base + 6] as number;
    out.readNs = d[base + 7] as number;
    out.powerT = d[base + 8] as number;
    out.powerReadNs = d[base + 9] as number;
    return true;
  }

  powerQuantumMw(): number {
    return this.quantumMw;
  }

  periodNs(): number {
    return this.period;
  }

  /** An upper estimate of the counter's update step (see SampleRing.counterStepNs). */
  counterStepNs(): number {
    return this.stepNs;
  }

  failure(): string | null {
    return this.failed;
  }
}
