import type {
  DeviceInfo,
  GiulBinding,
  NativeFailure,
  NativeSampler,
  ProcessList,
  RingLayout,
} from "../../../binding.js";
import { RingTrack } from "../../ring/ring-track.js";
import type { CardReader } from "../../track/card.js";
import type { BackendDescriptor } from "../../track/descriptor.js";
import type { RingSource, Sample, SampleRing } from "../../track/ring.js";
import type { BackendName } from "../../vocabulary/measurement.js";
import {
  type CardInfo,
  type CardSlices,
  type CardState,
  fail,
  ok,
  type ProcessRead,
  type Result,
} from "../../vocabulary/measurement.js";
import { loadBinding } from "./binding.js";
import { cardSlices } from "./mig.js";
import { consistentCount, recheck, stableInSection } from "./seqlock.js";

/**
 * The native backends: the addon's sampling thread writes a ring in memory shared with
 * JavaScript; reading it is a few loads under a sequence lock, never an N-API or NVML call.
 * `nvml_counter` uses the energy counter column, `nvml_sampler` the thread's integral of power.
 */

const NVML_ERRORS: Readonly<Record<number, string>> = {
  1: "NVML not initialised",
  2: "invalid argument",
  3: "not supported",
  4: "insufficient permissions",
  9: "driver not loaded",
  10: "timeout",
  12: "NVML library not found",
  13: "function not found",
  15: "GPU is lost",
  16: "GPU requires reset",
  17: "the operating system blocked the request",
  18: "driver/library version mismatch",
  999: "unknown error",
};

export function describeNvmlError(code: number): string {
  if (code === 0) return "no error recorded";
  return `NVML error ${code} (${NVML_ERRORS[code] ?? "see nvml.h"})`;
}

/** A consistent view of the addon's ring (the seqlock protocol of binding.d.ts). */
export class NativeRing implements SampleRing {
  /** Names the vendor's error codes in failure() (NVML's unless told). */
  describe: (code: number) => string = describeNvmlError;
  readonly epochNs: bigint;
  readonly capacity: number;
  private readonly f64: Float64Array;
  private readonly u32: Uint32Array;
  private readonly L: RingLayout;
  /** The head last read consistently: samples before it are complete. */
  private complete = 0;

  constructor(sampler: NativeSampler, layout: RingLayout) {
    this.epochNs = sampler.epochNs;
    this.f64 = new Float64Array(sampler.buffer);
    this.u32 = new Uint32Array(sampler.buffer);
    this.L = layout;
    this.capacity = this.f64[layout.hCapacity] ?? 0;
  }

  head(): number {
    const head = consistentCount(this.u32, this.f64, this.L.hHead);
    // NaN: the sampler is inside a write (preempted there, perhaps): the samples known complete.
    return Number.isNaN(head) ? this.complete : this.saw(head);
  }

  /**
   * Sample k into `out`; false when k is not (or no longer) held. While the sampler is inside a
   * write, a sample known complete before it is read all the same (./seqlock.ts stableInSection).
   */
  read(k: number, out: Sample): boolean {
    const L = this.L;
    const base = L.headerSlots + (k % this.capacity) * L.sampleSlots;
    const f = this.f64;
    for (let tries = 0; tries < 64; tries++) {
      const g = Atomics.load(this.u32, 0);
      const head = f[L.hHead] ?? 0;
      if (g & 1) {
        if (!stableInSection(k, this.complete, head, this.capacity)) continue;
      } else if (k >= head || k < head - this.capacity || k < 0) {
        if (recheck(this.u32, g)) this.saw(head);
        return false;
      }
      out.t = f[base + L.sT] ?? Number.NaN;
      out.energyMj = f[base + L.sEnergyMj] ?? Number.NaN;
      out.powerMw = f[base + L.sPowerMw] ?? Number.NaN;
      out.integralMj = f[base + L.sIntegralMj] ?? Number.NaN;
      out.flags = f[base + L.sFlags] ?? 0;
      out.error = f[base + L.sError] ?? 0;
      out.faults = f[base + L.sFaults] ?? 0;
      out.readNs = f[base + L.sReadNs] ?? 0;
      out.powerT = f[base + L.sPowerT] ?? Number.NaN;
      out.powerReadNs = f[base + L.sPowerReadNs] ?? 0;
      if (recheck(this.u32, g)) {
        if ((g & 1) === 0) this.saw(head);
        return true;
      }
    }
    return false;
  }

  /** A head read consistently: the samples known complete (never going back). */
  private saw(head: number): number {
    if (head > this.complete) this.complete = head;
    return this.complete;
  }

  periodNs(): number {
    return this.f64[this.L.hPeriodNs] ?? 10e6;
  }

  counterStepNs(): number {
    return this.f64[this.L.hCounterStepNs] ?? 0;
  }

  powerQuantumMw(): number {
    const slot = this.L.hPowerQuantumMw;
    const q = slot === undefined ? 1 : (this.f64[slot] ?? 1);
    return q > 0 ? q : 1;
  }

  failure(): string | null {
    const state = this.f64[this.L.hState];
    if (state === 2) {
      return `the sampling thread cannot read the card: ${this.describe(this.f64[this.L.hLastError] ?? 0)}`;
    }
    if (state === 3) return "the sampling thread stopped";
    return null;
  }
}

/** A vendor as the addon's sampler knows it: its name, its averaged power's source, its codes. */
export interface NativeVendor {
  readonly name: "nvidia" | "amd";
  readonly averagedPowerSource: string;
  describeError(code: number): string;
}

const NVIDIA: NativeVendor = {
  name: "nvidia",
  averagedPowerSource: "nvmlDeviceGetPowerUsage, 1 s on Ampere and newer",
  describeError: describeNvmlError,
};

/** The addon's sampler of one card, of either vendor. */
export class NativeSource implements RingSource {
  readonly column: "energy" | "integral";
  readonly averagedPower: boolean;
  readonly averagedPowerSource: string;
  private sampler: NativeSampler | null = null;

  constructor(
    private readonly binding: GiulBinding,
    private readonly index: number,
    counter: boolean,
    averagedPower: boolean,
    private readonly vendor: NativeVendor = NVIDIA,
    readonly note: string | null = null,
  ) {
    this.column = counter ? "energy" : "integral";
    this.averagedPower = averagedPower;
    this.averagedPowerSource = vendor.averagedPowerSource;
  }

  open(periodMs: number): Result<SampleRing> {
    const sampler =
      this.vendor.name === "nvidia"
        ? this.binding.openSampler(this.index, periodMs)
        : this.binding.openSampler(this.index, periodMs, this.vendor.name);
    if (!sampler.ok) return fail(`cannot start the sampling thread: ${sampler.reason}`);
    this.sampler = sampler;
    const ring = new NativeRing(sampler, this.binding.layout);
    ring.describe = (code) => this.vendor.describeError(code);
    return ok(ring);
  }

  setPeriod(periodMs: number): void {
    this.sampler?.setPeriod(periodMs);
  }

  doorbell(onSample: () => void): boolean {
    const sampler = this.sampler;
    if (sampler === null || typeof sampler.doorbell !== "function") return false;
    sampler.doorbell(onSample);
    return true;
  }

  wake(read: boolean, counterOnly = false): void {
    this.sampler?.wake(read, counterOnly);
  }

  read(): void {
    this.sampler?.read();
  }

  close(): void {
    this.sampler?.release();
    this.sampler = null;
  }

  describeError(code: number): string {
    return this.vendor.describeError(code);
  }
}

/** A track over the addon's sampler of one card. */
export function nvmlTrack(
  binding: GiulBinding,
  index: number,
  options: { counter: boolean; instantPower: boolean },
): RingTrack {
  const backend: BackendName = options.counter ? "nvml_counter" : "nvml_sampler";
  return new RingTrack(backend, new NativeSource(binding, index, options.counter, !options.instantPower));
}

/** The addon's reads of one card (NVML's or AMD SMI's calls), for {@link addonCardReader}. */
export interface AddonCalls {
  info(): Promise<DeviceInfo | NativeFailure>;
  processes(): Promise<ProcessList | NativeFailure>;
  slices?(): Promise<Result<CardSlices>>;
}

/**
 * Contention checks and probeNode through the addon, off the JS thread (its threads). The reads
 * do not keep the event loop alive: whoever waits for one bounds the wait with a timer of its own.
 */
export function addonCardReader(calls: AddonCalls): CardReader {
  const readProcesses = async (): Promise<ProcessRead> => {
    const tNs = process.hrtime.bigint();
    try {
      const list = await calls.processes();
      if (!list.ok) return { ok: false, tNs, reason: list.reason };
      return {
        ok: true,
        tNs,
        processes: list.processes.map((p) =>
          p.gpuInstanceId === undefined
            ? { pid: p.pid, name: p.name, usedMib: p.usedMib }
            : { pid: p.pid, name: p.name, usedMib: p.usedMib, gpuInstanceId: p.gpuInstanceId },
        ),
      };
    } catch (error) {
      return { ok: false, tNs, reason: `reading the process list failed: ${String(error)}` };
    }
  };
  const readInfo = async (): Promise<Result<CardInfo>> => {
    try {
      const info = await calls.info();
      return info.ok ? ok(infoOf(info)) : fail(info.reason);
    } catch (error) {
      return fail(`reading the card failed: ${String(error)}`);
    }
  };
  return {
    readProcesses,
    readInfo,
    ...(calls.slices === undefined ? {} : { readSlices: calls.slices }),
    async readState(): Promise<Result<CardState>> {
      const [info, procs] = await Promise.all([readInfo(), readProcesses()]);
      if (!info.ok) return info;
      if (!procs.ok) return fail(procs.reason);
      return ok({ ...info.value, computeApps: procs.processes });
    },
  };
}

/** An NVIDIA card's reader through NVML. */
export function nvmlCardReader(binding: GiulBinding, index: number): CardReader {
  return addonCardReader({
    info: () => binding.deviceInfo(index, { keepAlive: false }),
    processes: () => binding.computeProcesses(index, { keepAlive: false }),
    slices: () => cardSlices(binding, index),
  });
}

export function infoOf(info: DeviceInfo): CardInfo {
  return {
    name: info.name,
    memoryFreeMib: info.memoryFreeMib,
    memoryUsedMib: info.memoryUsedMib,
    memoryTotalMib: info.memoryTotalMib,
    utilizationPct: info.utilizationPct,
    powerW: info.powerW,
  };
}

function nvmlBackend(counter: boolean): BackendDescriptor {
  return {
    name: counter ? "nvml_counter" : "nvml_sampler",
    canServe: (card, caps) =>
      card.isLocal && caps !== null && caps.nvml && (counter ? caps.energyCounter : caps.nvmlPower),
    open(card, caps) {
      const loaded = loadBinding();
      if (!loaded.ok) return fail(loaded.reason);
      const instantPower = caps?.info?.instantPower ?? false;
      return ok({
        track: nvmlTrack(loaded.binding, card.gpuIndex, { counter, instantPower }),
        reader: nvmlCardReader(loaded.binding, card.gpuIndex),
      });
    },
  };
}

/** `nvml_counter`: the card's energy counter, read by the addon's sampling thread (Volta and newer). */
export const nvmlCounterBackend: BackendDescriptor = nvmlBackend(true);

/** `nvml_sampler`: the same thread's integral of NVML power, on a card without the counter. */
export const nvmlSamplerBackend: BackendDescriptor = nvmlBackend(false);
