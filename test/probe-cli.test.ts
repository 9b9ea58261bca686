/**
 * giul-probe against the libnvidia-ml test double: what it prints must match the scenario (the
 * ground truth), in JSON and for a person, and it exits 0 whatever the host lacks.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { built, FAKE_NVML, FAKE_SMI, ROOT } from "./fakes/paths.js";
import { NVML, type Scenario, type ScenarioSpec, sliceUuid, writeScenario } from "./fakes/scenario.js";

const PROBE = join(ROOT, "dist", "cli", "probe.js");
// giul-probe, and the doubles it reads (skipped where they are not built; a failure in CI)
const ready = built([PROBE, FAKE_NVML, FAKE_SMI], "giul-probe or the test doubles");

interface Ran {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function probe(args: readonly string[], env: Readonly<Record<string, string>>): Ran {
  const base: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith("GIUL_")) base[key] = value;
  const result = spawnSync(process.execPath, [PROBE, ...args], {
    env: { ...base, ...env },
    encoding: "utf8",
    timeout: 20_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

interface DeviceJson {
  index: number;
  name: string | null;
  uuid: string | null;
  memoryUsedMib: number | null;
  memoryTotalMib: number | null;
  energyCounter: boolean;
  instantPower: boolean;
  powerUsage: boolean;
  backend: string;
}

interface ProbeJson {
  addon: { loaded: boolean };
  nvml: { available: boolean; reason: string | null; code: string | null; driverVersion: string | null };
  smi: { path: string | null };
  devices: DeviceJson[];
}

function probeJson(env: Readonly<Record<string, string>>): ProbeJson {
  const ran = probe(["--json"], env);
  expect(ran.stderr).toBe("");
  expect(ran.status).toBe(0);
  // Exactly one JSON object on stdout.
  return JSON.parse(ran.stdout) as ProbeJson;
}

/** The block of human output about one card (from its "GPU <i>" line to the next blank line). */
function cardSection(text: string, index: number): string {
  const start = text.indexOf(`GPU ${index}  `);
  expect(start).toBeGreaterThanOrEqual(0);
  const end = text.indexOf("\n\n", start);
  return text.slice(start, end === -1 ? undefined : end);
}

const TWO_CARDS: ScenarioSpec = {
  driverVersion: "575.51.03",
  devices: [
    {
      name: "NVIDIA H100 80GB HBM3",
      uuid: "GPU-11111111-2222-3333-4444-555555555555",
      counter: true,
      memTotalMib: 81559,
      memUsedMib: 1024,
      power: 120,
    },
    {
      name: "Tesla T4",
      uuid: "GPU-66666666-7777-8888-9999-000000000000",
      counter: false,
      instantField: false,
      powerMode: "average",
      memTotalMib: 15360,
      memUsedMib: 300,
      power: 30,
    },
  ],
};

let scenario: Scenario | undefined;
afterEach(() => {
  scenario?.remove();
  scenario = undefined;
});

describe.runIf(ready)("giul-probe with two cards, one with the energy counter and one without", () => {
  it("--json reports each card as the scenario declares it, and the backend each would use", () => {
    scenario = writeScenario(TWO_CARDS);
    const report = probeJson(scenario.env());
    expect(report.addon.loaded).toBe(true);
    expect(report.nvml).toMatchObject({ available: true, reason: null, driverVersion: "575.51.03" });
    expect(report.devices).toHaveLength(2);
    expect(report.devices[0]).toMatchObject({
      index: 0,
      name: "NVIDIA H100 80GB HBM3",
      uuid: "GPU-11111111-2222-3333-4444-555555555555",
      memoryUsedMib: 1024,
      memoryTotalMib: 81559,
      energyCounter: true,
      instantPower: true,
      backend: "nvml_counter",
    });
    expect(report.devices[1]).toMatchObject({
      index: 1,
      name: "Tesla T4",
      uuid: "GPU-66666666-7777-8888-9999-000000000000",
      memoryUsedMib: 300,
      memoryTotalMib: 15360,
      energyCounter: false,
      instantPower: false,
      powerUsage: true,
      backend: "nvml_sampler",
    });
    // scenario.env() puts the stand-in first on PATH: that is the nvidia-smi giul-probe must find
    expect(report.smi.path).toBe(FAKE_SMI);
  });

  it("human output lists each card with its memory, features and backend", () => {
    scenario = writeScenario(TWO_CARDS);
    const ran = probe([], scenario.env());
    expect(ran.status).toBe(0);
    expect(ran.stderr).toBe("");
    expect(ran.stdout).toMatch(/^NVML\s+loaded .*driver 575\.51\.03/m);
    expect(ran.stdout).not.toContain("No NVIDIA GPU found");
    const first = cardSection(ran.stdout, 0);
    expect(first).toContain("NVIDIA H100 80GB HBM3");
    expect(first).toMatch(/memory\s+1024 \/ 81559 MiB used/);
    expect(first).toMatch(/energy counter\s+yes/);
    expect(first).toMatch(/instantaneous power\s+yes/);
    expect(first).toMatch(/backend\s+nvml_counter: \S/);
    const second = cardSection(ran.stdout, 1);
    expect(second).toContain("Tesla T4");
    expect(second).toMatch(/memory\s+300 \/ 15360 MiB used/);
    expect(second).toMatch(/energy counter\s+no/);
    expect(second).toMatch(/instantaneous power\s+no/);
    expect(second).toMatch(/backend\s+nvml_sampler: \S/);
  });
});

interface SensorJson {
  seconds: number;
  counterUpdateMs: { least: number; median: number; most: number; updates: number } | null;
  powerRefreshMs: { atMostMs: number; shortestRunMs: number; medianRunMs: number } | null;
  cadenceLock: string;
  lockMs: number | null;
}

describe.runIf(ready)("giul-probe: what each card's sensors did while watched", () => {
  // Read every 10 ms (2 ms for the first 250 ms), watched 8 s. Card 0: a counter on an exact
  // 100 ms grid (a lock needs 48 updates), power refreshed every 20 ms. Card 1: a counter every
  // 100 ms whose updates come up to 12 ms late (off any grid), power every 50 ms. Card 2: a
  // counter every 20 ms, read too seldom to lock onto. Card 3: no counter. Power readings carry
  // ±2 W of noise, as real ones do, so each refresh shows.
  const noisy = { powerNoiseW: 2, power: 200 };
  const SENSORS: ScenarioSpec = {
    devices: [
      { ...noisy, counterStepMs: 100, powerUpdateMs: 20 },
      { ...noisy, counterStepMs: 100, counterJitterMs: 12, powerUpdateMs: 50 },
      { ...noisy, counterStepMs: 20, powerUpdateMs: 20 },
      { ...noisy, counter: false },
    ],
  };

  it("--json: update intervals, refresh and lock as the scenario makes them", () => {
    scenario = writeScenario(SENSORS);
    const ran = probe(["--json", "-s", "8"], scenario.env());
    expect(ran.status, ran.stderr).toBe(0);
    const devices = (JSON.parse(ran.stdout) as { devices: { sensor: SensorJson }[] }).devices;
    const [grid, wander, coarse, none] = devices.map((d) => d.sensor) as [
      SensorJson,
      SensorJson,
      SensorJson,
      SensorJson,
    ];
    expect(grid.seconds, JSON.stringify(grid)).toBe(8);
    // Each interval is known to within the reads around its two updates (about 10 ms apart).
    expect(grid.counterUpdateMs?.median, JSON.stringify(grid)).toBeGreaterThan(100 - 11);
    expect(grid.counterUpdateMs?.median, JSON.stringify(grid)).toBeLessThan(100 + 11);
    expect(grid.counterUpdateMs?.updates, JSON.stringify(grid)).toBeGreaterThan(48);
    expect(grid.cadenceLock, JSON.stringify(grid)).toBe("locked");
    expect(grid.lockMs, JSON.stringify(grid)).toBeLessThan(5);
    // The power reading holds each value 20 ms: the refresh bound is at least that, and near it.
    expect(grid.powerRefreshMs?.atMostMs, JSON.stringify(grid)).toBeGreaterThanOrEqual(20 - 2);
    expect(grid.powerRefreshMs?.atMostMs, JSON.stringify(grid)).toBeLessThan(20 + 12);
    // Each value is seen from the first read after its refresh to the read before the next one's.
    expect(grid.powerRefreshMs?.medianRunMs, JSON.stringify(grid)).toBeGreaterThan(20 - 12);
    expect(grid.powerRefreshMs?.medianRunMs, JSON.stringify(grid)).toBeLessThan(20 + 12);
    // 100 ms steps, each update 0–12 ms late: intervals 88–112 ms, seen through 10 ms reads.
    const w = wander.counterUpdateMs;
    expect(w?.median, JSON.stringify(wander)).toBeGreaterThan(100 - 11);
    expect(w?.median, JSON.stringify(wander)).toBeLessThan(100 + 11);
    expect(w?.least, JSON.stringify(wander)).toBeGreaterThan(88 - 11);
    expect(w?.most, JSON.stringify(wander)).toBeLessThan(112 + 11);
    expect((w?.most ?? 0) - (w?.least ?? 0)).toBeGreaterThan(4);
    expect(["learning", "irregular"]).toContain(wander.cadenceLock);
    expect(wander.powerRefreshMs?.atMostMs, JSON.stringify(wander)).toBeGreaterThanOrEqual(50 - 2);
    expect(coarse.counterUpdateMs?.median, JSON.stringify(coarse)).toBeGreaterThan(20 - 4);
    expect(coarse.counterUpdateMs?.median, JSON.stringify(coarse)).toBeLessThan(20 + 4);
    expect(coarse.cadenceLock, JSON.stringify(coarse)).toBe("coarse");
    expect(none).toMatchObject({ counterUpdateMs: null, cadenceLock: "none", lockMs: null });
  });

  it("prints each card's sensor rows for a person", () => {
    scenario = writeScenario({ devices: [SENSORS.devices?.[2] ?? {}, SENSORS.devices?.[3] ?? {}] });
    const ran = probe(["--seconds", "1"], scenario.env());
    expect(ran.status, ran.stderr).toBe(0);
    const coarse = cardSection(ran.stdout, 0);
    expect(coarse).toMatch(
      /counter updates\s+every (1[6-9]|2[0-4])(\.\d)? ms \(median of \d+ well-read updates; /,
    );
    expect(coarse).toMatch(/power refreshes\s+at least every \d+(\.\d)? ms \(each value held/);
    expect(coarse).toMatch(/cadence lock\s+no: read too seldom/);
    expect(coarse).toMatch(/bars bounded by\s+.* \(watched 1 s\)/);
    expect(cardSection(ran.stdout, 1)).toMatch(/cadence lock\s+no counter/);
  });
});

describe.runIf(ready)("giul-probe where a card offers no NVML power", () => {
  const NO_POWER: ScenarioSpec = {
    devices: [{ name: "Mystery", counter: false, instantField: false, powerSupported: false }],
  };

  it("without nvidia-smi the backend is none", () => {
    scenario = writeScenario(NO_POWER);
    const report = probeJson(scenario.env({ PATH: "/usr/bin:/bin" }));
    expect(report.smi.path).toBeNull();
    expect(report.devices[0]).toMatchObject({ energyCounter: false, instantPower: false, powerUsage: false });
    expect(report.devices[0]?.backend).toBe("none");
  });

  it("with an nvidia-smi (GIUL_NVIDIA_SMI) the backend is smi_sampler", () => {
    scenario = writeScenario(NO_POWER);
    const smi = "/bin/true";
    const report = probeJson(scenario.env({ PATH: "/usr/bin:/bin", GIUL_NVIDIA_SMI: smi }));
    expect(report.smi.path).toBe(smi);
    expect(report.devices[0]?.backend).toBe("smi_sampler");
  });
});

describe.runIf(ready)("giul-probe without a usable NVML", () => {
  const ABSENT = { GIUL_NVML_LIBRARY: "/nonexistent/libnvidia-ml.so.1" };

  it("NVML absent: --json says unavailable with the reason, no devices, exit 0", () => {
    const report = probeJson(ABSENT);
    expect(report.nvml.available).toBe(false);
    expect(report.nvml.code).toBe("NVML_LIBRARY_NOT_FOUND");
    expect(report.nvml.reason).toContain("/nonexistent/libnvidia-ml.so.1");
    expect(report.nvml.driverVersion).toBeNull();
    expect(report.devices).toEqual([]);
  });

  it("NVML absent: the human output says plainly that there is no GPU, and why", () => {
    const ran = probe([], ABSENT);
    expect(ran.status).toBe(0);
    expect(ran.stderr).toBe("");
    const line = ran.stdout.split("\n").find((l) => l.startsWith("No NVIDIA GPU found: "));
    expect(line).toBe("No NVIDIA GPU found: NVML is unavailable (see above)");
    // The reason is printed once, on the NVML line.
    expect(ran.stdout).toMatch(/^NVML +unavailable: .*\/nonexistent\/libnvidia-ml\.so\.1/m);
    expect(ran.stdout.split("\n").filter((l) => l.includes("/nonexistent/libnvidia-ml.so.1"))).toHaveLength(
      1,
    );
  });

  it("driver not loaded (nvmlInit returns 9): the reason says so", () => {
    scenario = writeScenario({ initError: NVML.ERROR_DRIVER_NOT_LOADED, devices: [{}] });
    const report = probeJson(scenario.env());
    expect(report.nvml.available).toBe(false);
    expect(report.nvml.code).toBe("NVML_DRIVER_NOT_LOADED");
    expect(report.nvml.reason).toMatch(/driver/i);
    expect(report.devices).toEqual([]);
    const ran = probe([], scenario.env());
    expect(ran.status).toBe(0);
    expect(ran.stdout).toMatch(/^NVML +unavailable: .*driver/im);
    expect(ran.stdout).toMatch(/^No NVIDIA GPU found: NVML is unavailable \(see above\)$/m);
  });
});

describe.runIf(ready)("giul-probe arguments", () => {
  it("--help prints the usage and exits 0", () => {
    const ran = probe(["--help"], {});
    expect(ran.status).toBe(0);
    expect(ran.stdout).toContain("Usage: giul-probe [--json]");
  });

  it("GIUL_DISABLE_ADDON other than 1 or 0 exits 2, naming it (giul would load the addon)", () => {
    const ran = probe([], { GIUL_DISABLE_ADDON: "true" });
    expect(ran.status).toBe(2);
    expect(ran.stdout).toBe("");
    expect(ran.stderr).toContain("GIUL_DISABLE_ADDON=true");
    expect(probe([], { GIUL_DISABLE_ADDON: "1" }).stdout).toMatch(
      /^addon\s+not loaded: .*GIUL_DISABLE_ADDON=1/m,
    );
  });

  it("an unknown argument exits 2 with the usage on stderr", () => {
    const ran = probe(["--frobnicate"], {});
    expect(ran.status).toBe(2);
    expect(ran.stdout).toBe("");
    expect(ran.stderr).toContain("--frobnicate");
    expect(ran.stderr).toContain("Usage: giul-probe");
  });
});

describe.runIf(ready)("giul-probe on a card in MIG mode", () => {
  const MIG_CARD: ScenarioSpec = {
    devices: [
      {
        uuid: "GPU-11111111-2222-3333-4444-555555555555",
        mig: 1,
        utilSupported: false,
        slices: [
          { gi: 1, ci: 0, slices: 3, profile: "3g.40gb", memTotalMib: 40_192, memUsedMib: 2_048 },
          { gi: 5, ci: 0, slices: 1, profile: "1g.10gb", memTotalMib: 9_984 },
        ],
        procs: [
          { pid: 4242, usedMib: 2_000, name: "vllm", gi: 1, ci: 0 },
          { pid: 5151, usedMib: 500, name: "train.py", gi: 5, ci: 0 },
        ],
      },
    ],
  };
  const s3 = sliceUuid(0, 1, 0);
  const s1 = sliceUuid(0, 5, 0);

  it("lists each slice with its UUID, profile, memory and processes, in text and --json", () => {
    scenario = writeScenario(MIG_CARD);
    const text = probe(["--seconds", "1"], scenario.env());
    expect(text.status).toBe(0);
    const card = cardSection(text.stdout, 0);
    expect(card).toMatch(
      /MIG mode\s+on, 2 slice\(s\): each metered by nvml_counter as its share of this card/,
    );
    expect(card).toContain(`${s3}, 3 of 7 slices, 2048 / 40192 MiB used, 4242 vllm`);
    expect(card).toContain(`${s1}, 1 of 7 slices, 0 / 9984 MiB used, 5151 train.py`);
    const report = JSON.parse(probe(["--json", "--seconds", "1"], scenario.env()).stdout) as {
      devices: {
        mig: {
          cardSlices: number;
          slices: { uuid: string; profile: string; processes: { pid: number }[] }[];
        };
      }[];
    };
    const mig = report.devices[0]?.mig;
    expect(mig?.cardSlices).toBe(7);
    expect(mig?.slices.map((s) => [s.uuid, s.profile, s.processes.map((p) => p.pid)])).toEqual([
      [s3, "3g.40gb", [4242]],
      [s1, "1g.10gb", [5151]],
    ]);
  });

  it("--idle on a slice is refused (exit 2), naming the card to measure", () => {
    scenario = writeScenario(MIG_CARD);
    const ran = probe(["--idle", "--gpu", s3], scenario.env());
    expect(ran.status).toBe(2);
    expect(ran.stderr).toContain(`--gpu ${s3} is a MIG slice, which has no power sensor of its own`);
    expect(ran.stderr).toContain(
      "Measure GPU 0 (GPU-11111111-2222-3333-4444-555555555555): giul-probe --idle --gpu 0",
    );
  });
});
