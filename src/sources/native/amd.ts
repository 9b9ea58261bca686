import type { GiulBinding, NativeFailure } from "../../../binding.js";
import { RingTrack } from "../../ring/ring-track.js";
import { type CardReader, vendorIndex } from "../../track/card.js";
import type { BackendDescriptor } from "../../track/descriptor.js";
import { type BackendName, fail, ok } from "../../vocabulary/measurement.js";
import { loadBinding } from "./binding.js";
import { addonCardReader, NativeSource, type NativeVendor } from "./descriptor.js";

/**
 * AMD Instinct cards through the addon's AMD SMI backend: the same sampling thread and ring as
 * NVML's (native/amd_reads.cc reads the card). `amdsmi_counter` uses the energy accumulator (2^-16 J
 * a count), `amdsmi_sampler` the thread's integral of socket power (whole watts).
 */

const AMDSMI_STATUS: Readonly<Record<number, string>> = {
  1: "invalid parameters",
  2: "not supported",
  3: "not yet implemented",
  6: "libdrm error",
  7: "API call failed",
  8: "timeout",
  10: "permission denied",
  12: "I/O error",
  30: "processor busy",
  31: "processor not found",
  32: "processor not initialised",
  34: "driver not loaded",
  40: "no data",
};

export function describeAmdError(code: number): string {
  if (code === 0) return "no error recorded";
  return `AMD SMI status ${code} (${AMDSMI_STATUS[code] ?? "see amdsmi.h"})`;
}

const AMD: NativeVendor = {
  name: "amd",
  averagedPowerSource: "AMD SMI's average_socket_power",
  describeError: describeAmdError,
};

/** A track over the addon's sampler of one AMD card. */
export function amdTrack(
  binding: GiulBinding,
  index: number,
  options: { counter: boolean; instantPower: boolean; note?: string | null },
): RingTrack {
  const backend: BackendName = options.counter ? "amdsmi_counter" : "amdsmi_sampler";
  const source = new NativeSource(binding, index, options.counter, !options.instantPower, AMD, options.note);
  return new RingTrack(backend, source);
}

/** Contention checks and probeNode through AMD SMI, off the JS thread (as nvmlCardReader). */
export function amdCardReader(binding: GiulBinding, index: number): CardReader {
  const absent: NativeFailure = {
    ok: false,
    code: "AMDSMI_CALL_FAILED",
    nvmlReturn: null,
    reason: "the giul addon predates AMD SMI",
  };
  return addonCardReader({
    info: () => binding.amdDeviceInfo?.(index, { keepAlive: false }) ?? Promise.resolve(absent),
    processes: () => binding.amdProcesses?.(index, { keepAlive: false }) ?? Promise.resolve(absent),
  });
}

function amdBackend(counter: boolean): BackendDescriptor {
  return {
    name: counter ? "amdsmi_counter" : "amdsmi_sampler",
    canServe: (card, caps) =>
      card.isLocal &&
      caps !== null &&
      (caps.amdsmi ?? false) &&
      (counter ? caps.energyCounter : (caps.amdPower ?? false)),
    open(card, caps) {
      const loaded = loadBinding();
      if (!loaded.ok) return fail(loaded.reason);
      const instantPower = caps?.info?.instantPower ?? false;
      // A counter refused at the probe (it disagreed with integrated power) says so in every record.
      const refused = counter ? undefined : caps?.info?.notes?.energyCounter;
      const note =
        caps?.counterNote ??
        (refused === undefined ? null : `the card's energy counter is not used: ${refused}`);
      // An MI250 die whose partner's counter counts both is read through that counter.
      const index = caps?.counterAt ?? vendorIndex(card.gpuIndex);
      return ok({
        track: amdTrack(loaded.binding, index, { counter, instantPower, note }),
        reader: amdCardReader(loaded.binding, index),
      });
    },
  };
}

/** `amdsmi_counter`: an AMD card's energy counter, once it has agreed with integrated power. */
export const amdsmiCounterBackend: BackendDescriptor = amdBackend(true);

/** `amdsmi_sampler`: the integral of AMD SMI socket power, on a card whose counter is absent or refused. */
export const amdsmiSamplerBackend: BackendDescriptor = amdBackend(false);
