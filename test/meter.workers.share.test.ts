import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { afterAll, describe, expect, it } from "vitest";
import { fairShare, type TruthWindow } from "./fakes/fair-share.js";
import { nativeReady, ROOT } from "./fakes/paths.js";
import { type PowerPoint, scenarioForThisProcess } from "./fakes/scenario.js";

// Windows in worker_threads share the card with windows on the main thread: on the native
// backends every environment appends its windows' events to the addon's process-wide event log and
// reads everyone's, so the shares of all the windows of the process add up to the card, and each
// is its exact weighted fair share. A worker terminated with windows open leaves no weight behind.

const IDLE_W = 50;
/** 120 ↔ 360 W, switching every 45 ms. */
const power: PowerPoint[] = [];
for (let t = 0, high = false; t < 900_000; t += 45, high = !high) {
  power.push([t, high ? 360 : 120], [t, high ? 120 : 360]);
}
const sc = scenarioForThisProcess({ devices: [{ power, counterStepMs: 10 }] });
afterAll(() => sc.remove());
const DIST = join(ROOT, "dist", "index.js");
const { Meter } = await import(DIST);

/** What each environment posts for each of its windows. */
interface Posted {
  open: bigint;
  close: bigint;
  weights: { tNs: bigint; weight: number }[];
  joules: number | null;
  method: string;
  uncertainty: number | null;
  concurrencyMax: number | null;
}

/** Opens `n` windows at staggered instants with their own weights and one weight change each. */
const meterSource = `
async function meterWindows(Meter, n, seed) {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  let x = seed;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2147483648) / 2147483648);
  return Promise.all(Array.from({ length: n }, async () => {
    await sleep(rand() * 300);
    const m = await Meter.forNode({ name: "shared", idleW: ${IDLE_W} }, { weight: 0.5 + rand() * 4 }).open();
    await sleep(100 + rand() * 200);
    m.setWeight(0.5 + rand() * 4);
    await sleep(100 + rand() * 200);
    await m.close();
    const t = m.edgeTimes();
    const e = m.result();
    return { open: t.open, close: t.close, weights: t.weights, joules: e.joules, method: e.method,
             uncertainty: e.uncertaintyJoules, concurrencyMax: e.concurrency?.max ?? null };
  }));
}`;

const workerSource = `
import { parentPort, workerData } from "node:worker_threads";
const { Meter } = await import(${JSON.stringify(DIST)});
${meterSource}
parentPort.once("message", async () => {
  parentPort.postMessage(await meterWindows(Meter, workerData.n, workerData.seed));
});
parentPort.postMessage("ready");
`;

const meterWindows = new Function(
  "Meter",
  "n",
  "seed",
  `${meterSource}; return meterWindows(Meter, n, seed);`,
) as (meter: unknown, n: number, seed: number) => Promise<Posted[]>;

function startWorker(n: number, seed: number): Promise<Worker> {
  const worker = new Worker(workerSource, { eval: true, env: process.env, workerData: { n, seed } });
  return new Promise((resolve, reject) => {
    worker.once("message", () => resolve(worker));
    worker.once("error", reject);
  });
}

describe.runIf(nativeReady())("windows in worker_threads share the card", () => {
  it("main thread and three workers: every share is its fair share, and they add up to the card", async () => {
    const warm = await Meter.forNode({ name: "shared", idleW: IDLE_W }).open();
    await warm.close();
    const workers = await Promise.all([1, 2, 3].map((i) => startWorker(6, i * 7919)));
    const results = await Promise.all([
      meterWindows(Meter, 6, 42),
      ...workers.map(
        (w) =>
          new Promise<Posted[]>((resolve) => {
            w.once("message", resolve);
            w.postMessage("go");
          }),
      ),
    ]);
    await Promise.all(workers.map((w) => w.terminate()));
    const all = results.flat();
    expect(all).toHaveLength(24);
    const truth = fairShare(
      all.map(
        (p): TruthWindow => ({
          open: p.open,
          close: p.close,
          weights: p.weights.map((w) => [w.tNs, w.weight]),
        }),
      ),
      (a, b) => sc.energyJ(0, a, b),
      IDLE_W,
    );
    let sum = 0;
    all.forEach((p, i) => {
      expect(p.method).toBe("sampled");
      const share = truth.shares[i] as number;
      expect(Math.abs((p.joules as number) - share)).toBeLessThanOrEqual(
        (p.uncertainty as number) + Math.abs(share) * 0.01,
      );
      sum += p.joules as number;
    });
    // Each environment's windows saw the others': more open at once than any one environment had.
    expect(Math.max(...all.map((p) => p.concurrencyMax ?? 0))).toBeGreaterThan(6);
    // The shares add up to the card over the union (only the union's two edges can differ).
    expect(Math.abs(sum - truth.unionAbove)).toBeLessThanOrEqual(truth.unionAbove * 0.001 + 2 * 360 * 0.02);
  }, 60_000);

  it("a worker terminated with windows open leaves no weight behind", async () => {
    const worker = new Worker(
      `const { Meter } = await import(${JSON.stringify(DIST)});
       const { parentPort } = await import("node:worker_threads");
       // Held, so that they are not collected (a collected window is closed for its owner).
       globalThis.held = [
         await Meter.forNode({ name: "shared", idleW: ${IDLE_W} }, { weight: 5 }).open(),
         await Meter.forNode({ name: "shared", idleW: ${IDLE_W} }, { weight: 7 }).open(),
       ];
       parentPort.postMessage("open");
       setInterval(() => {}, 60_000); // alive until terminated (an idle worker would exit by itself)`,
      { eval: true, env: process.env },
    );
    await new Promise((resolve) => worker.once("message", resolve));
    const during = await Meter.forNode({ name: "shared", idleW: IDLE_W }).open();
    await new Promise((r) => setTimeout(r, 150));
    await during.close();
    // Weight 1 against 12 held by the worker's windows.
    expect(during.result().concurrency?.max).toBe(3);
    const t0 = during.edgeTimes();
    const card =
      sc.energyJ(0, t0.open as bigint, t0.close as bigint) -
      (IDLE_W * Number((t0.close as bigint) - (t0.open as bigint))) / 1e9;
    expect(Math.abs((during.result().joules as number) - card / 13)).toBeLessThanOrEqual(
      (during.result().uncertaintyJoules as number) + card * 0.01,
    );
    await worker.terminate();
    const after = await Meter.forNode({ name: "shared", idleW: IDLE_W }).open();
    await new Promise((r) => setTimeout(r, 150));
    await after.close();
    const e = after.result();
    expect(e.concurrency).toEqual({ mean: 1, max: 1 });
    expect(e.joules).toBeCloseTo(e.cardJoules as number, 6);
  }, 30_000);
});
