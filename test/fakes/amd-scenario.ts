/**
 * The libamd_smi double's side of a scenario (test/fakes/SCENARIO.md): the same file and ground
 * truth as the NVML double's, read through GIUL_FAKE_AMDSMI_SCENARIO, on a host where NVML is
 * absent (an AMD-only host: gpuIndex numbers AMD SMI's cards). The accumulator mirrors
 * fake_amdsmi.c: 2^-16 J counts of the exact integral at the counter's last update.
 */
import { FAKE_AMDSMI, NO_NVML } from "./paths.js";
import { Scenario, type ScenarioSpec } from "./scenario.js";

/** AMD's counter updates about every millisecond (the driver's metrics cache): the double's default. */
const AMD_STEP_MS = 1;

/** The spec with the AMD double's defaults the TS truth must know (its counter step). */
export function amdSpec(spec: ScenarioSpec): ScenarioSpec {
  const devices = (spec.devices ?? [{}]).map((d) => ({ counterStepMs: AMD_STEP_MS, ...d }));
  return { ...spec, devices };
}

/** The environment of a process that sees the AMD double and no NVML. */
export function amdEnv(sc: Scenario): Record<string, string> {
  return { GIUL_FAKE_AMDSMI_SCENARIO: sc.path, GIUL_AMDSMI_LIBRARY: FAKE_AMDSMI, GIUL_NVML_LIBRARY: NO_NVML };
}

/**
 * Writes a scenario and points this process at the AMD double for good (NVML absent). Call it at
 * the top of a test file, before giul is imported.
 */
export function amdScenarioForThisProcess(spec: ScenarioSpec = {}): Scenario {
  const sc = new Scenario(amdSpec(spec));
  Object.assign(process.env, amdEnv(sc));
  delete process.env.GIUL_BACKEND;
  return sc;
}
