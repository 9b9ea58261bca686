/**
 * The nvidia-smi stand-in against its scenario and the format rules of the real tool
 * (shared/nvml-facts.md §3). Expected values come from the scenario, not from the stand-in.
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { built, FAKE_NVML, FAKE_NVML_LEGACY, FAKE_SMI } from "./fakes/paths.js";
import {
  NVML,
  type Scenario,
  type ScenarioSpec,
  SMI_CAPTURES,
  smiReplayEnv,
  toMw,
  writeScenario,
} from "./fakes/scenario.js";

const SMI = FAKE_SMI;
const ready = built([FAKE_NVML, FAKE_NVML_LEGACY, SMI], "the nvidia-smi stand-in");

const scenarios: Scenario[] = [];
afterEach(() => {
  for (const s of scenarios.splice(0)) s.remove();
});

function scenario(spec: ScenarioSpec): Scenario {
  const sc = writeScenario(spec);
  scenarios.push(sc);
  return sc;
}

function smi(env: Record<string, string>, args: string[]): { out: string; code: number | null } {
  const r = spawnSync(SMI, args, { env: { ...process.env, ...env }, encoding: "utf8" });
  return { out: r.stdout, code: r.status };
}

const lines = (s: string): string[] => s.split("\n").filter((l) => l !== "");
const cells = (line: string | undefined): string[] => (line ?? "").split(", ");
/** What the stand-in prints for an mW value: watts with two decimals. */
const watts = (mw: number): string => (Math.floor((mw + 5) / 10) / 100).toFixed(2);

const ALL =
  "index,name,uuid,power.draw,power.draw.average,power.draw.instant,memory.total,memory.used,memory.free,utilization.gpu,utilization.memory,timestamp,driver_version";

const h100AndTuring: ScenarioSpec = {
  driverVersion: "590.48.01",
  devices: [
    { power: 631.95, memUsedMib: 19818, memReservedMib: 478.25, utilGpu: 100, utilMem: 37 },
    {
      name: "NVIDIA GeForce RTX 2080 SUPER",
      uuid: "GPU-6f1e8a1c-0000-4b4b-9c9c-123456789abc",
      power: 39.32,
      powerMode: "instant",
      memSupported: false,
      utilSupported: false,
    },
  ],
};

describe.skipIf(!ready)("nvidia-smi stand-in", () => {
  it("answers --query-gpu in csv like the real tool: units, 2-decimal watts, ceiled MiB, [N/A]", () => {
    const sc = scenario(h100AndTuring);
    const { out, code } = smi(sc.env(), [`--query-gpu=${ALL}`, "--format=csv"]);
    expect(code).toBe(0);
    const [header, r0, r1, extra] = lines(out);
    expect(header).toBe(
      "index, name, uuid, power.draw [W], power.draw.average [W], power.draw.instant [W], memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%], utilization.memory [%], timestamp, driver_version",
    );
    expect(extra).toBeUndefined();
    const a = cells(r0);
    expect(a.slice(0, 11)).toEqual([
      "0",
      "NVIDIA H100 80GB HBM3",
      "GPU-00000000-0000-0000-0000-000000000000",
      "631.95 W",
      "631.95 W",
      "631.95 W",
      "81559 MiB",
      "19818 MiB",
      "61263 MiB", // 81559 − 19818 − 478.25 = 61262.75, ceiled (the H100 capture's figures)
      "100 %",
      "37 %",
    ]);
    expect(a[11]).toMatch(/^\d{4}\/\d{2}\/\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$/);
    expect(a[12]).toBe("590.48.01");
    expect(cells(r1).slice(0, 11)).toEqual([
      "1",
      "NVIDIA GeForce RTX 2080 SUPER",
      "GPU-6f1e8a1c-0000-4b4b-9c9c-123456789abc",
      "39.32 W",
      "[N/A]", // no average on an instant-power card (Turing)
      "39.32 W",
      "[N/A]",
      "[N/A]",
      "[N/A]",
      "[N/A]",
      "[N/A]",
    ]);
  });

  it("nounits drops units from values but keeps them in the header; noheader drops it; -i picks a device", () => {
    const sc = scenario(h100AndTuring);
    const nounits = smi(sc.env(), [
      "--query-gpu=index,power.draw,memory.used,utilization.gpu",
      "--format=csv,nounits",
    ]);
    expect(lines(nounits.out)).toEqual([
      "index, power.draw [W], memory.used [MiB], utilization.gpu [%]",
      "0, 631.95, 19818, 100",
      "1, 39.32, [N/A], [N/A]",
    ]);
    const one = smi(sc.env(), ["--query-gpu=index,name,power.draw", "--format=csv,noheader", "-i", "1"]);
    expect(one.out).toBe("1, NVIDIA GeForce RTX 2080 SUPER, 39.32 W\n");
  });

  it("prints the power of a ramp as NVML reports it at the time of the query", () => {
    const sc = scenario({
      devices: [
        {
          power: [
            [-1000, 100],
            [60_000, 700],
          ],
          powerMode: "instant",
        },
      ],
    });
    const before = process.hrtime.bigint();
    const { out } = smi(sc.env(), [
      "--query-gpu=power.draw,power.draw.instant",
      "--format=csv,noheader,nounits",
    ]);
    const after = process.hrtime.bigint();
    const [draw, instant] = cells(lines(out)[0]).map(Number);
    for (const v of [draw, instant]) {
      expect(v).toBeGreaterThanOrEqual(Number(watts(toMw(sc.instantW(0, before)))));
      expect(v).toBeLessThanOrEqual(Number(watts(toMw(sc.instantW(0, after)))));
    }
  });

  it("loop mode prints the header once, then one block per period, flushed as it goes", async () => {
    const sc = scenario({ devices: [{ power: 100 }, { power: 200 }] });
    const child = spawn(
      SMI,
      ["--query-gpu=index,power.draw,timestamp", "--format=csv,nounits", "-lms", "100"],
      { env: { ...process.env, ...sc.env() } },
    );
    const got: string[] = [];
    let largestChunk = 0;
    let buf = "";
    await new Promise<void>((done) => {
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        largestChunk = Math.max(largestChunk, d.length);
        buf += d;
        let nl = buf.indexOf("\n");
        while (nl >= 0) {
          got.push(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
          nl = buf.indexOf("\n");
        }
        // header + 4 blocks of 2 rows, read from a pipe while the tool still runs
        if (got.length >= 9) {
          child.kill("SIGTERM");
          done();
        }
      });
    });
    // Flushed as it goes: without a flush per block the rows would reach the pipe only when
    // stdio's 4 KiB buffer filled (some 100 blocks, 10 s, later), in one chunk of at least 4 KiB.
    expect(largestChunk).toBeLessThan(4096);
    expect(got[0]).toBe("index, power.draw [W], timestamp");
    expect(got.filter((l) => l.startsWith("index")).length).toBe(1);
    const rows = got.slice(1, 9).map(cells);
    expect(rows.map((r) => r.slice(0, 2).join(", "))).toEqual([
      "0, 100.00",
      "1, 200.00",
      "0, 100.00",
      "1, 200.00",
      "0, 100.00",
      "1, 200.00",
      "0, 100.00",
      "1, 200.00",
    ]);
    // One query time per block (both rows carry it), and the tool sleeps the period between
    // queries: its own timestamps are a period apart, however late this process read the pipe.
    const stampMs = (row: string[] | undefined): number => {
      const m = /^(\d{4})\/(\d{2})\/(\d{2}) (\d{2}:\d{2}:\d{2}\.\d{3})$/.exec(row?.[2] ?? "");
      expect(m, `timestamp of ${row?.join(", ")}`).not.toBeNull();
      return new Date(`${m?.[1]}-${m?.[2]}-${m?.[3]}T${m?.[4]}`).getTime();
    };
    for (let b = 0; b < 4; b++) expect(rows[2 * b + 1]?.[2]).toBe(rows[2 * b]?.[2]);
    for (let b = 1; b < 4; b++) {
      // stamps are truncated to the millisecond: a 100 ms sleep shows as at least 99 ms
      expect(stampMs(rows[2 * b]) - stampMs(rows[2 * b - 2])).toBeGreaterThanOrEqual(99);
    }
  });

  it("stamps each iteration with the wall-clock time of its power read", async () => {
    // Power rises 1 W a ms, so the watts printed say when (CLOCK_MONOTONIC) the tool read them.
    const t0Ns = process.hrtime.bigint() - 1_000_000_000n;
    const sc = scenario({
      t0Ns,
      devices: [
        {
          power: [
            [0, 0],
            [1_000_000, 1_000_000],
          ],
          powerMode: "instant",
        },
      ],
    });
    // The wall clock (Date.now, the tool's gettimeofday) against CLOCK_MONOTONIC, to within a ms.
    const offsets: bigint[] = [];
    const sampleOffset = () => offsets.push(process.hrtime.bigint() - BigInt(Date.now()) * 1_000_000n);
    sampleOffset();
    const child = spawn(
      SMI,
      ["--query-gpu=power.draw.instant,timestamp", "--format=csv,noheader,nounits", "-lms", "100"],
      { env: { ...process.env, ...sc.env(), GIUL_FAKE_SMI_LOOPS: "4" } },
    );
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
    });
    await new Promise<void>((done) => child.on("close", () => done()));
    sampleOffset();
    const rows = lines(out).map(cells);
    expect(rows.length).toBe(4);
    for (const [power, stamp] of rows) {
      const readNs = t0Ns + BigInt(Math.round(Number(power) * 1e6));
      // As nvidia-smi prints it: local wall-clock time, truncated to the ms.
      const m = /^(\d{4})\/(\d{2})\/(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{3})$/.exec(stamp ?? "");
      expect(m, `timestamp ${stamp}`).not.toBeNull();
      const [y, mo, d, h, mi, s, ms] = (m as RegExpExecArray).slice(1).map(Number) as number[];
      const wallMs = new Date(y as number, (mo as number) - 1, d, h, mi, s, ms).getTime();
      for (const offset of offsets) {
        const stampNs = BigInt(wallMs) * 1_000_000n + offset;
        // The read follows the stamp by what the tool does between them (µs here, a few ms at
        // most on a loaded host); the stamp's truncation and Date.now's ms make up ±2 ms.
        const lagMs = Number(readNs - stampNs) / 1e6;
        expect(lagMs, `read ${power} W stamped ${stamp}`).toBeGreaterThanOrEqual(-2);
        expect(lagMs, `read ${power} W stamped ${stamp}`).toBeLessThanOrEqual(6);
      }
    }
  });

  it("-l takes seconds and GIUL_FAKE_SMI_LOOPS ends the loop", () => {
    const sc = scenario({});
    const { out, code } = smi({ ...sc.env(), GIUL_FAKE_SMI_LOOPS: "2" }, [
      "--query-gpu=index",
      "--format=csv",
      "-l",
      "0",
    ]);
    expect(code).toBe(0);
    expect(lines(out)).toEqual(["index", "0", "0"]);
  });

  it("answers --query-compute-apps from the scenario's processes, empty with noheader when none", () => {
    const sc = scenario({
      devices: [
        {
          procs: [
            { pid: 4242, usedMib: 1024, name: "/app/llama-server" },
            { pid: 77, usedMib: "na", name: "Xorg" },
            { pid: 99, usedMib: 10, name: "later", fromMs: 600_000 },
          ],
        },
        {},
      ],
    });
    const q = ["--query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid"];
    const all = smi(sc.env(), [...q, "--format=csv"]);
    expect(lines(all.out)).toEqual([
      "pid, process_name, used_gpu_memory [MiB], gpu_uuid",
      "4242, /app/llama-server, 1024 MiB, GPU-00000000-0000-0000-0000-000000000000",
      "77, Xorg, [N/A], GPU-00000000-0000-0000-0000-000000000000",
    ]);
    const none = smi(sc.env(), [...q, "--format=csv,noheader", "-i", "1"]);
    expect(none.code).toBe(0);
    expect(none.out).toBe("");
    const headerOnly = smi(sc.env(), [...q, "--format=csv", "-i", "1"]);
    expect(headerOnly.out).toBe("pid, process_name, used_gpu_memory [MiB], gpu_uuid\n");
    const alias = smi(sc.env(), ["--query-compute-apps=pid,used_memory", "--format=csv,nounits", "-i", "0"]);
    expect(lines(alias.out)[0]).toBe("pid, used_gpu_memory [MiB]");
    expect(lines(alias.out)[1]).toBe("4242, 1024");
  });

  it("says it cannot talk to the driver and exits 9 when init fails with DRIVER_NOT_LOADED", () => {
    const sc = scenario({ initError: NVML.ERROR_DRIVER_NOT_LOADED });
    const { out, code } = smi(sc.env(), ["--query-gpu=power.draw", "--format=csv"]);
    expect(code).toBe(9);
    expect(out).toContain("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.");
    const mismatch = smi(scenario({ initError: NVML.ERROR_LIB_RM_VERSION_MISMATCH }).env(), [
      "--query-gpu=power.draw",
      "--format=csv",
    ]);
    expect(mismatch.code).toBe(18);
    expect(mismatch.out).toContain("Driver/library version mismatch");
  });

  it("rejects an unknown field by name", () => {
    const sc = scenario({});
    const { out, code } = smi(sc.env(), ["--query-gpu=index,cuda_version", "--format=csv"]);
    expect(code).toBe(2);
    expect(out).toContain('Field "cuda_version" is not a valid field to query.');
  });

  it("prints bracket tokens for NVML errors and exits 0", () => {
    const sc = scenario({
      devices: [
        { errors: [{ fromMs: -1, code: NVML.ERROR_NOT_SUPPORTED, fn: "nvmlDeviceGetPowerUsage" }] },
        { errors: [{ fromMs: -1, code: NVML.ERROR_GPU_IS_LOST }] },
        { errors: [{ fromMs: -1, code: NVML.ERROR_UNKNOWN, fn: "nvmlDeviceGetMemoryInfo" }] },
      ],
    });
    const { out, code } = smi(sc.env(), [
      "--query-gpu=index,power.draw,memory.used",
      "--format=csv,noheader",
    ]);
    expect(code).toBe(0);
    expect(lines(out)).toEqual([
      "0, [N/A], 0 MiB",
      "1, [GPU is lost], [GPU is lost]",
      "2, 50.00 W, [Unknown Error]",
    ]);
  });

  it("on a legacy driver (no field values) power.draw.average and .instant are [N/A]", () => {
    const sc = scenario({ devices: [{ power: 75 }] });
    const { out } = smi(sc.env({ GIUL_NVML_LIBRARY: FAKE_NVML_LEGACY }), [
      "--query-gpu=power.draw,power.draw.average,power.draw.instant",
      "--format=csv,noheader",
    ]);
    expect(out).toBe("75.00 W, [N/A], [N/A]\n");
  });

  it("replays a capture verbatim with the given exit code", () => {
    for (const [file, exit] of [
      ["h100-load.csv", 0],
      ["no-driver.txt", 9],
      ["truncated.csv", 0],
      ["geforce-not-supported.csv", 0],
    ] as const) {
      const { out, code } = smi(smiReplayEnv(file, exit), ["--query-gpu=index,power.draw", "--format=csv"]);
      expect(out).toBe(readFileSync(join(SMI_CAPTURES, file), "utf8"));
      expect(code).toBe(exit);
    }
  });

  it("replays a capture line by line in loop mode, a period apart", async () => {
    const file = "h100-loop-nounits.csv";
    const spawnedAt = process.hrtime.bigint();
    const child = spawn(SMI, ["--query-gpu=index,power.draw", "--format=csv,nounits", "-lms", "60"], {
      env: { ...process.env, ...smiReplayEnv(file) },
    });
    const chunks: { at: bigint; text: string }[] = [];
    child.stdout
      .setEncoding("utf8")
      .on("data", (d: string) => chunks.push({ at: process.hrtime.bigint(), text: d }));
    const code = await new Promise<number | null>((done) => child.on("close", done));
    expect(code).toBe(0);
    const want = readFileSync(join(SMI_CAPTURES, file), "utf8");
    expect(chunks.map((c) => c.text).join("")).toBe(want);
    // The tool sleeps a period after each line, so line k cannot reach this process earlier than
    // k periods after the spawn. (A lower bound only: a busy machine can delay reading, never
    // hasten the writes.)
    let line = 0;
    for (const chunk of chunks) {
      const lines = chunk.text.split("\n").length - 1;
      const lastInChunk = line + lines - 1;
      expect(Number(chunk.at - spawnedAt) / 1e6, `line ${lastInChunk}`).toBeGreaterThanOrEqual(
        lastInChunk * 60,
      );
      line += lines;
    }
    expect(line).toBe(want.split("\n").length - 1);
    expect(line).toBeGreaterThanOrEqual(5);
  });
});
