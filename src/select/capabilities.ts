/**
 * What one local card offers for metering, probed once and cached: the addon and NVML (through
 * them the card's counter and power), and nvidia-smi. Never throws: every failure is a field with
 * a reason. Selection (./index.ts) asks for one card; giul-probe's report (./host.ts) reads the
 * same things for every card.
 */
import type { AmdInfo, DeviceInfo, GiulBinding, NativeFailure, NvmlInfo } from "../../binding.js";
import { type BindingLoad, loadBinding } from "../sources/native/binding.js";
import type { SmiProbe } from "../sources/smi/parse.js";
import { findAmdSmi, findNvidiaSmi, type SmiStatus } from "../sources/smi/path.js";
import { AMD_ON_MIXED_HOST, vendorIndex } from "../track/card.js";
import type { CardCapabilities, LocalCapabilities } from "../track/descriptor.js";
import { debug } from "../vocabulary/debug.js";

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

/** What the probe reads from the process; replaceable so that a test can pass its own. */
export interface HostDeps {
  readonly load: () => BindingLoad;
  readonly env: NodeJS.ProcessEnv;
  /** Runs nvidia-smi's power query once (default: querySmiOnce). */
  readonly querySmi?: (path: string, env: NodeJS.ProcessEnv) => Promise<SmiProbe>;
}

/** The process itself: the addon as src/sources/native/binding.ts loads it, and process.env. */
export const defaultHostDeps: HostDeps = { load: loadBinding, env: process.env };

const DEFAULT_LIBRARY = "libnvidia-ml.so.1";

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * `keepAlive`: whether the pending call keeps the event loop alive. Selection probes in the
 * background (a window does not wait for them past its timeout) and pass false, so that a driver
 * that does not answer never keeps a process from exiting; giul-probe waits for its report.
 */
async function initNvml(binding: GiulBinding, keepAlive: boolean): Promise<NvmlInfo | NativeFailure> {
  try {
    return await binding.nvmlInit({ keepAlive });
  } catch (error) {
    return {
      ok: false,
      code: "NVML_CALL_FAILED",
      nvmlReturn: null,
      reason: `nvmlInit threw: ${errorText(error)}`,
    };
  }
}

export async function readDevice(
  binding: GiulBinding,
  index: number,
  keepAlive = true,
): Promise<DeviceInfo | NativeFailure> {
  try {
    return await binding.deviceInfo(index, { keepAlive });
  } catch (error) {
    return {
      ok: false,
      code: "NVML_CALL_FAILED",
      nvmlReturn: null,
      reason: `deviceInfo(${index}) threw: ${errorText(error)}`,
    };
  }
}

export interface NvmlState {
  readonly binding: GiulBinding | null;
  readonly status: NvmlStatus;
}

/** NVML as the addon loads it (a failed load is tried again at each call); `keepAlive` as in initNvml. */
export async function nvmlState(deps: HostDeps, keepAlive = true): Promise<NvmlState> {
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
  const init = await initNvml(load.binding, keepAlive);
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

/** AMD SMI as the addon loads it: its info, or why it is not there. Never throws. */
export async function amdState(
  deps: HostDeps,
  keepAlive = true,
): Promise<AmdInfo | { ok: false; reason: string }> {
  const load = deps.load();
  if (!load.ok) return { ok: false, reason: "the giul addon, through which AMD SMI is read, is not loaded" };
  if (load.binding.amdInit === undefined) return { ok: false, reason: "the giul addon predates AMD SMI" };
  try {
    return await load.binding.amdInit({ keepAlive });
  } catch (error) {
    return { ok: false, reason: `amdInit threw: ${errorText(error)}` };
  }
}

/** An AMD card's capabilities (no NVML card on this host: `gpuIndex` numbers AMD SMI's cards). */
async function amdCapabilities(binding: GiulBinding, amd: AmdInfo, index: number, smi: SmiStatus) {
  const none = { nvml: false, energyCounter: false, nvmlPower: false, smi: smi.path !== null };
  if (!Number.isInteger(index) || index < 0 || index >= amd.deviceCount) {
    const reason = `there is no GPU ${index} (AMD SMI reports ${amd.deviceCount} device(s))`;
    return { ...none, info: null, reason, vendor: "amd" as const };
  }
  let read: DeviceInfo | NativeFailure;
  try {
    read = binding.amdDeviceInfo
      ? await binding.amdDeviceInfo(index, { keepAlive: false })
      : { ok: false, code: "AMDSMI_CALL_FAILED", nvmlReturn: null, reason: "no amdDeviceInfo" };
  } catch (error) {
    read = { ok: false, code: "AMDSMI_CALL_FAILED", nvmlReturn: null, reason: errorText(error) };
  }
  if (!read.ok) {
    return {
      ...none,
      info: null,
      reason: `AMD GPU ${index} cannot be read: ${read.reason}`,
      vendor: "amd" as const,
    };
  }
  return {
    ...amdCapabilitiesOf(read, smi),
    ...(await amdShared(binding, read)),
    info: read,
    reason: null,
    driverVersion: null,
    vendor: "amd" as const,
  };
}

/**
 * Cards whose energy one counter counts (native/amd_device_reader.cc): an MI250 die pair, the
 * partitions of an MI300X socket. Each is metered on that counter and shared by its card's UUID,
 * so that windows on any of them share it and nothing is counted twice.
 */
async function amdShared(binding: GiulBinding, info: DeviceInfo) {
  const shared = info.sharedCounter;
  if (shared === undefined) return {};
  const { at, cards } = shared;
  const counterNote =
    shared.kind === "pair"
      ? `die ${at}'s counter counts the energy of dies ${cards.join(" and ")} (an MI250 die pair): ` +
        "the windows on both dies share it"
      : `partition ${at}'s counter counts its socket's ${cards.length} partitions (a partitioned ` +
        "MI300X): the windows on every partition share it";
  if (at === info.index) return { counterNote, ...(info.uuid === null ? {} : { cardKey: info.uuid }) };
  const counter = await binding.amdDeviceInfo?.(at, { keepAlive: false }).catch(() => null);
  const key = counter?.ok === true ? counter.uuid : null;
  return { counterAt: at, counterNote, ...(key === null ? {} : { cardKey: key }) };
}

/** What an AMD card offers, from its amdDeviceInfo (a failed read offers nothing). */
export function amdCapabilitiesOf(info: DeviceInfo | NativeFailure, smi: SmiStatus): LocalCapabilities {
  const none = { nvml: false, energyCounter: false, nvmlPower: false, smi: smi.path !== null };
  if (!info.ok) return none;
  // A card whose energy another card's counter counts (an MI250 die, a partition) is metered on it.
  const paired = info.sharedCounter !== undefined && info.sharedCounter.at !== info.index;
  return {
    ...none,
    amdsmi: true,
    energyCounter: info.energyCounter || paired,
    amdPower: info.instantPower || info.powerUsage,
  };
}

export function capabilitiesOf(info: DeviceInfo | NativeFailure | null, smi: SmiStatus): LocalCapabilities {
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

const cachedCapabilities = new Map<number, Promise<CardCapabilities>>();

/** One local card's capabilities and state, for the backend choice (src/select/). Never throws. */
async function localCapabilitiesWith(index: number, deps: HostDeps): Promise<CardCapabilities> {
  const smi = findNvidiaSmi(deps.env);
  const nvml = await nvmlState(deps, false);
  const nvidiaCards = nvml.status.available ? nvml.status.deviceCount : 0;
  let amdWhy = "";
  if (nvml.binding !== null) {
    const amd = await amdState(deps, false);
    if (amd.ok && amd.deviceCount > 0) {
      // Without NVIDIA cards gpuIndex numbers AMD's, as `amd-smi list` does; with them, an AMD
      // card is found by its UUID (AMD_ON_MIXED_HOST), and an index could name either vendor's.
      if (index >= AMD_ON_MIXED_HOST)
        return amdCapabilities(nvml.binding, amd, index - AMD_ON_MIXED_HOST, smi);
      if (nvidiaCards === 0) return amdCapabilities(nvml.binding, amd, index, smi);
      // The NVIDIA card of that index, read as usual, and flagged: a node that named it by index
      // is refused (selection), one that found it by UUID is not.
      const ambiguousIndex =
        `this host has ${nvidiaCards} NVIDIA and ${amd.deviceCount} AMD card(s): gpuIndex ${index} could name ` +
        "either; name the card by gpuUuid (as nvidia-smi -L or amd-smi list prints it)";
      return { ...(await nvidiaCapabilities(index, deps, nvml, smi, "")), ambiguousIndex };
    }
    if (nvidiaCards === 0)
      amdWhy = amd.ok ? "; AMD SMI reports no AMD GPU" : `; AMD SMI is unavailable: ${amd.reason}`;
  }
  return nvidiaCapabilities(index, deps, nvml, smi, amdWhy);
}

/** An NVIDIA card's capabilities through NVML (`amdWhy`: why AMD SMI had none, for the reason). */
async function nvidiaCapabilities(
  index: number,
  deps: HostDeps,
  nvml: NvmlState,
  smi: SmiStatus,
  amdWhy: string,
): Promise<CardCapabilities> {
  let info: DeviceInfo | null = null;
  let reason: string | null = null;
  if (nvml.binding === null || !nvml.status.available) {
    reason =
      nvml.binding === null
        ? "the giul addon is not loaded"
        : `NVML is unavailable: ${nvml.status.reason}${amdWhy}`;
  } else if (!Number.isInteger(index) || index < 0 || index >= nvml.status.deviceCount) {
    reason = `there is no GPU ${index} (NVML reports ${nvml.status.deviceCount} device(s)${amdWhy})`;
  } else {
    const read = await readDevice(nvml.binding, index, false);
    if (read.ok) info = read;
    else reason = `GPU ${index} cannot be read: ${read.reason}`;
  }
  if (reason !== null) debug("card %d: %s", index, reason);
  const amdCli = info === null && findAmdSmi(deps.env).path !== null;
  return { ...capabilitiesOf(info, smi), amdCli, info, reason, driverVersion: nvml.status.driverVersion };
}

/**
 * {@link localCapabilitiesWith} for this process. A card that could be read is cached until
 * {@link forgetCapabilities} (`probeHost({ refresh: true })`); one that could not (no addon, NVML or
 * card unreadable) is not, so that selection's re-probe after its backoff looks again (a driver
 * loaded since, nvidia-smi installed since) rather than getting the old failure back.
 */
export function localCapabilities(index: number): Promise<CardCapabilities> {
  let entry = cachedCapabilities.get(index);
  if (entry === undefined) {
    const probing = localCapabilitiesWith(index, defaultHostDeps);
    entry = probing;
    cachedCapabilities.set(index, probing);
    void probing.then((caps) => {
      if (caps.reason !== null && cachedCapabilities.get(index) === probing) cachedCapabilities.delete(index);
    });
  }
  return entry;
}

/** Forgets every cached card: the next {@link localCapabilities} probes again. */
export function forgetCapabilities(): void {
  cachedCapabilities.clear();
}

/**
 * The index of the local card with this UUID (NVML's, as `nvidia-smi -L` prints it), or why none
 * was found. Reads every card's capabilities, which selection caches anyway. Never throws.
 */
export async function indexOfUuid(
  uuid: string,
): Promise<{ index: number } | { index: null; reason: string }> {
  const nvml = await nvmlState(defaultHostDeps, false);
  const nvidiaCards = nvml.status.available ? nvml.status.deviceCount : 0;
  const amd = nvml.binding === null ? null : await amdState(defaultHostDeps, false);
  const amdCards = amd?.ok ? amd.deviceCount : 0;
  if (nvml.binding === null || nvidiaCards + amdCards === 0) {
    const why =
      nvml.binding === null ? "the giul addon is not loaded" : `NVML is unavailable: ${nvml.status.reason}`;
    return { index: null, reason: `card ${uuid} is named by UUID, which NVML or AMD SMI finds, and ${why}` };
  }
  // NVIDIA's cards by their index; AMD's by theirs, offset where NVIDIA's are there too.
  const base = nvidiaCards > 0 ? AMD_ON_MIXED_HOST : 0;
  const indices = [
    ...Array.from({ length: nvidiaCards }, (_, i) => i),
    ...Array.from({ length: amdCards }, (_, i) => base + i),
  ];
  const seen: string[] = [];
  for (const index of indices) {
    const found = (await localCapabilities(index)).info?.uuid ?? null;
    if (found !== null && found.toLowerCase() === uuid.toLowerCase()) return { index };
    seen.push(
      `${index >= AMD_ON_MIXED_HOST || nvidiaCards === 0 ? "AMD " : ""}${vendorIndex(index)}: ${found ?? "unreadable"}`,
    );
  }
  return {
    index: null,
    reason: `no card on this host has UUID ${uuid} (its cards: ${seen.length > 0 ? seen.join(", ") : "none"})`,
  };
}
