/**
 * The addon's NVML loader and device reads (nvmlInit, deviceInfo, computeProcesses) against the
 * libnvidia-ml test double. NVML is loaded once per process, so each configuration runs in a
 * child process with its own environment; expected values come from the scenario.
 */
import { spawnSync } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import type { DeviceInfo, NativeFailure, NvmlInfo, ProcessList } from "../binding.js";
import { ADDON, FAKE_NVML, FAKE_NVML_LEGACY, haveDoubles } from "./fakes/paths.js";
import { NVML, type Scenario, type ScenarioSpec, writeScenario } from "./fakes/scenario.js";

/** What the child reports: bigints as strings, and the instants around each process read. */
interface ChildReport {
  readonly init: NvmlInfo | NativeFailure;
  readonly devices: Record<string, DeviceInfo | NativeFailure>;
  readonly processes: Record<string, (Omit<ProcessList, "tNs"> & { tNs: string }) | NativeFailure>;
  readonly around: Record<string, [string, string]>;
  /** With TEST_SAMPLE: the ring header and last sample after a few ticks on device 0. */
  readonly sampled?: {
    counter: number;
    powerSource: number;
    state: number;
    flags: number;
    energyMj: number | null;
    powerMw: number;
  };
}

// Runs in the child (CommonJS, `node -e`): init, then deviceInfo and computeProcesses per index.
const CHILD = `
const b = require(process.env.TEST_ADDON);
(async () => {
  const out = { init: await b.nvmlInit(), devices: {}, processes: {}, around: {} };
  for (const i of JSON.parse(process.env.TEST_DEVICES)) {
    out.devices[i] = await b.deviceInfo(i);
    const before = b.monotonicNs();
    out.processes[i] = await b.computeProcesses(i);
    out.around[i] = [before, b.monotonicNs()];
  }
  if (process.env.TEST_SAMPLE) {
    const s = b.openSampler(0, 5);
    const f = new Float64Array(s.buffer);
    const L = b.layout;
    while (f[L.hHead] < 5) await new Promise((r) => setTimeout(r, 5));
    const last = L.headerSlots + (f[L.hHead] - 1) * L.sampleSlots;
    out.sampled = { counter: f[L.hCounter], powerSource: f[L.hPowerSource], state: f[L.hState],
      flags: f[last + L.sFlags], energyMj: f[last + L.sEnergyMj], powerMw: f[last + L.sPowerMw] };
    s.release();
  }
  process.stdout.write(JSON.stringify(out, (k, v) => (typeof v === "bigint" ? String(v) : v)));
})();
`;

/** The parent's environment without anything that steers giul or the doubles. */
function baseEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("GIUL_") && key !== "NODE_OPTIONS") env[key] = value;
  }
  return env;
}

const scenarios: Scenario[] = [];
afterAll(() => {
  for (const sc of scenarios) sc.remove();
});

function scenario(spec: ScenarioSpec): Scenario {
  const sc = writeScenario(spec);
  scenarios.push(sc);
  return sc;
}

function runChild(env: Readonly<Record<string, string>>, devices: readonly number[]): ChildReport {
  const ran = spawnSync(process.execPath, ["-e", CHILD], {
    env: { ...baseEnv(), TEST_ADDON: ADDON, TEST_DEVICES: JSON.stringify(devices), ...env },
    encoding: "utf8",
    timeout: 20_000,
  });
  expect(ran.stderr).toBe("");
  expect(ran.status).toBe(0);
  return JSON.parse(ran.stdout) as ChildReport;
}

function ok<T extends { ok: true }>(value: T | NativeFailure): T {
  if (!value.ok) throw new Error(`expected ok, got ${value.code}: ${value.reason}`);
  return value;
}

function failure(value: { ok: boolean } | undefined): NativeFailure {
  if (value === undefined || value.ok) throw new Error(`expected a failure, got ${JSON.stringify(value)}`);
  return value as NativeFailure;
}

describe.skipIf(!haveDoubles())("native NVML loader (test double)", () => {
  it("initialises with the versioned symbols and reports the driver", () => {
    const sc = scenario({ driverVersion: "575.51.02", devices: [{}, {}, {}] });
    const report = runChild(sc.env(), []);
    const info = ok(report.init);
    expect(info.library).toBe(FAKE_NVML);
    expect(info.driverVersion).toBe("575.51.02");
    expect(info.deviceCount).toBe(3);
    expect(info.symbols).toEqual({
      init: "nvmlInit_v2",
      count: "nvmlDeviceGetCount_v2",
      handle: "nvmlDeviceGetHandleByIndex_v2",
      name: "nvmlDeviceGetName",
      uuid: "nvmlDeviceGetUUID",
      energy: "nvmlDeviceGetTotalEnergyConsumption",
      power: "nvmlDeviceGetPowerUsage",
      powerLimit: "nvmlDeviceGetEnforcedPowerLimit",
      fieldValues: "nvmlDeviceGetFieldValues",
      memory: "nvmlDeviceGetMemoryInfo_v2",
      utilization: "nvmlDeviceGetUtilizationRates",
      processes: "nvmlDeviceGetComputeRunningProcesses_v2",
      processName: "nvmlSystemGetProcessName",
      driverVersion: "nvmlSystemGetDriverVersion",
    });
  });

  it("reads a device's fields as the scenario sets them", () => {
    const sc = scenario({
      devices: [
        {
          name: "NVIDIA L40S",
          uuid: "GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
          power: 187.25,
          memTotalMib: 46068,
          memUsedMib: 20000,
          memReservedMib: 500,
          utilGpu: 73,
        },
      ],
    });
    const dev = ok(runChild(sc.env(), [0]).devices[0] ?? failure(undefined));
    expect(dev).toMatchObject({
      index: 0,
      name: "NVIDIA L40S",
      uuid: "GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
      memoryTotalMib: 46068,
      // nvmlDeviceGetMemoryInfo_v2: used excludes reserved, free = total - reserved - used.
      memoryUsedMib: 20000,
      memoryFreeMib: 46068 - 500 - 20000,
      utilizationPct: 73,
      energyCounter: true,
      instantPower: true,
      powerUsage: true,
      powerW: 187.25,
      powerLimitW: 700,
    });
    expect(dev.notes).toEqual({});
  });

  it("reports two devices, one without an energy counter, and says why", () => {
    const sc = scenario({
      devices: [{ power: 300 }, { counter: false, instantField: false, powerMode: "instant", power: 90 }],
    });
    const report = runChild(sc.env(), [0, 1]);
    const d0 = ok(report.devices[0] ?? failure(undefined));
    const d1 = ok(report.devices[1] ?? failure(undefined));
    expect(d0.energyCounter).toBe(true);
    expect(d0.powerW).toBe(300);
    expect(d1.energyCounter).toBe(false);
    expect(d1.instantPower).toBe(false);
    expect(d1.powerUsage).toBe(true);
    expect(d1.powerW).toBe(90);
    expect(d1.notes.energyCounter).toMatch(/nvmlDeviceGetTotalEnergyConsumption.*Not Supported \(3\)/);
    expect(d1.notes.instantPower).toMatch(/\(3\)/);
  });

  it("falls back to the unversioned symbols of an old driver, which has no counter", () => {
    const sc = scenario({
      devices: [
        {
          memTotalMib: 16000,
          memUsedMib: 1000,
          memReservedMib: 200,
          procs: [{ pid: 777, usedMib: 2048, name: "python3" }],
        },
      ],
    });
    const report = runChild(sc.env({ GIUL_NVML_LIBRARY: FAKE_NVML_LEGACY, TEST_SAMPLE: "1" }), [0]);
    const info = ok(report.init);
    expect(info.symbols).toMatchObject({
      init: "nvmlInit",
      count: "nvmlDeviceGetCount",
      handle: "nvmlDeviceGetHandleByIndex",
      energy: null,
      fieldValues: null,
      memory: "nvmlDeviceGetMemoryInfo",
      processes: "nvmlDeviceGetComputeRunningProcesses",
    });
    const dev = ok(report.devices[0] ?? failure(undefined));
    expect(dev.energyCounter).toBe(false);
    expect(dev.instantPower).toBe(false);
    expect(dev.powerUsage).toBe(true);
    // v1 `used` includes reserved memory.
    expect(dev.memoryUsedMib).toBe(1200);
    expect(dev.notes.energyCounter).toMatch(/does not export nvmlDeviceGetTotalEnergyConsumption/);
    const procs = ok(report.processes[0] ?? failure(undefined));
    expect(procs.processes).toEqual([{ pid: 777, usedMib: 2048, name: "python3" }]);
    // The sampler: power from nvmlDeviceGetPowerUsage (the default scenario power, 50 W), no counter.
    expect(report.sampled).toEqual({
      counter: 0,
      powerSource: 2,
      state: 1,
      flags: 2,
      energyMj: null,
      powerMw: 50_000,
    });
  });

  it("reports a missing library as NVML_LIBRARY_NOT_FOUND, and every later call the same", () => {
    const report = runChild({ GIUL_NVML_LIBRARY: "/nonexistent/libnvidia-ml.so.1" }, [0]);
    const init = failure(report.init);
    expect(init.code).toBe("NVML_LIBRARY_NOT_FOUND");
    expect(init.nvmlReturn).toBeNull();
    expect(init.reason).toContain("/nonexistent/libnvidia-ml.so.1");
    expect(init.reason).toContain("GIUL_NVML_LIBRARY");
    expect(failure(report.devices[0]).code).toBe("NVML_LIBRARY_NOT_FOUND");
    expect(failure(report.processes[0]).code).toBe("NVML_LIBRARY_NOT_FOUND");
  });

  it("maps init errors: 9 is NVML_DRIVER_NOT_LOADED, others NVML_INIT_FAILED", () => {
    const notLoaded = failure(runChild(scenario({ initError: NVML.ERROR_DRIVER_NOT_LOADED }).env(), []).init);
    expect(notLoaded.code).toBe("NVML_DRIVER_NOT_LOADED");
    expect(notLoaded.nvmlReturn).toBe(9);
    expect(notLoaded.reason).toMatch(/driver/i);
    const mismatch = failure(
      runChild(scenario({ initError: NVML.ERROR_LIB_RM_VERSION_MISMATCH }).env(), []).init,
    );
    expect(mismatch.code).toBe("NVML_INIT_FAILED");
    expect(mismatch.nvmlReturn).toBe(18);
  });

  it("reads compute processes with names, and NVML_VALUE_NOT_AVAILABLE memory as null", () => {
    const sc = scenario({
      devices: [
        {
          procs: [
            { pid: 4242, usedMib: 1024, name: "vllm serve" },
            { pid: 5151, usedMib: "na", name: "/usr/bin/ollama" },
            { pid: 6000, usedMib: 64, name: "gone", untilMs: 0 },
          ],
        },
        {},
      ],
    });
    const report = runChild(sc.env(), [0, 1]);
    const list = ok(report.processes[0] ?? failure(undefined));
    expect(list.processes).toEqual([
      { pid: 4242, usedMib: 1024, name: "vllm serve" },
      { pid: 5151, usedMib: null, name: "/usr/bin/ollama" },
    ]);
    const [before, after] = report.around[0] ?? ["0", "0"];
    expect(BigInt(list.tNs) >= BigInt(before) && BigInt(list.tNs) <= BigInt(after)).toBe(true);
    expect(ok(report.processes[1] ?? failure(undefined)).processes).toEqual([]);
  });

  it("fails a lost GPU, a refused handle and an absent index with their own codes", () => {
    const sc = scenario({
      devices: [
        { errors: [{ fromMs: -1e9, code: NVML.ERROR_GPU_IS_LOST }] },
        { handleError: NVML.ERROR_NO_PERMISSION },
      ],
    });
    const report = runChild(sc.env(), [0, 1, 2]);
    expect(failure(report.devices[0])).toMatchObject({ code: "NVML_GPU_LOST", nvmlReturn: 15 });
    expect(failure(report.processes[0])).toMatchObject({ code: "NVML_GPU_LOST", nvmlReturn: 15 });
    expect(failure(report.devices[1])).toMatchObject({ code: "NVML_DEVICE_NOT_FOUND", nvmlReturn: 4 });
    expect(failure(report.devices[2])).toMatchObject({ code: "NVML_DEVICE_NOT_FOUND", nvmlReturn: null });
  });
});
