import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fairShare, type TruthWindow } from "./fakes/fair-share.js";
import { built, DIST, nativeReady } from "./fakes/paths.js";
import { type ProcSpec, type ScenarioSpec, scenarioForThisProcess, sliceUuid } from "./fakes/scenario.js";
import { squareWave } from "./fakes/waves.js";

// MIG slices on the NVML double: an H100 in MIG mode with a 3g, a 2g and a 1g slice (the double
// answers power and energy for the card only, NOT_SUPPORTED on a slice, as NVML does). A Node names
// a slice by its UUID; its windows are charged their share of the card, weighted by the slice's
// slices of the card's 7, whichever process opened them; the truth is the scenario's exact weighted
// fair share. A second card is not in MIG mode.

const IDLE_W = 60;
const CARD = "GPU-00000000-0000-0000-0000-000000000000";
const PLAIN = "GPU-11111111-0000-0000-0000-000000000001";
const S3 = sliceUuid(0, 1, 0);
const S2 = sliceUuid(0, 2, 0);
const S1 = sliceUuid(0, 3, 0);
const S1b = sliceUuid(0, 4, 0);

const spec = (goneAtMs?: number, procs: readonly ProcSpec[] = []): ScenarioSpec => ({
  devices: [
    {
      uuid: CARD,
      power: squareWave(600),
      counterStepMs: 10,
      powerMode: "instant",
      utilSupported: false,
      mig: 1,
      slices: [
        { gi: 1, ci: 0, slices: 3, profile: "3g.40gb", memTotalMib: 40_192, memUsedMib: 1_000 },
        { gi: 2, ci: 0, slices: 2, profile: "2g.20gb" },
        { gi: 3, ci: 0, slices: 1, profile: "1g.10gb" },
        {
          gi: 4,
          ci: 0,
          slices: 1,
          profile: "1g.10gb",
          ...(goneAtMs !== undefined ? { untilMs: goneAtMs } : {}),
        },
      ],
      procs: [{ pid: 4242, usedMib: 900, name: "python -m vllm.entrypoints", gi: 1, ci: 0 }, ...procs],
    },
    { uuid: PLAIN, power: 200, counterStepMs: 10 },
  ],
});

const sc = scenarioForThisProcess(spec());
const { Meter, isGiulError, probeNode } = await import("../src/index.js");
type MeterT = import("../src/meter/meter.js").Meter;

afterAll(() => sc.remove());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const node = (gpuUuid: string, extra: object = {}) => ({ name: "mig", gpuUuid, idleW: IDLE_W, ...extra });

/** A window as the truth sees it, its weight the slice's share of the card (its slices of 7). */
function truthOf(m: MeterT, slices: number): TruthWindow {
  const t = m.edgeTimes();
  if (t.open === null || t.close === null) throw new Error("no edges");
  return { open: t.open, close: t.close, weights: [[t.open, slices / 7]] };
}

/** A window opened by another process on `uuid`, from `delayMs` for `holdMs`: its edges and record. */
function childWindow(
  uuid: string,
  delayMs: number,
  holdMs: number,
): Promise<{ open: string; close: string; joules: number | null; method: string; bar: number | null }> {
  const code = `
    const { Meter } = await import(${JSON.stringify(DIST)});
    await new Promise((r) => setTimeout(r, ${delayMs}));
    const m = await Meter.forNode({ name: "child", gpuUuid: ${JSON.stringify(uuid)}, idleW: ${IDLE_W}, servingMatch: "vllm" }).open();
    await new Promise((r) => setTimeout(r, ${holdMs}));
    await m.close();
    const e = m.result();
    const t = m.edgeTimes();
    console.log(JSON.stringify({ open: String(t.open), close: String(t.close), joules: e.joules, method: e.method, bar: e.uncertaintyJoules }));`;
  const p = spawn(process.execPath, ["--input-type=module", "-e", code], {
    env: { ...process.env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  p.stdout.on("data", (d) => {
    out += d;
  });
  return new Promise((resolve, reject) =>
    p.once("exit", (c) => (c === 0 ? resolve(JSON.parse(out)) : reject(new Error(`child exited ${c}`)))),
  );
}

describe.runIf(nativeReady())("MIG slices on the NVML double", () => {
  beforeAll(async () => {
    // Probes the card and starts its sampler.
    const m = await Meter.forNode(node(S1)).open();
    await m.close();
  });

  it("windows on three slices of different sizes, from two processes, share the card by slices", async () => {
    const child = built([DIST], "dist/ (npm run build:ts)") ? childWindow(S2, 300, 500) : null;
    // Each slice serves a model (the server on the 3g slice matches servingMatch: not contention).
    const served = { servingMatch: "vllm" };
    const a = await Meter.forNode(node(S3, served)).open();
    const c = await Meter.forNode(node(S1, served)).open();
    await sleep(900);
    await c.close();
    await sleep(200);
    await a.close();
    const mine = [
      [a, a.result(), 3],
      [c, c.result(), 1],
    ] as const;
    const windows: TruthWindow[] = mine.map(([m, , slices]) => truthOf(m, slices));
    const posted = child === null ? null : await child;
    if (posted !== null)
      windows.push({
        open: BigInt(posted.open),
        close: BigInt(posted.close),
        weights: [[BigInt(posted.open), 2 / 7]],
      });
    const truth = fairShare(windows, (x, y) => sc.energyJ(0, x, y), IDLE_W);
    const figures: { joules: number | null; bar: number | null; method: string }[] = mine.map(([, e]) => ({
      joules: e.joules,
      bar: e.uncertaintyJoules,
      method: e.method,
    }));
    if (posted !== null) figures.push(posted);
    let sum = 0;
    let bars = 0;
    figures.forEach((f, i) => {
      expect(f.method, JSON.stringify(f)).toBe("sampled");
      const off = Math.abs((f.joules as number) - (truth.shares[i] as number));
      expect(off).toBeLessThanOrEqual((f.bar as number) + 1e-6);
      sum += f.joules as number;
      bars += f.bar as number;
    });
    expect(Math.abs(sum - truth.unionAbove)).toBeLessThanOrEqual(bars + 1e-6);
    // Over the same instants a 3g window is charged three times a 1g one.
    const [e3, e1] = [mine[0][1], mine[1][1]];
    expect(e3.partition).toMatchObject({
      kind: "mig",
      profile: "3g.40gb",
      sliceUuid: S3,
      cardUuid: CARD,
      slices: 3,
      cardSlices: 7,
    });
    expect(e1.partition?.slices).toBe(1);
    expect(e3.reason).toMatch(
      /^MIG slice .* has no power sensor of its own: this is its share of GPU-0+-.*, weighted 3 of 7 slices/,
    );
    expect(e3.toJSON().partition).toEqual({
      kind: "mig",
      profile: "3g.40gb",
      slice_uuid: S3,
      card_uuid: CARD,
      slices: 3,
      card_slices: 7,
    });
  });

  it("the older MIG-GPU-<card>/<gi>/<ci> form names the same slice", async () => {
    const m = await Meter.forNode(node(`MIG-${CARD}/2/0`)).open();
    await sleep(100);
    await m.close();
    expect(m.result().partition?.sliceUuid).toBe(S2);
  });

  it("a process on another slice is contention, named with its slice, unless it is one of the card's giul processes or serves", async () => {
    // A process this host sees (a sleep) and this process itself (a giul process: the card's log
    // holds its pid) on the 3g slice; the vllm server there matches no servingMatch of these nodes.
    const sleeper = spawn("sleep", ["30"]);
    const self = { pid: process.pid, usedMib: 100, name: process.execPath, gi: 1, ci: 0 };
    sc.update(
      spec(undefined, [
        { pid: sleeper.pid as number, usedMib: 100, name: "/usr/bin/sleep", gi: 1, ci: 0 },
        self,
      ]),
    );
    try {
      const onOther = await Meter.forNode(node(S2)).open();
      await sleep(100);
      await onOther.close();
      const e = onOther.result();
      expect(e.contended).toBe(true);
      expect(e.contendedBy.map((p) => [p.pid, p.slice])).toEqual([[sleeper.pid, S3]]);
      expect(e.toJSON().contended_by[0]).toMatchObject({ pid: sleeper.pid, slice_uuid: S3 });
      // 4242 (the server) is not visible on this host as that process: said, not guessed.
      expect(e.contentionChecked).toBe(false);
      expect(e.reason).toContain(
        "pid 4242 (python -m vllm.entrypoints), as NVML reports it, is not that process here",
      );
      // On the window's own slice, with no servingMatch: as on a card, nothing is looked up.
      const onOwn = await Meter.forNode(node(S3)).open();
      await sleep(100);
      await onOwn.close();
      expect(onOwn.result().contended).toBe(false);
      expect(onOwn.result().method).toBe("sampled");
      // With servingMatch naming the server: on another slice it is another server, not contention.
      sc.update(spec());
      const served = await Meter.forNode(node(S2, { servingMatch: "vllm" })).open();
      await sleep(100);
      await served.close();
      expect(served.result().contended).toBe(false);
      expect(served.result().method).toBe("sampled");
    } finally {
      sleeper.kill();
      sc.update(spec());
    }
  });

  it("a slice gone mid-window (MIG reconfigured) leaves that window unmeasured, and says so", async () => {
    const m = await Meter.forNode(node(S1b)).open();
    sc.update(spec(sc.nowMs() + 100));
    await sleep(300);
    await m.close();
    const e = m.result();
    expect(e.method).toBe("unknown");
    expect(e.reason).toContain(`MIG slice ${S1b} was gone`);
    sc.update(spec());
  });

  it("a UUID no slice has is not found, and named; a slice of a card not in MIG mode is a GiulError naming gpuUuid", async () => {
    const missing = "MIG-99999999-0000-4000-8000-000000000999";
    const m = await Meter.forNode(node(missing)).open();
    await m.close();
    expect(m.result().method).toBe("unknown");
    expect(m.result().reason).toContain(`no MIG slice on this host has UUID ${missing}`);
    const refused = await Meter.forNode(node(`MIG-${PLAIN}/1/0`))
      .open()
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(isGiulError(refused)).toBe(true);
    expect((refused as { field?: string }).field).toBe("gpuUuid");
    expect(String(refused)).toContain("not in MIG mode");
  });

  it("two Nodes on slices of one card with different idle floors, open at once: a GiulError naming idleW", async () => {
    const a = await Meter.forNode(node(S3, { servingMatch: "vllm" })).open();
    const refused = await Meter.forNode({ ...node(S2, { servingMatch: "vllm" }), idleW: IDLE_W + 5 })
      .open()
      .then(
        () => null,
        (error: unknown) => error,
      );
    await a.close();
    expect(isGiulError(refused)).toBe(true);
    expect((refused as { field?: string }).field).toBe("idleW");
  });

  it("probeNode on a slice returns the slice's memory and processes", async () => {
    const p = await probeNode(node(S3));
    if (p === null) throw new Error("probeNode answered null");
    expect(p.memoryTotalMib).toBeCloseTo(40_192, 0);
    expect(p.memoryUsedMib).toBeCloseTo(1_000, 0);
    expect(p.computeApps.map((a) => a.pid)).toEqual([4242]);
    const other = await probeNode(node(S2));
    expect(other?.computeApps).toEqual([]);
  });
});
