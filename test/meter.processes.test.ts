import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { amdEnv, amdSpec } from "./fakes/amd-scenario.js";
import { fairShare, type TruthWindow } from "./fakes/fair-share.js";
import { amdReady, built, DIST, FAKE_SMI, FAKE_SMI_BIN, nativeReady, ROOT } from "./fakes/paths.js";
import { type PowerPoint, Scenario, writeScenario } from "./fakes/scenario.js";

// One card, many processes: 4 node:cluster workers × 50 overlapping windows of different lengths
// and weights on one card. Every window on the card shares it, whichever process opened it: each
// is charged its exact weighted fair share (within its bar), and the shares add up to the card's
// energy above idle over their union. A worker SIGKILLed mid-window stops taking a share within
// 1 s. On the NVML double, through the nvidia-smi stand-in, and on a simulated card.

const IDLE_W = 50;
const HARNESS = join(ROOT, "test", "fakes", "cluster-windows.mjs");

/** 120 ↔ 360 W, switching every 45 ms. */
const square: PowerPoint[] = [];
for (let t = 0, high = false; t < 900_000; t += 45, high = !high) {
  square.push([t, high ? 360 : 120], [t, high ? 120 : 360]);
}

interface Posted {
  worker: number;
  open: string;
  close: string;
  weights: [string, number][];
  joules: number | null;
  method: string;
  backend: string;
  reason: string | null;
  idleW: number;
  uncertainty: number | null;
  concurrencyMax: number | null;
}

interface Plan {
  workers: number;
  windows: number;
  seed: number;
  spreadMs: number;
  backend: "nvml" | "smi" | "simulated";
  minPartMs?: number;
  kill?: { worker: number; afterMs: number; weight: number };
}

function run(plan: Plan, env: Record<string, string>): Promise<{ windows: Posted[]; killNs: string | null }> {
  const p = spawn(process.execPath, [HARNESS], {
    env: { ...process.env, ...env, TEST_DIST: DIST, TEST_PLAN: JSON.stringify({ ...plan, idleW: IDLE_W }) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  p.stdout.on("data", (d) => {
    out += d;
  });
  return new Promise((resolve, reject) => {
    p.once("exit", (code) => {
      if (code !== 0) reject(new Error(`the cluster exited ${code}`));
      else resolve(JSON.parse(out));
    });
  });
}

function truthOf(p: Posted, until?: bigint): TruthWindow {
  return {
    open: BigInt(p.open),
    close: until ?? BigInt(p.close),
    weights: p.weights.map(([t, w]) => [BigInt(t), w] as const),
  };
}

/** The most windows any one worker had open at once (from their edges). */
function mostOpenInOneProcess(windows: Posted[]): number {
  let most = 0;
  for (const id of new Set(windows.map((p) => p.worker))) {
    const edges = windows
      .filter((p) => p.worker === id)
      .flatMap((p) => [[BigInt(p.open), 1] as const, [BigInt(p.close), -1] as const])
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]));
    let open = 0;
    for (const [, d] of edges) {
      open += d;
      most = Math.max(most, open);
    }
  }
  return most;
}

/** Each window within its bar of its exact fair share, and the shares adding up to the card. */
function checkShares(
  windows: Posted[],
  energyJ: (a: bigint, b: bigint) => number,
  label: RegExp | null = null,
): void {
  const truth = fairShare(
    windows.map((p) => truthOf(p)),
    energyJ,
    IDLE_W,
  );
  let sum = 0;
  let bars = 0;
  windows.forEach((p, i) => {
    expect(p.method, p.reason ?? "").toBe("sampled");
    if (label === null) expect(p.reason).toBeNull();
    else expect(p.reason).toMatch(label);
    const share = truth.shares[i] as number;
    expect(Math.abs((p.joules as number) - share)).toBeLessThanOrEqual((p.uncertainty as number) + 1e-6);
    sum += p.joules as number;
    bars += p.uncertainty as number;
  });
  // Each process's windows saw the others': more open at once than any one process ever had.
  expect(Math.max(...windows.map((p) => p.concurrencyMax ?? 0))).toBeGreaterThan(
    mostOpenInOneProcess(windows),
  );
  expect(Math.abs(sum - truth.unionAbove)).toBeLessThanOrEqual(bars);
  // Not four cards' worth: the union's own energy, to within a few percent.
  expect(Math.abs(sum - truth.unionAbove)).toBeLessThanOrEqual(0.05 * truth.unionAbove);
}

const PLAN: Plan = { workers: 4, windows: 50, seed: 3, spreadMs: 1500, backend: "nvml" };

describe.runIf(nativeReady())("one card shared by the windows of every process", () => {
  const scenarios: Scenario[] = [];
  afterAll(() => {
    for (const sc of scenarios) sc.remove();
  });
  const scenario = (power: PowerPoint[], powerNoiseW = 0.5) => {
    // A real sensor's readings differ from one to the next: the smi sampler integrates them.
    const sc = writeScenario({ devices: [{ power, counterStepMs: 10, powerNoiseW }] });
    scenarios.push(sc);
    return sc;
  };

  it("NVML: 4 cluster workers × 50 windows, each its fair share, adding up to the card", async () => {
    const sc = scenario(square);
    const { windows } = await run(PLAN, sc.env());
    expect(windows).toHaveLength(200);
    checkShares(windows, (a, b) => sc.energyJ(0, a, b));
  }, 60_000);

  it.runIf(amdReady())(
    "AMD SMI: 4 cluster workers × 50 windows on an MI300X share it",
    async () => {
      const sc = new Scenario(amdSpec({ devices: [{ power: square, powerNoiseW: 3 }] }));
      scenarios.push(sc);
      const { windows } = await run(PLAN, amdEnv(sc));
      expect(windows).toHaveLength(200);
      expect(new Set(windows.map((p) => p.backend))).toEqual(new Set(["amdsmi_counter"]));
      checkShares(windows, (a, b) => sc.energyJ(0, a, b));
    },
    60_000,
  );

  it("NVML: a worker SIGKILLed mid-window stops taking a share within 1 s", async () => {
    const sc = scenario(square);
    const plan: Plan = { ...PLAN, windows: 30, spreadMs: 3000, kill: { worker: 3, afterMs: 300, weight: 5 } };
    const { windows, killNs } = await run(plan, sc.env());
    expect(windows).toHaveLength(90);
    const killed = BigInt(killNs as string);
    // The dead window: open from before every window here, until its process died (δ = 0) or was
    // found dead (δ ≤ 1 s). A survivor's share lies between the two truths.
    const first = windows.reduce((m, p) => (BigInt(p.open) < m ? BigInt(p.open) : m), killed);
    const dead = (until: bigint): TruthWindow => ({
      open: first - 1n,
      close: until,
      weights: [[first - 1n, 5]],
    });
    const energyJ = (a: bigint, b: bigint) => sc.energyJ(0, a, b);
    const at0 = fairShare([...windows.map((p) => truthOf(p)), dead(killed)], energyJ, IDLE_W);
    const at1 = fairShare(
      [...windows.map((p) => truthOf(p)), dead(killed + 1_000_000_000n)],
      energyJ,
      IDLE_W,
    );
    let after = 0;
    windows.forEach((p, i) => {
      expect(p.method, p.reason ?? "").toBe("sampled");
      const lo = Math.min(at0.shares[i] as number, at1.shares[i] as number);
      const hi = Math.max(at0.shares[i] as number, at1.shares[i] as number);
      const bar = (p.uncertainty as number) + 1e-6;
      expect(p.joules as number).toBeGreaterThanOrEqual(lo - bar);
      expect(p.joules as number).toBeLessThanOrEqual(hi + bar);
      if (BigInt(p.open) > killed + 1_000_000_000n) {
        after += 1;
        // Opened after it was found dead: the dead window is no longer counted at all.
        expect(Math.abs((p.joules as number) - (at0.shares[i] as number))).toBeLessThanOrEqual(bar);
      }
    });
    expect(after).toBeGreaterThan(10);
  }, 60_000);

  it.runIf(built([FAKE_SMI], "the nvidia-smi stand-in"))(
    "nvidia-smi stand-in: 4 cluster workers × 50 windows share the card",
    async () => {
      // ± 2 W: nvidia-smi prints watts to two decimals, and ± 0.5 W makes two reads alike one time
      // in a hundred; three such runs of the last 32 judge the sensor held (src/edges/read-runs.ts),
      // which runs of this test met twice in about ten (one in CI on 56e5c62).
      const sc = scenario([[0, 300]], 2);
      const env = {
        ...sc.env(),
        GIUL_BACKEND: "smi_sampler",
        PATH: `${FAKE_SMI_BIN}:${process.env.PATH ?? ""}`,
      };
      // Windows from 600 ms: one shorter than smi_sampler's reads resolve (50 ms apart, readings up
      // to 100 ms behind; more where a loaded host delays the reads) is not measured.
      const { windows } = await run({ ...PLAN, backend: "smi", spreadMs: 2500, minPartMs: 300 }, env);
      expect(windows).toHaveLength(200);
      checkShares(windows, (a, b) => sc.energyJ(0, a, b));
    },
    90_000,
  );

  it("simulated card: 4 cluster workers × 50 windows share it", async () => {
    const { windows } = await run({ ...PLAN, backend: "simulated" }, { GIUL_DISABLE_ADDON: "" });
    expect(windows).toHaveLength(200);
    checkShares(
      windows,
      (a, b) => (300 * Number(b - a)) / 1e9,
      /^a simulated card \(giul\/testing\): this figure measures no hardware$/,
    );
  }, 60_000);
});
