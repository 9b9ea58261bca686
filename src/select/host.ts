/**
 * What this host offers for metering, probed once per process: the addon, NVML, each card's
 * features and the backend a local Meter would use on it (the registry's choice), and nvidia-smi.
 * Never throws: every failure is a field with a reason. giul-probe prints this.
 */
import type { DeviceInfo, GiulBinding, NativeFailure, NativeProcess } from "../../binding.js";
import { cardSlices } from "../sources/native/mig.js";
import { querySmiOnce, type SmiProbe } from "../sources/smi/parse.js";
import { findNvidiaSmi, type SmiStatus } from "../sources/smi/path.js";
import { debug } from "../vocabulary/debug.js";
import type { BackendName, ProcessInfo, SliceInfo } from "../vocabulary/measurement.js";
import {
  amdCapabilitiesOf,
  amdState,
  capabilitiesOf,
  defaultHostDeps,
  forgetCapabilities,
  type HostDeps,
  type NvmlStatus,
  nvmlState,
  readDevice,
} from "./capabilities.js";
import { chooseLocalBackend } from "./registry.js";

export interface AddonStatus {
  /** The addon loaded and has the expected exports. */
  readonly loaded: boolean;
  /** The file it was loaded from, or null. */
  readonly path: string | null;
  /** Why it is not loaded (and how to fix it), or null. */
  readonly reason: string | null;
  /** The files or folders looked at. */
  readonly tried: readonly string[];
}

export interface HostDevice {
  /** The card's index as its vendor's tool numbers it (`nvidia-smi`, `amd-smi list`). */
  readonly index: number;
  /** Whose card it is: read through NVML, or through AMD SMI. */
  readonly vendor: "nvidia" | "amd";
  readonly name: string | null;
  readonly uuid: string | null;
  readonly memoryUsedMib: number | null;
  readonly memoryTotalMib: number | null;
  /** The energy counter answers (nvmlDeviceGetTotalEnergyConsumption; AMD: and agreed with power). */
  readonly energyCounter: boolean;
  /** Instantaneous power answers (NVML field 186; AMD's current_socket_power). */
  readonly instantPower: boolean;
  /** Averaged power answers (nvmlDeviceGetPowerUsage; AMD's average_socket_power). */
  readonly powerUsage: boolean;
  /** Power when probed (W): instantaneous where the card offers it, else its trailing average; null when unreadable. */
  readonly powerW: number | null;
  /** The backend a local Meter on this card would use. */
  readonly backend: BackendName;
  /** Why the card's energy counter is not used though it answers (AMD: it disagreed with power), or null. */
  readonly counterRefused?: string | null;
  /** Why the card could not be read, or null. */
  readonly reason: string | null;
  /** The card is in MIG mode: its slices (each metered as its share of this card); else null. */
  readonly mig: HostMig | null;
}

/** A card in MIG mode, as giul-probe lists it. */
export interface HostMig {
  /** The card's slices (7 on A100, H100, H200), or null when NVML did not say. */
  readonly cardSlices: number | null;
  readonly slices: readonly (SliceInfo & { readonly processes: readonly ProcessInfo[] })[];
}

/** AMD SMI as the addon loaded it. */
export interface AmdSmiStatus {
  readonly available: boolean;
  /** Why not, or null; also null when it was not looked for (no addon). */
  readonly reason: string | null;
  /** The library loaded, and its version ("26.1.0"), or null. */
  readonly library: string | null;
  readonly version: string | null;
  readonly deviceCount: number;
}

export interface HostReport {
  readonly addon: AddonStatus;
  readonly nvml: NvmlStatus;
  readonly amdsmi: AmdSmiStatus;
  readonly smi: SmiStatus;
  /**
   * One run of the smi sampler's query (null when no nvidia-smi was found): whether the driver
   * knows `power.draw.instant`, and per card which power the smi_sampler would read (instantaneous,
   * or `power.draw`, a 1 s average on Ampere and newer), or why it cannot.
   */
  readonly smiPower: SmiProbe | null;
  readonly devices: readonly HostDevice[];
}

function hostDevice(
  index: number,
  info: DeviceInfo | NativeFailure,
  smi: SmiStatus,
  mig: HostMig | null = null,
  vendor: "nvidia" | "amd" = "nvidia",
): HostDevice {
  const caps = vendor === "amd" ? amdCapabilitiesOf(info, smi) : capabilitiesOf(info, smi);
  const backend = chooseLocalBackend(index, caps);
  if (!info.ok) {
    return {
      index,
      vendor,
      name: null,
      uuid: null,
      memoryUsedMib: null,
      memoryTotalMib: null,
      energyCounter: false,
      instantPower: false,
      powerUsage: false,
      powerW: null,
      backend,
      reason: info.reason,
      mig: null,
    };
  }
  return {
    index,
    vendor,
    name: info.name,
    uuid: info.uuid,
    memoryUsedMib: info.memoryUsedMib,
    memoryTotalMib: info.memoryTotalMib,
    energyCounter: info.energyCounter,
    instantPower: info.instantPower,
    powerUsage: info.powerUsage,
    powerW: info.powerW,
    backend,
    counterRefused: info.notes.energyCounter ?? null,
    reason: null,
    mig,
  };
}

async function querySmi(deps: HostDeps, path: string): Promise<SmiProbe> {
  try {
    return await (deps.querySmi ?? querySmiOnce)(path, deps.env);
  } catch (error) {
    return {
      ok: false,
      reason: `running ${path} failed: ${error instanceof Error ? error.message : String(error)}`,
      instantField: null,
      devices: [],
    };
  }
}

/** Probes the host with the given dependencies, without caching. Never throws. */
export async function probeHostWith(deps: HostDeps): Promise<HostReport> {
  const load = deps.load();
  const addon: AddonStatus = load.ok
    ? { loaded: true, path: load.path, reason: null, tried: [load.path] }
    : { loaded: false, path: null, reason: load.reason, tried: load.tried };
  const smi = findNvidiaSmi(deps.env);
  const nvml = await nvmlState(deps);
  const devices: HostDevice[] = [];
  const binding = nvml.binding;
  if (binding !== null && nvml.status.available) {
    for (let index = 0; index < nvml.status.deviceCount; index++) {
      const info = await readDevice(binding, index);
      devices.push(hostDevice(index, info, smi, info.ok ? await hostMig(binding, index) : null));
    }
  }
  const amdsmi = await amdHost(deps, binding, smi);
  devices.push(...amdsmi.devices);
  debug(
    "host: addon %s, nvml %s, %d device(s), smi %s",
    addon.loaded,
    nvml.status.available,
    devices.length,
    smi.path,
  );
  const smiPower = smi.path === null ? null : await querySmi(deps, smi.path);
  return { addon, nvml: nvml.status, amdsmi: amdsmi.status, smi, smiPower, devices };
}

/** AMD SMI's cards (on a host with NVIDIA's too, each is named by its UUID). */
async function amdHost(
  deps: HostDeps,
  binding: GiulBinding | null,
  smi: SmiStatus,
): Promise<{ status: AmdSmiStatus; devices: HostDevice[] }> {
  const none = { available: false, library: null, version: null, deviceCount: 0 };
  if (binding === null) return { status: { ...none, reason: null }, devices: [] };
  const amd = await amdState(deps);
  if (!amd.ok) return { status: { ...none, reason: amd.reason }, devices: [] };
  const devices: HostDevice[] = [];
  for (let index = 0; index < amd.deviceCount; index++) {
    let info: DeviceInfo | NativeFailure;
    try {
      info = binding.amdDeviceInfo
        ? await binding.amdDeviceInfo(index)
        : { ok: false, code: "AMDSMI_CALL_FAILED", nvmlReturn: null, reason: "no amdDeviceInfo" };
    } catch (error) {
      info = { ok: false, code: "AMDSMI_CALL_FAILED", nvmlReturn: null, reason: String(error) };
    }
    devices.push(hostDevice(index, info, smi, null, "amd"));
  }
  const status = { available: true, reason: null, library: amd.library, version: amd.version };
  return { status: { ...status, deviceCount: amd.deviceCount }, devices };
}

let cachedReport: Promise<HostReport> | undefined;

/** What this host supports, probed once per process (`refresh: true` probes again). Never throws. */
export function probeHost(options: { readonly refresh?: boolean } = {}): Promise<HostReport> {
  if (options.refresh === true) {
    cachedReport = undefined;
    forgetCapabilities();
  }
  cachedReport ??= probeHostWith(defaultHostDeps);
  return cachedReport;
}

/** A card's slices with the processes on each (null: not in MIG mode, or unreadable). */
async function hostMig(binding: GiulBinding, index: number): Promise<HostMig | null> {
  // giul-probe waits for its report: the reads keep the event loop alive.
  const listed = await cardSlices(binding, index, true);
  if (!listed.ok || !listed.value.enabled) return null;
  let processes: readonly NativeProcess[] = [];
  try {
    const read = await binding.computeProcesses(index, { keepAlive: true });
    if (read.ok) processes = read.processes;
  } catch {
    // No processes to list: the slices still are.
  }
  return {
    cardSlices: listed.value.cardSlices,
    slices: listed.value.slices.map((s) => ({
      ...s,
      processes: processes
        .filter((p) => p.gpuInstanceId !== undefined && p.gpuInstanceId === s.gpuInstanceId)
        .map((p) => ({ pid: p.pid, name: p.name, usedMib: p.usedMib })),
    })),
  };
}
