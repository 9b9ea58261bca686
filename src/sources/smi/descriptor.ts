/**
 * The `smi_sampler` backend: power read by one long-lived `nvidia-smi --query-gpu=… -lms <period>`
 * child per process, shared by every window on every card, for hosts where the addon or NVML
 * cannot be used. It only produces samples: each card's readings go into a JsRing, and the
 * window arithmetic is RingTrack's, the same code as the native sampler's (column "integral").
 * The child and the rings are the SmiSampler's (./sampler.ts).
 *
 * The child starts when the first window opens (first `retain`) and stops when the last card's
 * track closes its source (RingTrack keeps a source open a while after the last window). It runs
 * under a Supervisor (./supervisor.ts): unref'd, stopped by a watchdog if this process
 * dies, restarted with exponential backoff when it dies, stopped and restarted when it prints
 * nothing for a while.
 *
 * Readings. `power.draw.instant` is queried where the driver knows the field (R535+), with
 * `power.draw` beside it; a driver that rejects the field gets `index,power.draw` only. Each card
 * uses the column that has a number on its first row: instantaneous power if it answers, else
 * `power.draw` (a one-second average on Ampere and newer: RingSource.averagedPower, which puts the
 * caveat on the Energy record). A token (`[N/A]`, `[GPU is lost]`, …), a garbled row, or the child
 * dying is never a reading: the card's ring gets a sample with NaN power and an error code, which
 * JsRing counts as a fault (READ_FAILED) and across which its integral does not bridge (JsRing
 * also closes the gap, so that an edge taken inside it sees the fault). A window over a gap fails
 * with the reason ("a read failed: nvidia-smi printed [GPU is lost]", "nvidia-smi stopped
 * (exited with code 9: NVIDIA-SMI has failed because …)").
 *
 * Timestamps. A row is placed at the instant nvidia-smi took the reading, not when this process
 * got to read it, by nvidia-smi's own timestamp where it has one (RowPlacer,
 * ./clock.ts). The times written into a ring never go back.
 */

import { RingTrack } from "../../ring/ring-track.js";
import { vendorIndex } from "../../track/card.js";
import type { BackendDescriptor } from "../../track/descriptor.js";
import type { RingSource, SampleRing } from "../../track/ring.js";
import { ok, type Result } from "../../vocabulary/measurement.js";
import { AmdSmiSampler } from "./amd-sampler.js";
import { smiCardReader } from "./card.js";
import { findNvidiaSmi } from "./path.js";
import { SmiSampler } from "./sampler.js";

class SmiSource implements RingSource {
  readonly column = "integral" as const;
  readonly averagedPowerSource = "nvidia-smi's power.draw, 1 s on Ampere and newer";

  constructor(
    private readonly sampler: SmiSampler,
    private readonly index: number,
  ) {}

  /** power.draw (a trailing average on Ampere+) rather than power.draw.instant. */
  get averagedPower(): boolean {
    return this.sampler.powerOf(this.index) === "averaged";
  }

  open(periodMs: number): Result<SampleRing> {
    return this.sampler.open(this.index, periodMs, this);
  }

  setPeriod(periodMs: number): void {
    this.sampler.setPeriod(this.index, periodMs, this);
  }

  close(): void {
    this.sampler.close(this.index, this);
  }

  describeError(code: number): string {
    return this.sampler.describeError(code);
  }
}

let shared: SmiSampler | null = null;

/** The process's nvidia-smi sampler (one child for every card), made on first use. */
export function sharedSmiSampler(): SmiSampler {
  shared ??= new SmiSampler();
  return shared;
}

/**
 * A track over card `index`'s power as nvidia-smi reports it through `sampler`, whose one child
 * serves every card it is asked for (default: the process's shared sampler). The child starts at
 * the track's first `retain`.
 */
export function smiTrack(index: number, sampler: SmiSampler = sharedSmiSampler()): RingTrack {
  return new RingTrack("smi_sampler", new SmiSource(sampler, index));
}

/**
 * `smi_sampler`: a local card whose power nvidia-smi reads (no addon, or no NVML through it); its
 * processes and state through short nvidia-smi runs.
 */
export const smiSamplerBackend: BackendDescriptor = {
  name: "smi_sampler",
  canServe: (card, caps) => card.isLocal && caps !== null && caps.smi,
  open(card) {
    const smi = findNvidiaSmi();
    return ok({
      track: smiTrack(card.gpuIndex),
      reader: smi.path === null ? null : smiCardReader(smi.path, card.gpuIndex),
    });
  },
};

class AmdSmiSource implements RingSource {
  readonly column = "energy" as const;
  /** Socket power read once a second: too seldom to place energy inside the counter's reads. */
  readonly averagedPower = true;
  readonly averagedPowerSource = "amd-smi's socket_power, printed once a second";

  constructor(
    private readonly sampler: AmdSmiSampler,
    private readonly index: number,
  ) {}

  open(): Result<SampleRing> {
    return this.sampler.open(this.index, this);
  }

  setPeriod(): void {}

  close(): void {
    this.sampler.close(this.index, this);
  }

  describeError(code: number): string {
    return this.sampler.describeError(code);
  }
}

let sharedAmd: AmdSmiSampler | null = null;

/**
 * `amdsmi_cli`: an AMD card's energy counter as one long-lived `amd-smi metric --watch 1` child
 * prints it (./amd-sampler.ts), where the addon or libamd_smi cannot be used. Read once a second,
 * each edge is bounded by the counter's reads around it.
 */
export const amdSmiCliBackend: BackendDescriptor = {
  name: "amdsmi_cli",
  canServe: (card, caps) => card.isLocal && caps !== null && (caps.amdCli ?? false),
  open(card) {
    sharedAmd ??= new AmdSmiSampler();
    return ok({
      track: new RingTrack("amdsmi_cli", new AmdSmiSource(sharedAmd, vendorIndex(card.gpuIndex))),
      reader: null,
    });
  },
};
