/**
 * The libnvidia-ml.so.1 double against its scenario, driven by the small C reader
 * (build/test-doubles/bin/fake-nvml-read) so the addon is not needed. Every expectation comes
 * from the scenario (test/fakes/scenario.ts, or hand arithmetic), never from the double itself.
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { built, FAKE_NVML, FAKE_NVML_LEGACY, FAKE_NVML_READER } from "./fakes/paths.js";
import { NVML, type Scenario, type ScenarioSpec, writeScenario } from "./fakes/scenario.js";

const READER = FAKE_NVML_READER;
const ready = built([FAKE_NVML, FAKE_NVML_LEGACY, READER], "the NVML doubles");

/** One JSON line of the reader. */
interface Reading {
  op: string;
  iter: number;
  t_ns?: string;
  t1_ns?: string;
  ret?: number;
  value?: string | number | boolean;
  missing?: string;
  sym?: string;
  needed?: number;
  procs?: { pid: number; used: string }[];
  values?: { field: number; ret: number; type: number; value: string }[];
  total?: string;
  free?: string;
  used?: string;
  reserved?: string;
  gpu?: number;
  memory?: number;
}

interface ReadOptions {
  lib?: string;
  device?: number;
  n?: number;
  intervalMs?: number;
  init?: string | null;
}

const scenarios: Scenario[] = [];
afterEach(() => {
  for (const s of scenarios.splice(0)) s.remove();
});

function scenario(spec: ScenarioSpec): Scenario {
  const sc = writeScenario(spec);
  scenarios.push(sc);
  return sc;
}

function args(ops: string[], o: ReadOptions): string[] {
  const a = [
    o.lib ?? FAKE_NVML,
    "-d",
    String(o.device ?? 0),
    "-n",
    String(o.n ?? 1),
    "-i",
    String(o.intervalMs ?? 0),
  ];
  if (o.init === null) a.push("--no-init");
  else if (o.init !== undefined) a.push("--init", o.init);
  return [...a, ...ops];
}

function parse(stdout: string): Reading[] {
  return stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Reading);
}

function read(sc: Scenario, ops: string[], o: ReadOptions = {}): Reading[] {
  const r = spawnSync(READER, args(ops, o), { env: { ...process.env, ...sc.env() }, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`reader failed (${r.status}): ${r.stderr}`);
  return parse(r.stdout);
}

/** Runs the reader in the background; `during` runs once its first op has answered. */
async function readWhile(
  sc: Scenario,
  ops: string[],
  o: ReadOptions,
  during: () => void | Promise<void>,
): Promise<Reading[]> {
  const child = spawn(READER, args(ops, o), { env: { ...process.env, ...sc.env() } });
  let out = "";
  let fired = false;
  let pending: Promise<void> = Promise.resolve();
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    if (!fired && out.includes('"iter":0')) {
      fired = true;
      pending = Promise.resolve(during());
    }
  });
  await new Promise((r) => child.on("close", r));
  await pending;
  return parse(out);
}

function one(rs: Reading[], op: string, iter = 0): Reading {
  const r = rs.find((x) => x.op === op && x.iter === iter);
  if (!r) throw new Error(`no ${op} reading for iteration ${iter}`);
  return r;
}

const t = (r: Reading): bigint => BigInt(r.t_ns ?? "0");
const t1 = (r: Reading): bigint => BigInt(r.t1_ns ?? "0");

/** A value read during [t, t1] of a monotone quantity f lies between f(t) and f(t1). */
function expectBracketed(value: number, f: (ns: bigint) => number, r: Reading, slack = 0): void {
  const a = f(t(r));
  const b = f(t1(r));
  expect(value).toBeGreaterThanOrEqual(Math.min(a, b) - slack);
  expect(value).toBeLessThanOrEqual(Math.max(a, b) + slack);
}

describe.skipIf(!ready)("fake libnvidia-ml.so.1", () => {
  it("the TS ground truth integrates steps and ramps as hand arithmetic does", () => {
    const t0Ns = 1_000_000_000n;
    const sc = scenario({
      t0Ns,
      devices: [
        {
          power: [
            [0, 0],
            [1000, 100],
            [1000, 300],
            [2000, 300],
          ],
        },
      ],
    });
    // ramp 0→100 W over 1 s: 50 J; then 300 W for 1 s: 300 J; then constant 300 W
    expect(sc.energyJ(0, sc.at(0), sc.at(1000))).toBeCloseTo(50, 9);
    expect(sc.energyJ(0, sc.at(1000), sc.at(2000))).toBeCloseTo(300, 9);
    expect(sc.energyJ(0, sc.at(500), sc.at(1500))).toBeCloseTo(0.5 * (50 + 100) * 0.5 + 150, 9);
    expect(sc.energyJ(0, sc.at(2000), sc.at(4000))).toBeCloseTo(600, 9);
    expect(sc.energyJ(0, sc.at(-1000), sc.at(0))).toBeCloseTo(0, 9); // constant 0 W before t0
    expect(sc.powerW(0, sc.at(500))).toBeCloseTo(50, 9);
    expect(sc.powerW(0, sc.at(1000))).toBe(300); // a step takes the later value at its instant
    expect(sc.counterMj(0, sc.at(1005))).toBe(1_000_000n + 50_000n); // staircase: last update at 1000 ms
    expect(sc.counterMj(0, sc.at(1019))).toBe(1_000_000n + 50_000n + 3_000n); // 10 ms at 300 W
    expect(sc.averageW(0, sc.at(2000))).toBeCloseTo(300, 9);
    // over [500, 1500] ms: the ramp 50→100 W for 500 ms, then 300 W for 500 ms
    expect(sc.averageW(0, sc.at(1500))).toBeCloseTo((0.5 * (50 + 100) * 500 + 300 * 500) / 1000, 9);
  });

  it("the counter follows the exact integral of power, over windows with steps and ramps", () => {
    const sc = scenario({
      devices: [
        {
          power: [
            [0, 100],
            [60, 100],
            [60, 400],
            [150, 400],
            [250, 80],
            [300, 250],
          ],
          counterStepMs: 10,
          energyOffsetMj: 5_000_000,
        },
      ],
    });
    const rs = read(sc, ["energy"], { n: 12, intervalMs: 30 }).filter((r) => r.op === "energy");
    expect(rs).toHaveLength(12);
    for (const r of rs) {
      expect(r.ret).toBe(NVML.SUCCESS);
      // exact: the staircase value at some instant of the call
      const v = BigInt(String(r.value));
      const lo = sc.counterMj(0, t(r)) ?? -1n;
      const hi = sc.counterMj(0, t1(r)) ?? -1n;
      expect(v >= lo && v <= hi).toBe(true);
    }
    // windows: counter deltas equal the integral within 1 mJ + one counter step at the peak power
    const stepMj = 400 * 10;
    for (let i = 0; i < rs.length; i++) {
      for (let j = i + 1; j < rs.length; j++) {
        const a = rs[i] as Reading;
        const b = rs[j] as Reading;
        const delta = Number(BigInt(String(b.value)) - BigInt(String(a.value)));
        const truth = sc.energyJ(0, t(a), t1(b)) * 1000;
        const truthShort = sc.energyJ(0, t1(a), t(b)) * 1000;
        expect(delta).toBeGreaterThanOrEqual(truthShort - 1 - stepMj);
        expect(delta).toBeLessThanOrEqual(truth + 1 + stepMj);
      }
    }
  });

  it("the counter is a staircase that changes only at multiples of counter_step_ms", () => {
    const sc = scenario({ devices: [{ power: 200, counterStepMs: 50 }] });
    const rs = read(sc, ["energy"], { n: 40, intervalMs: 4 }).filter((r) => r.op === "energy");
    const bucket = (ns: bigint) => (ns - sc.t0Ns) / 50_000_000n;
    for (const r of rs) {
      const v = BigInt(String(r.value));
      if (bucket(t(r)) === bucket(t1(r))) {
        // whole call inside one step: the value of that step, k * 50 ms * 200 W = k * 10 000 mJ
        expect(v).toBe(1_000_000n + bucket(t(r)) * 10_000n);
      }
    }
    const distinct = new Set(rs.map((r) => String(r.value)));
    const first = rs[0] as Reading;
    const last = rs[rs.length - 1] as Reading;
    expect(distinct.size).toBeLessThanOrEqual(Number(bucket(t1(last)) - bucket(t(first))) + 1);
    expect(distinct.size).toBeGreaterThan(1);
  });

  it("with counter_jitter_ms the counter's updates come late by the same pseudo-random amounts as scenario.ts says", () => {
    const sc = scenario({ devices: [{ power: 200, counterStepMs: 50, counterJitterMs: 20 }] });
    const rs = read(sc, ["energy"], { n: 60, intervalMs: 4 }).filter((r) => r.op === "energy");
    let late = 0;
    for (const r of rs) {
      const v = BigInt(String(r.value));
      // the value at some instant of the call, by the TypeScript twin of the C arithmetic
      expect(v >= (sc.counterMj(0, t(r)) ?? -1n) && v <= (sc.counterMj(0, t1(r)) ?? -1n)).toBe(true);
      // still the previous step's value although a multiple of 50 ms has passed: a late update
      const bucket = (t(r) - sc.t0Ns) / 50_000_000n;
      if (bucket === (t1(r) - sc.t0Ns) / 50_000_000n && v < 1_000_000n + bucket * 10_000n) late++;
    }
    expect(late).toBeGreaterThan(0);
  });

  it("counter jumps shift the counter but not the ground-truth energy", () => {
    const sc = scenario({ devices: [{ power: 100, counterJumps: [{ tMs: -1000, deltaMj: -400_000 }] }] });
    const r = one(read(sc, ["energy"]), "energy");
    const v = BigInt(String(r.value));
    // offset 1e6 − 400 000 + 100 W × elapsed
    expect(v >= (sc.counterMj(0, t(r)) ?? 0n) && v <= (sc.counterMj(0, t1(r)) ?? 0n)).toBe(true);
    expect(v).toBeLessThan(700_000n);
    expect(sc.energyJ(0, sc.at(-2000), sc.at(0))).toBeCloseTo(200, 9);
  });

  it("GetPowerUsage is the trailing average on average cards and the instant on others; field 186 is instant", () => {
    const spec = (mode: "average" | "instant"): ScenarioSpec => ({
      // rising steadily, so values read during a call are bracketed by its two ends
      devices: [
        {
          power: [
            [-2000, 100],
            [5000, 800],
          ],
          powerMode: mode,
          avgWindowMs: 1000,
        },
      ],
    });
    const avg = scenario(spec("average"));
    const rs = read(avg, ["power", "fields:185,186,83,191,9999"], { n: 3, intervalMs: 20 });
    for (let i = 0; i < 3; i++) {
      const p = one(rs, "power", i);
      expect(p.ret).toBe(0);
      expectBracketed(Number(p.value), (ns) => avg.averageW(0, ns) * 1000, p, 1);
      // the average lags a rising ramp by half its window: 100 W/s × 0.5 s = 50 W
      expect(avg.instantW(0, t(p)) * 1000 - Number(p.value)).toBeGreaterThan(49_000);
      const f = one(rs, "fields:185,186,83,191,9999", i);
      expect(f.ret).toBe(0);
      const [f185, f186, f83, f191, f9999] = f.values ?? [];
      expect(f185?.ret).toBe(0);
      expect(f185?.type).toBe(1); // unsigned int, mW
      expectBracketed(Number(f185?.value), (ns) => avg.averageW(0, ns) * 1000, f, 1);
      expect(f186?.ret).toBe(0);
      expect(f186?.type).toBe(1);
      expectBracketed(Number(f186?.value), (ns) => avg.instantW(0, ns) * 1000, f, 1);
      expect(f83?.type).toBe(3); // unsigned long long, mJ
      expect(f83?.value).toBe(f191?.value);
      expectBracketed(Number(f83?.value), (ns) => Number(avg.counterMj(0, ns)), f);
      expect(f9999?.ret).toBe(NVML.ERROR_NOT_SUPPORTED);
    }
    const inst = scenario(spec("instant"));
    const rs2 = read(inst, ["power", "fields:185"]);
    const p = one(rs2, "power");
    expectBracketed(Number(p.value), (ns) => inst.instantW(0, ns) * 1000, p, 1);
    expect(one(rs2, "fields:185").values?.[0]?.ret).toBe(NVML.ERROR_NOT_SUPPORTED); // like Turing
  });

  it("reads a power line of any length whole (20,000 points)", () => {
    // t0 is 500 s ago, so "now" lies beyond the first few hundred points: a double that dropped
    // tokens past a fixed count would answer the last point it kept instead of the truth.
    const pts: [number, number][] = [];
    for (let i = 0; i < 10_000; i++)
      pts.push([i * 100, 100 + (i % 7) * 50], [i * 100 + 99.999, 100 + (i % 7) * 50]);
    const long = scenario({
      t0Ns: process.hrtime.bigint() - 500_000_000_000n,
      devices: [{ power: pts, powerMode: "instant" }],
    });
    const rs = read(long, ["power"]);
    const p = one(rs, "power");
    expect(p.ret).toBe(0);
    expectBracketed(Number(p.value), (ns) => long.instantW(0, ns) * 1000, p, 1);
  });

  it("power_update_ms holds readings between updates", () => {
    const sc = scenario({
      devices: [
        {
          power: [
            [0, 100],
            [10_000, 1100],
          ],
          powerMode: "instant",
          powerUpdateMs: 100,
        },
      ],
    });
    const p = one(read(sc, ["power"]), "power");
    const u = ((t(p) - sc.t0Ns) / 100_000_000n) * 100n; // last update, ms
    if ((t1(p) - sc.t0Ns) / 100_000_000n === u / 100n) {
      expect(Number(p.value)).toBe(Math.round((100 + Number(u) / 10) * 1000));
    }
    expect(sc.instantW(0, sc.at(150))).toBeCloseTo(110, 9);
    expect(sc.powerW(0, sc.at(150))).toBeCloseTo(115, 9);
  });

  it("errors start at their time, for every device call or for one symbol", async () => {
    const sc = scenario({ devices: [{ power: 100 }] });
    let fromMs = 0;
    // once the reader runs, the error is scheduled 100 ms ahead (the double re-reads the file);
    // the reader keeps going ~800 ms, so a late reaction here still leaves calls after the error
    const rs = await readWhile(sc, ["energy", "name"], { n: 40, intervalMs: 20 }, () => {
      fromMs = sc.nowMs() + 100;
      sc.update({ devices: [{ power: 100, errors: [{ fromMs, code: NVML.ERROR_GPU_IS_LOST }] }] });
    });
    let before = 0;
    let after = 0;
    for (const r of rs.filter((x) => x.op === "energy" || x.op === "name")) {
      if (t1(r) < sc.at(fromMs)) {
        expect(r.ret).toBe(NVML.SUCCESS);
        before++;
      } else if (t(r) >= sc.at(fromMs)) {
        expect(r.ret).toBe(NVML.ERROR_GPU_IS_LOST);
        after++;
      }
    }
    expect(before).toBeGreaterThan(0);
    expect(after).toBeGreaterThan(0);

    const one3 = scenario({
      devices: [
        {
          errors: [
            { fromMs: -1, code: NVML.ERROR_NOT_SUPPORTED, fn: "nvmlDeviceGetComputeRunningProcesses" },
          ],
        },
      ],
    });
    const rs3 = read(one3, ["power", "procs1", "procs3", "energy"]);
    expect(one(rs3, "power").ret).toBe(0);
    expect(one(rs3, "energy").ret).toBe(0);
    expect(one(rs3, "procs1").ret).toBe(NVML.ERROR_NOT_SUPPORTED);
    expect(one(rs3, "procs3").ret).toBe(NVML.ERROR_NOT_SUPPORTED); // the fn covers its _vN versions
  });

  it("init_error fails init, and calls before init are UNINITIALIZED", () => {
    const sc = scenario({ initError: NVML.ERROR_DRIVER_NOT_LOADED });
    const rs = read(sc, ["count", "driver"]);
    expect(one(rs, "init", -1).ret).toBe(NVML.ERROR_DRIVER_NOT_LOADED);
    expect(one(rs, "count").ret).toBe(NVML.ERROR_UNINITIALIZED);
    expect(one(rs, "driver").ret).toBe(NVML.ERROR_UNINITIALIZED);

    const ok = scenario({});
    const rs2 = read(
      ok,
      ["count", "errstr:15", "init", "count", "shutdown", "count", "shutdown", "shutdown"],
      {
        init: null,
      },
    );
    const counts = rs2.filter((r) => r.op === "count");
    expect(counts.map((r) => r.ret)).toEqual([NVML.ERROR_UNINITIALIZED, 0, NVML.ERROR_UNINITIALIZED]);
    expect(one(rs2, "errstr:15").value).toBe("GPU is lost"); // usable before init
    expect(rs2.filter((r) => r.op === "shutdown").map((r) => r.ret)).toEqual([
      0,
      NVML.ERROR_UNINITIALIZED,
      NVML.ERROR_UNINITIALIZED,
    ]);
  });

  it("identity, memory (v1 used includes reserved; v2 checks its version), utilization and limits", () => {
    const sc = scenario({
      driverVersion: "535.104.05",
      devices: [
        {},
        {
          name: "NVIDIA GeForce RTX 2080 SUPER",
          uuid: "GPU-abc",
          memTotalMib: 8192,
          memUsedMib: 1000,
          memReservedMib: 200,
          utilGpu: 37,
          utilMem: 12,
          powerLimitW: 250,
          enforcedLimitW: 240,
        },
      ],
    });
    const rs = read(
      sc,
      ["count", "name", "uuid", "index", "driver", "mem", "mem2", "mem2:2", "util", "limit", "enforced"],
      {
        device: 1,
      },
    );
    const MiB = 1048576n;
    expect(one(rs, "count").value).toBe(2);
    expect(one(rs, "name").value).toBe("NVIDIA GeForce RTX 2080 SUPER");
    expect(one(rs, "uuid").value).toBe("GPU-abc");
    expect(one(rs, "index").value).toBe(1);
    expect(one(rs, "driver").value).toBe("535.104.05");
    const m1 = one(rs, "mem");
    expect(BigInt(m1.total ?? "")).toBe(8192n * MiB);
    expect(BigInt(m1.used ?? "")).toBe(1200n * MiB);
    expect(BigInt(m1.free ?? "")).toBe(6992n * MiB);
    const m2 = one(rs, "mem2");
    expect(m2.ret).toBe(0);
    expect(BigInt(m2.used ?? "")).toBe(1000n * MiB);
    expect(BigInt(m2.reserved ?? "")).toBe(200n * MiB);
    expect(BigInt(m2.free ?? "")).toBe(6992n * MiB);
    expect(one(rs, "mem2:2").ret).toBe(NVML.ERROR_FUNCTION_NOT_FOUND);
    expect(one(rs, "util").gpu).toBe(37);
    expect(one(rs, "util").memory).toBe(12);
    expect(one(rs, "limit").value).toBe(250_000);
    expect(one(rs, "enforced").value).toBe(240_000);
    const d0 = read(sc, ["name", "uuid"]);
    expect(one(d0, "name").value).toBe("NVIDIA H100 80GB HBM3");
    expect(one(d0, "uuid").value).toBe("GPU-00000000-0000-0000-0000-000000000000");
  });

  it("mem=0, util=0, power=0, counter=0, instant_field=0 and handle_error answer as unsupported", () => {
    const sc = scenario({
      devices: [
        {
          memSupported: false,
          utilSupported: false,
          powerSupported: false,
          counter: false,
          instantField: false,
        },
        { handleError: NVML.ERROR_NO_PERMISSION },
      ],
    });
    const rs = read(sc, ["mem", "mem2", "util", "power", "energy", "fields:83,185,186,191"]);
    for (const op of ["mem", "mem2", "util", "power", "energy"])
      expect(one(rs, op).ret).toBe(NVML.ERROR_NOT_SUPPORTED);
    const f = one(rs, "fields:83,185,186,191");
    expect(f.ret).toBe(NVML.SUCCESS); // the call succeeds; each entry says why it has no value
    expect(f.values?.map((v) => v.ret)).toEqual([3, 3, 3, 3]);
    expect(sc.counterMj(0, sc.at(0))).toBeNull();
    expect(sc.powerUsageW(0, sc.at(0))).toBeNull();
    const h = read(sc, ["count"], { device: 1 });
    expect(one(h, "handle", -1).ret).toBe(NVML.ERROR_NO_PERMISSION);
    expect(one(h, "count").value).toBe(2);
  });

  it("process lists: the two-call pattern, 16- and 24-byte entries, from/until, names", () => {
    const sc = scenario({
      devices: [
        {
          procs: [
            { pid: 4242, usedMib: 1024, name: "python3 -m vllm.entrypoints.openai.api_server" },
            { pid: 77, usedMib: "na", name: "/usr/lib/xorg/Xorg" },
            { pid: 900, usedMib: 512, name: "gone", untilMs: -1 },
            { pid: 901, usedMib: 512, name: "later", fromMs: 60_000 },
          ],
        },
      ],
    });
    const rs = read(sc, ["procs1", "procs2", "procs3", "pname:4242", "pname:900", "pname:12345"]);
    for (const op of ["procs1", "procs2", "procs3"]) {
      const r = one(rs, op);
      expect(r.ret).toBe(0);
      expect(r.needed).toBe(2); // the first call (count 0) said INSUFFICIENT_SIZE with the count
      expect(r.procs).toEqual([
        { pid: 4242, used: String(1024n * 1048576n) },
        { pid: 77, used: "18446744073709551615" },
      ]);
    }
    expect(one(rs, "pname:4242").value).toBe("python3 -m vllm.entrypoints.openai.api_server");
    expect(one(rs, "pname:900").ret).toBe(0); // names are known for every proc line
    expect(one(rs, "pname:12345").ret).toBe(NVML.ERROR_NOT_FOUND);

    const none = scenario({});
    const r0 = one(read(none, ["procs3"]), "procs3");
    expect(r0.ret).toBe(0);
    expect(r0.needed).toBe(0);
    expect(r0.procs).toEqual([]);
  });

  it("the legacy build exports only the unversioned symbols", () => {
    const sc = scenario({ devices: [{ power: 120, procs: [{ pid: 5, usedMib: 10, name: "a" }] }] });
    const versioned = [
      "nvmlInit_v2",
      "nvmlDeviceGetCount_v2",
      "nvmlDeviceGetHandleByIndex_v2",
      "nvmlDeviceGetTotalEnergyConsumption",
      "nvmlDeviceGetFieldValues",
      "nvmlDeviceGetMemoryInfo_v2",
      "nvmlDeviceGetComputeRunningProcesses_v2",
      "nvmlDeviceGetComputeRunningProcesses_v3",
    ];
    const plain = [
      "nvmlInit",
      "nvmlShutdown",
      "nvmlErrorString",
      "nvmlDeviceGetCount",
      "nvmlDeviceGetHandleByIndex",
      "nvmlDeviceGetPowerUsage",
      "nvmlDeviceGetMemoryInfo",
      "nvmlDeviceGetComputeRunningProcesses",
      "nvmlSystemGetProcessName",
    ];
    const has = (lib: string) => {
      const rs = read(
        sc,
        [...versioned, ...plain].map((s) => `has:${s}`),
        { lib, init: null },
      );
      return (s: string) => one(rs, `has:${s}`).value;
    };
    const legacy = has(FAKE_NVML_LEGACY);
    const current = has(FAKE_NVML);
    for (const s of versioned) {
      expect(legacy(s), s).toBe(false);
      expect(current(s), s).toBe(true);
    }
    for (const s of plain) {
      expect(legacy(s), s).toBe(true);
      expect(current(s), s).toBe(true);
    }
    const rs = read(sc, ["power", "procs1", "energy"], { lib: FAKE_NVML_LEGACY });
    expect(one(rs, "init", -1).sym).toBe("nvmlInit");
    expect(one(rs, "handle", -1).sym).toBe("nvmlDeviceGetHandleByIndex");
    expect(one(rs, "power").value).toBe(120_000);
    expect(one(rs, "procs1").procs).toEqual([{ pid: 5, used: String(10 * 1048576) }]);
    expect(one(rs, "energy").missing).toBe("nvmlDeviceGetTotalEnergyConsumption");
  });

  it("latency_us delays every call, or the calls of one symbol", () => {
    const sc = scenario({ latency: [{ us: 30_000, fn: "nvmlDeviceGetPowerUsage" }, { us: 2_000 }] });
    const rs = read(sc, ["power", "name"]);
    expect(t1(one(rs, "power")) - t(one(rs, "power"))).toBeGreaterThanOrEqual(30_000_000n);
    expect(t1(one(rs, "name")) - t(one(rs, "name"))).toBeGreaterThanOrEqual(2_000_000n);
  });

  it("calls_file records every call in order", () => {
    const sc0 = scenario({});
    const file = join(sc0.dir, "calls.txt");
    const sc = scenario({ callsFile: file, devices: [{ procs: [{ pid: 1, usedMib: 1, name: "p" }] }] });
    read(sc, ["energy", "power", "procs3"]);
    const lines = readFileSync(file, "utf8").trim().split("\n");
    expect(lines).toEqual([
      "nvmlInit_v2",
      "nvmlDeviceGetHandleByIndex_v2",
      "nvmlDeviceGetTotalEnergyConsumption",
      "nvmlDeviceGetPowerUsage",
      "nvmlDeviceGetComputeRunningProcesses_v3",
      "nvmlDeviceGetComputeRunningProcesses_v3",
    ]);
  });

  it("calls_file with tid=1 gives each call's thread id (the pid on the main thread)", () => {
    const sc0 = scenario({});
    const file = join(sc0.dir, "calls.txt");
    const sc = scenario({ callsFile: file, callsTid: true });
    const r = spawnSync(READER, args(["energy", "power"], {}), {
      env: { ...process.env, ...sc.env() },
      encoding: "utf8",
    });
    expect(r.status).toBe(0);
    // the reader is single-threaded: every call comes from its main thread, whose id is its pid
    expect(readFileSync(file, "utf8").trim().split("\n")).toEqual(
      [
        "nvmlInit_v2",
        "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetPowerUsage",
      ].map((sym) => `${sym} ${r.pid}`),
    );
  });

  it("re-reads the scenario when the file is replaced", async () => {
    const sc = scenario({ devices: [{ name: "before", power: 100 }] });
    let swappedAt = 0n;
    let swappedDone = 0n;
    // ~1 s of reads, so the swap (60 ms after the first) lands well inside them even when this
    // process reacts late
    const all = await readWhile(sc, ["name", "power"], { n: 50, intervalMs: 20 }, async () => {
      await new Promise((r) => setTimeout(r, 60));
      swappedAt = process.hrtime.bigint();
      sc.update({ devices: [{ name: "after", power: 300 }] });
      swappedDone = process.hrtime.bigint();
    });
    const rs = all.filter((r) => r.op === "name");
    expect(rs.length).toBe(50);
    for (const r of rs) {
      if (t1(r) < swappedAt) expect(r.value).toBe("before");
      if (t(r) > swappedDone) expect(r.value).toBe("after");
    }
    expect(rs.some((r) => r.value === "before")).toBe(true);
    expect(rs.some((r) => r.value === "after")).toBe(true);
    for (const p of all.filter((r) => r.op === "power" && t(r) > swappedDone)) expect(p.value).toBe(300_000);
  });
});
