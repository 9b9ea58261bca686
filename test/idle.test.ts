import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { built, FAKE_SMI, nativeReady, ROOT } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// Measuring idle: a tool the operator runs on a quiet card, whose answer they paste into idleW.
// Scored against the scenario: the card's draw is known exactly.

const soon = 1_500;
const sc = scenarioForThisProcess({
  devices: [
    // 0: idle, 69 ↔ 71 W (a slow ramp): median 70 W, counter average 70 W
    {
      power: Array.from({ length: 400 }, (_, i) => [i * 500, i % 2 === 0 ? 69 : 71] as const),
      counterStepMs: 10,
    },
    // 1: a process resident
    { power: 120, procs: [{ pid: 9001, usedMib: 2000, name: "python3 serve.py" }] },
    // 2: a process that arrives during the measurement
    { power: 70, procs: [{ pid: 9002, usedMib: 500, name: "late-job", fromMs: 0 }] },
    // 3: idle at 55 W (with card 0, a tensor-parallel pair)
    { power: 55, counterStepMs: 10 },
    // 4: a constant 300 W on a 100 ms counter step, as many cards count
    { power: 300, counterStepMs: 100 },
  ],
});
afterAll(() => sc.remove());
const { measureIdle, isGiulError } = await import("../src/index.js");
const PROBE = join(ROOT, "dist", "cli", "probe.js");

describe.runIf(nativeReady())("measureIdle", () => {
  it("reports the median, percentiles and the counter's average of a quiet card", async () => {
    const progress: number[] = [];
    const r = await measureIdle({ gpuIndex: 0, seconds: 2, onProgress: (s) => progress.push(s) });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.backend).toBe("nvml_counter");
    expect(r.medianW).toBeGreaterThan(69.4);
    expect(r.medianW).toBeLessThan(70.6);
    expect(r.p5W).toBeGreaterThanOrEqual(69);
    expect(r.p95W).toBeLessThanOrEqual(71);
    expect(Math.abs((r.counterAvgW as number) - 70)).toBeLessThan(0.6);
    expect(r.samples).toBeGreaterThan(100);
    expect(progress.length).toBeGreaterThanOrEqual(1);
  });

  it("measures the counter's average as windows do: within 1 % of a constant card on a 100 ms step", async () => {
    // Raw counter readings, a step stale at each end, put this 4 % off over 2 s (288.4 W seen).
    for (let i = 0; i < 3; i++) {
      const r = await measureIdle({ gpuIndex: 4, seconds: 2 });
      expect(r.ok).toBe(true);
      if (!r.ok) return;
      expect(Math.abs((r.counterAvgW as number) - 300) / 300).toBeLessThan(0.01);
    }
  });

  it("refuses while a compute process is resident, naming it", async () => {
    const r = await measureIdle({ gpuIndex: 1, seconds: 1 });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.reason).toMatch(
      /GPU 1 is not idle: python3 serve\.py \(pid 9001\) resident; stop it and measure again/,
    );
  });

  it("refuses when a compute process appears during the measurement", async () => {
    const from = sc.nowMs() + soon;
    sc.update({
      devices: [
        {
          power: Array.from({ length: 400 }, (_, i) => [i * 500, i % 2 === 0 ? 69 : 71] as const),
          counterStepMs: 10,
        },
        { power: 120, procs: [{ pid: 9001, usedMib: 2000, name: "python3 serve.py" }] },
        { power: 70, procs: [{ pid: 9002, usedMib: 500, name: "late-job", fromMs: from }] },
        { power: 55, counterStepMs: 10 },
        { power: 300, counterStepMs: 100 },
      ],
    });
    const r = await measureIdle({ gpuIndex: 2, seconds: 4 });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.reason).toMatch(/GPU 2 did not stay idle: late-job \(pid 9002\) resident/);
  });

  it("checks its options like the rest of the API", async () => {
    await expect(measureIdle({ seconds: 0 })).rejects.toSatisfy((e) => isGiulError(e, "INVALID_OPTION"));
    await expect(measureIdle({ secs: 5 } as never)).rejects.toThrow(/did you mean "seconds"/);
    await expect(measureIdle({ gpuIndex: -1 })).rejects.toThrow(/gpuIndex/);
  });

  it("giul-probe --idle prints it, or refuses with exit 2", () => {
    const env = { ...process.env, GIUL_BACKEND: "" };
    const ok = spawnSync(process.execPath, [PROBE, "--idle", "--gpu", "0", "--seconds", "1", "--json"], {
      encoding: "utf8",
      env,
      timeout: 30_000,
    });
    expect(ok.status, ok.stderr).toBe(0);
    const json = JSON.parse(ok.stdout);
    expect(Object.keys(json).sort()).toEqual(
      ["backend", "counterAvgW", "gpuIndex", "medianW", "p5W", "p95W", "samples", "seconds"].sort(),
    );
    expect(Math.abs(json.medianW - 70)).toBeLessThan(1.1);
    const text = spawnSync(process.execPath, [PROBE, "--idle", "--gpu", "0", "--seconds", "1"], {
      encoding: "utf8",
      env,
    });
    expect(text.stdout).toMatch(/paste into this card's Node: {2}idleW: \d+\.\d/);
    // Without --gpu: every card at once, each with its figure or why it has none.
    const every = spawnSync(process.execPath, [PROBE, "--idle", "--seconds", "1"], { encoding: "utf8", env });
    expect(every.status).toBe(2);
    expect(every.stdout).toMatch(/GPU 0 idle over 1 s/);
    expect(every.stderr).toMatch(/GPU 1 is not idle: python3 serve\.py \(pid 9001\)/);
    expect(every.stderr).toMatch(/GPU 2 is not idle: late-job/);
    const tp = spawnSync(process.execPath, [PROBE, "--idle", "--gpu", "0,3", "--seconds", "1", "--json"], {
      encoding: "utf8",
      env,
    });
    expect(tp.status, tp.stdout).toBe(0);
    const pair = JSON.parse(tp.stdout);
    const medians = pair.cards.map((c: { gpuIndex: number; medianW: number }) => [
      c.gpuIndex,
      Math.round(c.medianW),
    ]);
    expect(medians).toEqual([
      [0, 70],
      [3, 55],
    ]);
    const pasted = spawnSync(process.execPath, [PROBE, "--idle", "--gpu", "0,3", "--seconds", "1"], {
      encoding: "utf8",
      env,
    });
    expect(pasted.stdout).toMatch(
      /paste into the tensor-parallel Node: {2}gpuIndex: \[0, 3\], idleW: \[(69|70|71)\.\d, 55\.0\]/,
    );
    const busy = spawnSync(process.execPath, [PROBE, "--idle", "--gpu", "1", "--seconds", "1"], {
      encoding: "utf8",
      env,
    });
    expect(busy.status).toBe(2);
    expect(busy.stderr).toMatch(/not idle: python3 serve\.py \(pid 9001\)/);
    const bad = spawnSync(process.execPath, [PROBE, "--idle", "--seconds", "abc"], { encoding: "utf8", env });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--seconds expects a number from 1 to 3600, got "abc"/);
  });
});

describe.runIf(nativeReady() && built([FAKE_SMI], "the nvidia-smi stand-in"))(
  "giul-probe --watch, nvidia-smi-only cards and GIUL_BACKEND",
  () => {
    it("prints each card's power and the energy since the watch started, until interrupted", async () => {
      const { spawn } = await import("node:child_process");
      const child = spawn(process.execPath, [PROBE, "--watch", "--gpu", "4"], {
        env: { ...process.env, GIUL_BACKEND: "" },
      });
      let out = "";
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString();
      });
      await new Promise((r) => setTimeout(r, 3_300));
      child.kill("SIGINT");
      const code = await new Promise((r) => child.once("exit", r));
      expect(code).toBe(0);
      const lines = out.trim().split("\n");
      expect(lines.length).toBeGreaterThanOrEqual(2);
      // A constant 300 W on a 100 ms counter step: each line within its bar of 300 W × its
      // seconds, and within 1 % from 2 s on (a raw counter reading, up to a step stale, printed
      // 274.7 J after 1 s). The bar is the two edges' (about 4–7 J each: 10 J seen under a full
      // suite's load, 3.3 % of the first second).
      for (const line of lines) {
        const m =
          /^GPU 4 {2}300\.0 W {2}([\d.]+) J ± ([\d.]+) since start \(([\d.]+) s, nvml_counter\)$/.exec(line);
        expect(m, line).not.toBeNull();
        const [joules, bound, seconds] = [Number(m?.[1]), Number(m?.[2]), Number(m?.[3])];
        expect(seconds).toBeGreaterThan(0.5);
        expect(Math.abs(joules - 300 * seconds), line).toBeLessThanOrEqual(bound + 0.1);
        expect(bound / (300 * seconds), line).toBeLessThan(0.05);
        if (seconds >= 1.9)
          expect(Math.abs(joules - 300 * seconds) / (300 * seconds), line).toBeLessThan(0.01);
      }
      expect(
        lines.some((l) => Number(/\(([\d.]+) s,/.exec(l)?.[1]) >= 1.9),
        out,
      ).toBe(true);
    });

    it("lists the cards seen only through nvidia-smi, with their power now and their backend", () => {
      const env = { ...process.env, GIUL_BACKEND: "", GIUL_DISABLE_ADDON: "1", GIUL_NVIDIA_SMI: FAKE_SMI };
      const r = spawnSync(process.execPath, [PROBE], { encoding: "utf8", env, timeout: 30_000 });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/Cards seen only through nvidia-smi/);
      expect(r.stdout).toMatch(
        /GPU 1\n {2}power now {2}120\.0 W \(power\.draw\.instant\)\n {2}backend {4}smi_sampler/,
      );
    });

    it("refuses an unknown GIUL_BACKEND as a Meter does, in giul-probe and giul-agent alike", () => {
      const env = { ...process.env, GIUL_BACKEND: "nvml_countr" };
      const probe = spawnSync(process.execPath, [PROBE], { encoding: "utf8", env });
      expect(probe.status).toBe(2);
      expect(probe.stderr).toMatch(
        /GIUL_BACKEND=nvml_countr: expected one of nvml_counter, nvml_sampler, amdsmi_counter, amdsmi_sampler, smi_sampler, amdsmi_cli, none/,
      );
      const agent = spawnSync(process.execPath, [join(ROOT, "dist", "cli", "agent.js"), "--port", "0"], {
        encoding: "utf8",
        env,
        timeout: 10_000,
      });
      expect(agent.status).toBe(2);
      expect(agent.stderr).toMatch(/GIUL_BACKEND=nvml_countr/);
      const forced = spawnSync(process.execPath, [PROBE], {
        encoding: "utf8",
        env: { ...process.env, GIUL_BACKEND: "smi_sampler" },
      });
      expect(forced.status).toBe(0);
      expect(forced.stdout).toMatch(/smi_sampler is forced by GIUL_BACKEND but cannot serve this card/);
    });
  },
);
