import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { built, FAKE_NVML, FAKE_SMI, FAKE_SMI_BIN, nativeReady, ROOT } from "./fakes/paths.js";
import { writeScenario } from "./fakes/scenario.js";

// Copies of the package in one process (a dual-package install: the ESM build imported, the CJS
// build required) share a card on every local path: two windows at once, one from each copy, are
// each charged half the card. Where sharing is not host-wide (no addon) the records say so; a
// copy whose registry has another layout refuses to share and its windows say why.

const IDLE_W = 50;
// Readings with a real sensor's noise: the smi sampler integrates them (identical ones would hold).
// ±2 W: at nvidia-smi's 0.01 W, ±0.5 W repeats a value about one read in a hundred, and two such
// chance repeats among a sampler's first 18 changes read as a held sensor (one CI run in about 70).
const sc = writeScenario({ devices: [{ power: [[0, 300]], counterStepMs: 10, powerNoiseW: 2 }] });
afterAll(() => sc.remove());

interface Got {
  joules: number | null;
  method: string;
  reason: string | null;
  cardJoules: number | null;
  idleW: number;
  max: number | null;
}

let lastStderr = "";

/** Runs both copies' windows at once in a fresh process; their records. */
function both(
  env: Record<string, string>,
  simulated = false,
  foreign = false,
  idles = [IDLE_W, IDLE_W],
): Got[] {
  const code = `
    const { createRequire } = require("node:module");
    const req = createRequire(${JSON.stringify(join(ROOT, "package.json"))});
    (async () => {
      if (${foreign}) globalThis[Symbol.for("giul.cardLogs")] = { layout: 99, logs: new Map() };
      const esm = await import(${JSON.stringify(join(ROOT, "dist", "index.js"))});
      const cjs = req(${JSON.stringify(join(ROOT, "dist", "index.cjs"))});
      if (${simulated}) req(${JSON.stringify(join(ROOT, "dist", "testing.cjs"))}).simulateCard({ gpuIndex: 0, watts: 300 });
      const idles = ${JSON.stringify(idles)};
      const nodes = idles.map((idleW, i) => ({ name: "gpu0-" + i, idleW }));
      // Probed and sampling, with some readings behind it (a sampler's first readings cannot yet
      // tell whether the sensor holds its values: windows over them are not sampled).
      for (const [i, g] of [esm, cjs].entries()) {
        const w = await g.Meter.forNode(nodes[i]).open();
        await new Promise((r) => setTimeout(r, 300));
        await w.close();
      }
      const ms = [];
      for (const [i, g] of [esm, cjs].entries()) ms.push(await g.Meter.forNode(nodes[i]).open());
      await new Promise((r) => setTimeout(r, 600));
      await Promise.all(ms.map((m) => m.close()));
      const out = ms.map((m) => { const e = m.result();
        return { joules: e.joules, method: e.method, reason: e.reason, cardJoules: e.cardJoules, idleW: e.idleW, max: e.concurrency?.max ?? null }; });
      process.stdout.write(JSON.stringify(out));
    })();`;
  const ran = spawnSync(process.execPath, ["-e", code], {
    env: { ...process.env, ...sc.env(), GIUL_NVML_LIBRARY: FAKE_NVML, ...env },
    encoding: "utf8",
    timeout: 30_000,
  });
  if (ran.status !== 0) throw new Error(ran.stderr);
  lastStderr = ran.stderr;
  return JSON.parse(ran.stdout) as Got[];
}

/** Each of the two charged half of what the card drew above idle (its own bar covers the rest). */
function halves(got: Got[], reason: RegExp | null): void {
  expect(got).toHaveLength(2);
  for (const g of got) {
    expect(g.method, g.reason ?? "").toBe("sampled");
    expect(g.max).toBe(2);
    if (reason === null) expect(g.reason).toBeNull();
    else expect(g.reason).toMatch(reason);
    expect(Math.abs((g.joules as number) - (g.cardJoules as number) / 2)).toBeLessThanOrEqual(
      0.03 * (g.cardJoules as number),
    );
    expect(g.cardJoules as number).toBeGreaterThan(0.55 * 250);
  }
}

describe.runIf(nativeReady())("copies of giul in one process share a card", () => {
  it("NVML", () => {
    halves(both({}), null);
  });

  it.runIf(built([FAKE_SMI], "the nvidia-smi stand-in"))("nvidia-smi", () => {
    halves(both({ GIUL_BACKEND: "smi_sampler", PATH: `${FAKE_SMI_BIN}:${process.env.PATH ?? ""}` }), null);
  });

  it("simulated", () => {
    halves(both({}, true), /^a simulated card \(giul\/testing\): this figure measures no hardware$/);
  });

  it.runIf(built([FAKE_SMI], "the nvidia-smi stand-in"))(
    "no addon: shared within the environment, and the records say so",
    () => {
      halves(
        both({ GIUL_DISABLE_ADDON: "1", PATH: `${FAKE_SMI_BIN}:${process.env.PATH ?? ""}` }),
        /split only among the windows of this JavaScript environment: the card's UUID is not known \(.*addon/,
      );
    },
  );

  it("two idle floors for one card: the card's is charged once, the record says which, a warning names both", () => {
    const got = both({}, false, false, [IDLE_W, 70]);
    expect(got[0]?.idleW).toBe(IDLE_W);
    expect(got[0]?.reason).toBeNull();
    expect(got[1]?.idleW).toBe(IDLE_W);
    expect(lastStderr).toMatch(
      /GIUL_IDLE_MISMATCH.*idleW 70 W given .* charge its idle as 50 W; 50 W is used/,
    );
    expect(got[1]?.reason).toMatch(
      /idleW 70 W was given, but windows open on the card elsewhere charge its idle as 50 W/,
    );
    for (const g of got)
      expect(Math.abs((g.joules as number) - (g.cardJoules as number) / 2)).toBeLessThanOrEqual(
        0.03 * (g.cardJoules as number),
      );
  });

  it("a card whose segment has another layout (another giul): not sampled, and the records say why", () => {
    const group = `${process.env.GIUL_SHARE_GROUP ?? ""}-foreign`;
    const path = `/dev/shm/giul.${process.getuid?.() ?? 0}.${group}.GPU-00000000-0000-0000-0000-000000000000`;
    const header = Buffer.alloc(16);
    header.writeUInt32LE(0x4c554947, 0);
    header.writeUInt32LE(7, 4);
    header.writeUInt32LE(2, 8);
    writeFileSync(path, header, { mode: 0o600 });
    try {
      for (const g of both({ GIUL_SHARE_GROUP: group })) {
        expect(g.method).not.toBe("sampled");
        expect(g.reason).toMatch(
          /shared with processes that giul cannot account \(their event log has layout 7/,
        );
      }
    } finally {
      rmSync(path, { force: true });
    }
  });

  it("a copy with another registry layout refuses to share, and its windows say why", () => {
    const got = both({}, false, true);
    for (const g of got) {
      expect(g.method).not.toBe("sampled");
      expect(g.reason).toMatch(/shared with a copy of giul in this process that giul cannot account/);
    }
  });
});
