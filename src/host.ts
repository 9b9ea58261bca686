/**
 * What this host offers for metering, probed once per process: the addon, NVML, each card's
 * features and the backend a local Meter would use on it, and nvidia-smi. Never throws: every
 * failure is a field with a reason. giul-probe prints this; select.ts asks for one card.
 */
import type { DeviceInfo, GiulBinding, NativeFailure, NvmlInfo } from "../binding.js";
import { querySmiOnce, type SmiProbe } from "./backends/smi-parse.js";
import { findNvidiaSmi, type SmiStatus } from "./backends/smi-path.js";
import { chooseLocalBackend, type LocalCapabilities } from "./backends/types.js";
import { type BindingLoad, loadBinding } from "./binding.js";
import { debug } from "./debug.js";
import type { BackendName } from "./measurement.js";

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

export interface NvmlStatus {
  /** libnvidia-ml loaded and nvmlInit succeeded. */
  readonly available: boolean;
  /** Why not, for a person, or null when available. */
  readonly reason: string | null;
  /** The addon's failure code (NVML_LIBRARY_NOT_FOUND, …), "ADDON_UNAVAILABLE", or null. */
  readonly code: string | null;
  /** The nvmlReturn_t behind the failure, when there was one. */
  readonly nvmlReturn: number | null;
  readonly driverVersion: string | null;
  readonly nvmlVersion: string | null;
  /** What was (or would be) given to dlopen: GIUL_NVML_LIBRARY or libnvidia-ml.so.1. */
  readonly library: string;
  readonly deviceCount: number;
}

export interface HostDevice {
  readonly index: number;
  readonly name: string | null;
  readonly uuid: string | null;
  readonly memoryUsedMib: number | null;
  readonly memoryTotalMib: number | null;
  /** nvmlDeviceGetTotalEnergyConsumption answers. */
  readonly energyCounter: boolean;
  /** Instantaneous power (NVML field 186) answers. */
  readonly instantPower: boolean;
  /** nvmlDeviceGetPowerUsage answers (a trailing average on recent cards). */
  readonly powerUsage: boolean;
  /** The backend a local Meter on this card would use. */
  readonly backend: BackendName;
  /** Why the card could not be read, or null. */
  readonly reason: string | null;
}

export interface HostReport {
  readonly addon: AddonStatus;
  readonly nvml: NvmlStatus;
  readonly smi: SmiStatus;
  /**
   * One run of the smi sampler's query (null when no nvidia-smi was found): whether the driver
   * knows `power.draw.instant`, and per card which power the smi_sampler would read (instantaneous,
   * or `power.draw`, a 1 s average on Ampere and newer), or why it cannot.
   */
  readonly smiPower: SmiProbe | null;
  readonly devices: readonly HostDevice[];
}

/** One local card, for the backend choice. */
export interface CardCapabilities extends LocalCapabilities {
  /** The card's state as read when probed, or null when NVML could not read it. */
  readonly info: DeviceInfo | null;
  /** Why NVML cannot read this card (no addon, no NVML, no such index, read failed), or null. */
  readonly reason: string | null;
}

/** What the probe reads from the process; replaceable so that a test can pass its own. */
export interface HostDeps {
  readonly load: () => BindingLoad;
  readonly env: NodeJS.ProcessEnv;
  /** Runs nvidia-smi's power query once (default: querySmiOnce). */
  readonly querySmi?: (path: string, env: NodeJS.ProcessEnv) => Promise<SmiProbe>;
}

const defaultDeps: HostDeps = { load: loadBinding, env: process.env };

const DEFAULT_LIBRARY = "libnvidia-ml.so.1";

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function initNvml(binding: GiulBinding): Promise<NvmlInfo | NativeFailure> {
  try {
    return await binding.nvmlInit();
  } catch (error) {
    return {
      ok: false,
      code: "NVML_CALL_FAILED",
      nvmlReturn: null,
      reason: `nvmlInit threw: ${errorText(error)}`,
    };
  }
}

async function readDevice(binding: GiulBinding, index: number): Promise<DeviceInfo | NativeFailure> {
  try {
    return await binding.deviceInfo(index);
  } catch (error) {
    return {
      ok: false,
      code: "NVML_CALL_FAILED",
      nvmlReturn: null,
      reason: `deviceInfo(${index}) threw: ${errorText(error)}`,
    };
  }
}

interface NvmlState {
  readonly binding: GiulBinding | null;
  readonly status: NvmlStatus;
}

async function nvmlState(deps: HostDeps): Promise<NvmlState> {
  const library = deps.env.GIUL_NVML_LIBRARY || DEFAULT_LIBRARY;
  const load = deps.load();
  if (!load.ok) {
    return {
      binding: null,
      status: {
        available: false,
        reason: "the giul addon, through which NVML is read, is not loaded (see addon.reason)",
        code: "ADDON_UNAVAILABLE",
        nvmlReturn: null,
        driverVersion: null,
        nvmlVersion: null,
        library,
        deviceCount: 0,
      },
    };
  }
  const init = await initNvml(load.binding);
  if (!init.ok) {
    return {
      binding: load.binding,
      status: {
        available: false,
        reason: init.reason,
        code: init.code,
        nvmlReturn: init.nvmlReturn,
        driverVersion: null,
        nvmlVersion: null,
        library,
        deviceCount: 0,
      },
    };
  }
  return {
    binding: load.binding,
    status: {
      available: true,
      reason: null,
      code: null,
      nvmlReturn: null,
      driverVersion: init.driverVersion,
      nvmlVersion: init.nvmlVersion,
      library: init.library,
      deviceCount: init.deviceCount,
    },
  };
}

function capabilitiesOf(info: DeviceInfo | NativeFailure | null, smi: SmiStatus): LocalCapabilities {
  const smiFound = smi.path !== null;
  if (info === null || !info.ok)
    return { nvml: false, energyCounter: false, nvmlPower: false, smi: smiFound };
  return {
    nvml: true,
    energyCounter: info.energyCounter,
    nvmlPower: info.instantPower || info.powerUsage,
    smi: smiFound,
  };
}

function hostDevice(index: number, info: DeviceInfo | NativeFailure, smi: SmiStatus): HostDevice {
  const backend = chooseLocalBackend(capabilitiesOf(info, smi));
  if (!info.ok) {
    return {
      index,
      name: null,
      uuid: null,
      memoryUsedMib: null,
      memoryTotalMib: null,
      energyCounter: false,
      instantPower: false,
      powerUsage: false,
      backend,
      reason: info.reason,
    };
  }
  return {
    index,
    name: info.name,
    uuid: info.uuid,
    memoryUsedMib: info.memoryUsedMib,
    memoryTotalMib: info.memoryTotalMib,
    energyCounter: info.energyCounter,
    instantPower: info.instantPower,
    powerUsage: info.powerUsage,
    backend,
    reason: null,
  };
}

async function querySmi(deps: HostDeps, path: string): Promise<SmiProbe> {
  try {
    return await (deps.querySmi ?? querySmiOnce)(path, deps.env);
  } catch (error) {
    return {
      ok: false,
      reason: `running ${path} failed: ${errorText(error)}`,
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
      devices.push(hostDevice(index, await readDevice(binding, index), smi));
    }
  }
  debug(
    "host: addon %s, nvml %s, %d device(s), smi %s",
    addon.loaded,
    nvml.status.available,
    devices.length,
    smi.path,
  );
  const smiPower = smi.path === null ? null : await querySmi(deps, smi.path);
  return { addon, nvml: nvml.status, smi, smiPower, devices };
}

let cachedReport: Promise<HostReport> | undefined;
const cachedCapabilities = new Map<number, Promise<CardCapabilities>>();

/** What this host supports, probed once per process (`refresh: true` probes again). Never throws. */
export function probeHost(options: { readonly refresh?: boolean } = {}): Promise<HostReport> {
  if (options.refresh === true) {
    cachedReport = undefined;
    cachedCapabilities.clear();
  }
  cachedReport ??= probeHostWith(defaultDeps);
  return cachedReport;
}

/** One local card's capabilities and state, for the backend choice (select.ts). Never throws. */
export async function localCapabilitiesWith(index: number, deps: HostDeps): Promise<CardCapabilities> {
  const smi = findNvidiaSmi(deps.env);
  const nvml = await nvmlState(deps);
  let info: DeviceInfo | null = null;
  let reason: string | null = null;
  if (nvml.binding === null || !nvml.status.available) {
    reason =
      nvml.binding === null ? "the giul addon is not loaded" : `NVML is unavailable: ${nvml.status.reason}`;
  } else if (!Number.isInteger(index) || index < 0 || index >= nvml.status.deviceCount) {
    reason = `there is no GPU ${index} (NVML reports ${nvml.status.deviceCount} device(s))`;
  } else {
    const read = await readDevice(nvml.binding, index);
    if (read.ok) info = read;
    else reason = `GPU ${index} cannot be read: ${read.reason}`;
  }
  if (reason !== null) debug("card %d: %s", index, reason);
  return { ...capabilitiesOf(info, smi), info, reason };
}

/**
 * {@link localCapabilitiesWith} for this process. A card that could be read is cached until
 * `probeHost({ refresh: true })`; one that could not (no addon, NVML or card unreadable) is not, so
 * that select.ts's re-probe after its backoff looks again (a driver loaded since, nvidia-smi
 * installed since) rather than getting the old failure back.
 */
export function localCapabilities(index: number): Promise<CardCapabilities> {
  let entry = cachedCapabilities.get(index);
  if (entry === undefined) {
    const probing = localCapabilitiesWith(index, defaultDeps);
    entry = probing;
    cachedCapabilities.set(index, probing);
    void probing.then((caps) => {
      if (caps.reason !== null && cachedCapabilities.get(index) === probing) cachedCapabilities.delete(index);
    });
  }
  return entry;
}
