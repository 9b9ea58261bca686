/**
 * Lifetimes of the addon's sampler threads: shared across worker_threads environments and
 * released by their teardown, released by the JS object's finaliser, and never in the way of a
 * process exit (return from the event loop or process.exit()) with samplers still open.
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GiulBinding } from "../binding.js";
import { ADDON, haveDoubles } from "./fakes/paths.js";
import { type Scenario, writeScenario } from "./fakes/scenario.js";

let b: GiulBinding;
let sc: Scenario;

function tasks(): number {
  return readdirSync("/proc/self/task").length;
}

function threadNames(): string[] {
  return readdirSync("/proc/self/task").map((tid) => {
    try {
      return readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim();
    } catch {
      return ""; // the thread exited meanwhile
    }
  });
}

async function waitFor(what: string, ok: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 20));
  }
}

/** The parent's environment without anything that steers giul or the doubles. */
function baseEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("GIUL_") && key !== "NODE_OPTIONS") env[key] = value;
  }
  return env;
}

interface Ran {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

function runChild(code: string, args: readonly string[] = []): Ran {
  const ran = spawnSync(process.execPath, [...args, "-e", code], {
    env: { ...baseEnv(), ...sc.env(), TEST_ADDON: ADDON },
    encoding: "utf8",
    timeout: 15_000,
  });
  return { status: ran.status, signal: ran.signal, stdout: ran.stdout, stderr: ran.stderr };
}

// Worker body (CommonJS): open a sampler on device 0, report, then wait to be terminated or told
// to release.
const WORKER = `
const { parentPort, workerData } = require("node:worker_threads");
const b = require(workerData.addon);
b.nvmlInit().then((info) => {
  const s = b.openSampler(0, 5);
  // A doorbell armed: the environment's teardown must close it without a crash or a late call.
  s.doorbell(() => {});
  s.wake(true);
  parentPort.postMessage({ init: info.ok, ok: s.ok, threads: b.samplerThreads(), epoch: String(s.epochNs) });
  parentPort.on("message", () => { s.release(); parentPort.postMessage({ released: true }); });
});
`;

interface WorkerReport {
  readonly init: boolean;
  readonly ok: boolean;
  readonly threads: number;
  readonly epoch: string;
}

describe.skipIf(!haveDoubles())("native sampler lifetimes (test double)", () => {
  beforeAll(async () => {
    sc = writeScenario({ devices: [{}, {}] });
    Object.assign(process.env, sc.env());
    b = createRequire(import.meta.url)(ADDON) as GiulBinding;
    const info = await b.nvmlInit();
    if (!info.ok) throw new Error(`nvmlInit: ${info.reason}`);
  });

  afterAll(() => {
    sc?.remove();
  });

  it("shares one thread per device among 20 workers, and stops it when they are gone", async () => {
    // Start one worker and let it go first, so that what a worker leaves behind for good (V8 and
    // libuv pool threads) is in the baseline.
    const warm = new Worker(WORKER, { eval: true, workerData: { addon: ADDON } });
    await new Promise((done) => warm.once("message", done));
    await warm.terminate();
    await waitFor("no sampler thread", () => b.samplerThreads() === 0);
    const baseline = tasks();

    const workers = Array.from(
      { length: 20 },
      () => new Worker(WORKER, { eval: true, workerData: { addon: ADDON } }),
    );
    const reports = await Promise.all(
      workers.map(
        (w) => new Promise<WorkerReport>((done) => w.once("message", (m: WorkerReport) => done(m))),
      ),
    );
    for (const r of reports) {
      expect(r.init).toBe(true);
      expect(r.ok).toBe(true);
      expect(r.threads).toBe(1);
    }
    // Every worker's reference is to the same thread: one epoch.
    expect(new Set(reports.map((r) => r.epoch)).size).toBe(1);
    expect(b.samplerThreads()).toBe(1);
    expect(threadNames().filter((name) => name === "giul-gpu0")).toHaveLength(1);

    // Half release first and are then terminated; the others are terminated holding their sampler.
    await Promise.all(
      workers.slice(0, 10).map(
        (w) =>
          new Promise((done) => {
            w.once("message", done);
            w.postMessage("release");
          }),
      ),
    );
    expect(b.samplerThreads()).toBe(1);
    await Promise.all(workers.map((w) => w.terminate()));
    await waitFor("the sampler thread to stop", () => b.samplerThreads() === 0);
    await waitFor(`the thread count to return to ${baseline}`, () => tasks() <= baseline);
  });

  it("starts a fresh thread when a device is reopened while its last thread is still stopping", async () => {
    // 20 ms per NVML call: the released thread is still inside a call when the device is reopened.
    sc.update({ latencyUs: 20_000, devices: [{}, {}] });
    const first = b.openSampler(0, 10);
    if (!first.ok) throw new Error(first.reason);
    await waitFor("a sample", () => (new Float64Array(first.buffer)[b.layout.hHead] ?? 0) >= 1);
    first.release();
    const second = b.openSampler(0, 10);
    if (!second.ok) throw new Error(second.reason);
    expect(second.epochNs > first.epochNs).toBe(true);
    expect(second.buffer).not.toBe(first.buffer);
    await waitFor("the old thread to stop", () => new Float64Array(first.buffer)[b.layout.hState] === 3);
    await waitFor("one thread left", () => b.samplerThreads() === 1);
    expect(new Float64Array(second.buffer)[b.layout.hState]).not.toBe(3);
    second.release();
    await waitFor("no thread", () => b.samplerThreads() === 0);
    sc.update({ devices: [{}, {}] });
  });

  it("releases the reference of a sampler object that is collected without release()", () => {
    const ran = runChild(
      `
      const b = require(process.env.TEST_ADDON);
      (async () => {
        await b.nvmlInit();
        let s = b.openSampler(1, 2);
        const buffer = s.buffer;
        const f64 = new Float64Array(buffer);
        while (f64[b.layout.hHead] < 3) await new Promise((r) => setTimeout(r, 5));
        const threadsOpen = b.samplerThreads();
        s = null;
        for (let i = 0; i < 50 && b.samplerThreads() > 0; i++) {
          globalThis.gc();
          await new Promise((r) => setTimeout(r, 20));
        }
        // The ring outlives the object and the thread: a final snapshot.
        for (let i = 0; i < 50 && f64[b.layout.hState] !== 3; i++) await new Promise((r) => setTimeout(r, 20));
        console.log(JSON.stringify({ threadsOpen, threadsAfter: b.samplerThreads(), state: f64[b.layout.hState], head: f64[b.layout.hHead] }));
      })();
      `,
      ["--expose-gc"],
    );
    expect(ran.stderr).toBe("");
    expect(ran.status).toBe(0);
    const out = JSON.parse(ran.stdout) as {
      threadsOpen: number;
      threadsAfter: number;
      state: number;
      head: number;
    };
    expect(out).toMatchObject({ threadsOpen: 1, threadsAfter: 0, state: 3 });
    expect(out.head).toBeGreaterThanOrEqual(3);
  });

  for (const [how, exit] of [
    ["returns from the event loop", ""],
    ["calls process.exit(0)", "process.exit(0);"],
  ] as const) {
    it(`exits with code 0 when it ${how} with samplers still open`, () => {
      const started = Date.now();
      const ran = runChild(`
        const b = require(process.env.TEST_ADDON);
        b.nvmlInit().then(() => {
          const a = b.openSampler(0, 1);
          const c = b.openSampler(1, 1000);
          // Doorbells installed and armed: the exit closes them (their finalisers run) before the
          // samplers' objects are finalised, which must not release them again.
          a.doorbell(() => {});
          c.doorbell(() => {});
          a.wake(true);
          c.wake(false);
          globalThis.keep = [a, c];
          setTimeout(() => {
            console.log("threads", b.samplerThreads());
            ${exit}
          }, 100);
        });
      `);
      expect(ran.signal).toBeNull();
      expect(ran.stderr).toBe("");
      expect(ran.stdout.trim()).toBe("threads 2");
      expect(ran.status).toBe(0);
      // Far inside the 15 s kill timeout: the threads did not hold the process.
      expect(Date.now() - started).toBeLessThan(10_000);
    });
  }

  it("survives a worker terminated while its nvmlInit, deviceInfo and computeProcesses run", () => {
    // 200 ms NVML calls: all three promises are still pending when the worker is terminated, so
    // they complete while its environment is torn down and can no longer run JS.
    sc.update({
      latency: [
        { us: 200_000, fn: "nvmlInit" },
        { us: 200_000, fn: "nvmlDeviceGetName" },
        { us: 200_000, fn: "nvmlDeviceGetComputeRunningProcesses" },
      ],
      devices: [{ name: "NVIDIA A100-SXM4-80GB" }, {}],
    });
    try {
      const ran = runChild(`
        const { Worker } = require("node:worker_threads");
        const b = require(process.env.TEST_ADDON);
        const w = new Worker(
          'const { parentPort, workerData } = require("node:worker_threads");' +
            "const b = require(workerData.addon);" +
            "b.nvmlInit(); b.deviceInfo(0); b.computeProcesses(0);" +
            'parentPort.postMessage("pending");',
          { eval: true, workerData: { addon: process.env.TEST_ADDON } },
        );
        w.once("message", async () => {
          await w.terminate();
          // The process and the addon carry on: this thread's own reads still answer.
          const info = await b.deviceInfo(0);
          console.log(JSON.stringify({ ok: info.ok, name: info.name }));
        });
      `);
      expect(ran.signal).toBeNull();
      expect(ran.stderr).toBe("");
      expect(ran.status).toBe(0);
      expect(JSON.parse(ran.stdout)).toEqual({ ok: true, name: "NVIDIA A100-SXM4-80GB" });
    } finally {
      sc.update({ devices: [{}, {}] });
    }
  });

  it("survives workers terminated while they call into the addon synchronously", () => {
    // Each worker opens, retunes and releases samplers in a loop until it is terminated: the
    // termination lands inside an addon call, whose failing Node-API call must not abort the
    // process. 40 rounds: without the fix nearly every run aborted within 15.
    const ran = runChild(`
      const { Worker } = require("node:worker_threads");
      const code =
        'const { parentPort, workerData } = require("node:worker_threads");' +
        "const b = require(workerData.addon);" +
        "b.nvmlInit().then(() => {" +
        '  parentPort.postMessage("go");' +
        "  for (;;) { const s = b.openSampler(0, 5); b.deviceInfo(0); s.setPeriod(3); s.release(); }" +
        "});";
      (async () => {
        for (let i = 0; i < 40; i++) {
          const w = new Worker(code, { eval: true, workerData: { addon: process.env.TEST_ADDON } });
          await new Promise((done) => w.once("message", done));
          await new Promise((done) => setTimeout(done, i % 5));
          await w.terminate();
        }
        console.log("done");
      })();
    `);
    expect(ran.signal).toBeNull();
    expect(ran.stderr).toBe("");
    expect(ran.status).toBe(0);
    expect(ran.stdout.trim()).toBe("done");
  });

  it("exits with code 0 after 20 workers with armed doorbells end on their own, unreleased", () => {
    const ran = runChild(`
      const { Worker } = require("node:worker_threads");
      const body = ${JSON.stringify(`
        const { parentPort, workerData } = require("node:worker_threads");
        const b = require(workerData.addon);
        b.nvmlInit().then(() => {
          const s = b.openSampler(0, 1);
          // Says so at the first ring, re-armed: then nothing holds the worker, which ends on its
          // own with its doorbell armed. (A ring within a fixed 30 ms was missed by one of 20
          // workers starting at once on a loaded 2-core host.) No ring within 10 s: 0.
          let rings = 0;
          const none = setTimeout(() => parentPort.postMessage(rings), 10000);
          s.doorbell(() => {
            rings += 1;
            s.wake(true);
            if (rings === 1) {
              clearTimeout(none);
              parentPort.postMessage(rings);
            }
          });
          s.wake(true);
        });
      `)};
      let done = 0;
      let rang = 0;
      for (let i = 0; i < 20; i++) {
        const w = new Worker(body, { eval: true, workerData: { addon: process.env.TEST_ADDON } });
        w.once("message", (n) => { rang += n > 0 ? 1 : 0; });
        w.once("exit", () => { if (++done === 20) console.log("rang", rang); });
      }
    `);
    expect(ran.signal).toBeNull();
    expect(ran.stderr).toBe("");
    expect(ran.stdout.trim()).toBe("rang 20");
    expect(ran.status).toBe(0);
  });

  it("exits with code 0 when process.exit() comes while a worker holds a sampler", () => {
    const ran = runChild(`
      const { Worker } = require("node:worker_threads");
      const w = new Worker(${JSON.stringify(WORKER)}, { eval: true, workerData: { addon: process.env.TEST_ADDON } });
      w.once("message", (m) => {
        console.log("worker ok", m.ok);
        process.exit(0);
      });
    `);
    expect(ran.signal).toBeNull();
    expect(ran.stderr).toBe("");
    expect(ran.stdout.trim()).toBe("worker ok true");
    expect(ran.status).toBe(0);
  });
});
