/**
 * Lifetimes of the addon's event log: a reference dropped with windows still open (release(), a
 * worker terminated, even in the middle of an append, a sampler object collected without
 * release()) appends one event that closes them, so the card's totals keep only the living
 * environments' windows; and a process exits cleanly while threads hold windows open and append.
 */
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GiulBinding, NativeSampler } from "../binding.js";
import {
  ask,
  LEDGER_READER,
  type LedgerEntry,
  type LedgerHeader,
  ledgerReader,
  ledgerWorker,
  nextMessage,
  waitFor,
} from "./fakes/ledger.js";
import { ADDON, haveDoubles } from "./fakes/paths.js";
import { type Scenario, writeScenario } from "./fakes/scenario.js";

let b: GiulBinding;
let sc: Scenario;

function open(index: number): NativeSampler {
  const s = b.openSampler(index, 1000);
  if (!s.ok) throw new Error(`openSampler failed: ${s.code}: ${s.reason}`);
  return s;
}

/** Appends from the main thread and checks the call returned a sequence number. */
function append(s: NativeSampler, deltaWeight: number, deltaCount: number, idleW: number): number {
  const k = s.ledgerAppend(deltaWeight, deltaCount, idleW);
  expect(k).toBeGreaterThanOrEqual(0);
  return k;
}

/** Runs `code` in a fresh node with the addon as TEST_ADDON and the reader as TEST_READER. */
function runChild(
  code: string,
  args: readonly string[] = [],
): { status: number | null; stdout: string; stderr: string } {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("GIUL_") && key !== "NODE_OPTIONS") env[key] = value;
  }
  const ran = spawnSync(process.execPath, [...args, "-e", code], {
    env: { ...env, ...sc.env(), TEST_ADDON: ADDON, TEST_READER: LEDGER_READER },
    encoding: "utf8",
    timeout: 15_000,
  });
  return { status: ran.status, stdout: ran.stdout, stderr: ran.stderr };
}

describe.skipIf(!haveDoubles())("native event log lifetimes (test double)", () => {
  beforeAll(async () => {
    sc = writeScenario({ devices: [{}] });
    Object.assign(process.env, sc.env());
    b = createRequire(import.meta.url)(ADDON) as GiulBinding;
    const info = await b.nvmlInit();
    if (!info.ok) throw new Error(`nvmlInit: ${info.reason}`);
  });

  afterAll(() => {
    sc?.remove();
  });

  it("closes the windows of a worker that releases or is terminated with windows open", async () => {
    const DEVICE = 0;
    const s = open(DEVICE);
    const log = ledgerReader(s, b.ledgerLayout);
    const body = `
      for (const w of workerData.weights) if (s.ledgerAppend(w, 1, 25) < 0) throw new Error("refused");
      parentPort.on("message", () => {
        s.release();
        parentPort.postMessage({ after: s.ledgerAppend(1, 1, 25), released: log.header() });
      });
    `;
    const a = ledgerWorker(body, { device: DEVICE, weights: [2, 3] });
    const c = ledgerWorker(body, { device: DEVICE, weights: [5] });
    try {
      expect(append(s, 1, 1, 25)).toBe(0);
      await Promise.all([nextMessage(a), nextMessage(c)]);
      expect(log.header()).toMatchObject({ published: 4, open: 4, weight: 11, idleW: 25 });

      // release() with a window open: one event closes it, and the reference appends no more.
      const released = await ask<{ after: number; released: LedgerHeader }>(c, "release");
      expect(released.after).toBe(-2);
      expect(released.released).toMatchObject({ published: 5, open: 3, weight: 6 });
      expect(log.entry(4)).toMatchObject({ weightBefore: 11, weightAfter: 6, countAfter: 3 });

      // Terminated with two windows open: one event closes both.
      await a.terminate();
      await waitFor("worker a's windows closed", () => log.header().published === 6);
      expect(log.entry(5)).toMatchObject({ weightBefore: 6, weightAfter: 1, countAfter: 1 });
      expect(log.header()).toEqual({ published: 6, capacity: 65_536, idleW: 25, open: 1, weight: 1 });

      // Released before: its teardown appends nothing more.
      await c.terminate();
      expect(log.header().published).toBe(6);

      // Terminated in the middle of appending (open, close, open, close, …), ten times: whatever
      // call the termination lands in, only the main thread's window is left.
      for (let round = 0; round < 10; round++) {
        const busy = ledgerWorker(
          `setImmediate(() => { for (;;) { s.ledgerAppend(2, 1, 25); s.ledgerAppend(-2, -1, 0); } });`,
          { device: DEVICE },
        );
        await nextMessage(busy);
        const from = log.header().published;
        await waitFor("the worker appending", () => log.header().published > from + 100);
        await busy.terminate();
        await waitFor("the worker's windows closed", () => log.header().open === 1);
        expect(log.header()).toMatchObject({ open: 1, weight: 1, idleW: 25 });
      }
    } finally {
      await Promise.all([a.terminate(), c.terminate()]);
      s.release();
    }
  });

  it("closes the windows of a sampler object collected without release()", () => {
    const ran = runChild(
      `
      const b = require(process.env.TEST_ADDON);
      const { LedgerReader } = require(process.env.TEST_READER);
      (async () => {
        await b.nvmlInit();
        const keep = b.openSampler(0, 1000);
        const log = new LedgerReader(keep.ledger, b.ledgerLayout);
        keep.ledgerAppend(1, 1, 25);
        (() => {
          const s = b.openSampler(0, 1000);
          s.ledgerAppend(3, 1, 25);
          s.ledgerAppend(4, 1, 25);
        })();
        const opened = log.header();
        for (let i = 0; i < 50 && log.header().open > 1; i++) {
          globalThis.gc();
          await new Promise((r) => setTimeout(r, 20));
        }
        console.log(JSON.stringify({ opened, collected: log.header(), last: log.entry(3) }));
        keep.release();
      })();
      `,
      ["--expose-gc"],
    );
    expect(ran.stderr).toBe("");
    expect(ran.status).toBe(0);
    const out = JSON.parse(ran.stdout) as {
      opened: LedgerHeader;
      collected: LedgerHeader;
      last: LedgerEntry;
    };
    expect(out.opened).toMatchObject({ published: 3, open: 3, weight: 8 });
    expect(out.collected).toMatchObject({ published: 4, open: 1, weight: 1 });
    expect(out.last).toMatchObject({ weightBefore: 8, weightAfter: 1, countAfter: 1 });
  });

  for (const [how, exit] of [
    ["returns from the event loop", "w.unref();"],
    ["calls process.exit(0)", "process.exit(0);"],
  ] as const) {
    it(`exits with code 0 when it ${how} while threads hold windows open and append`, () => {
      const ran = runChild(`
        const { Worker } = require("node:worker_threads");
        const b = require(process.env.TEST_ADDON);
        b.nvmlInit().then(() => {
          const s = b.openSampler(0, 1);
          s.ledgerAppend(1, 1, 25);
          globalThis.keep = s;
          const w = new Worker(
            'const { parentPort } = require("node:worker_threads");' +
              "const b = require(process.env.TEST_ADDON);" +
              "b.nvmlInit().then(() => {" +
              "  const s = b.openSampler(0, 1);" +
              "  s.ledgerAppend(2, 1, 25);" +
              '  parentPort.postMessage("open");' +
              "  for (;;) { s.ledgerAppend(3, 1, 25); s.ledgerAppend(-3, -1, 0); }" +
              "});",
            { eval: true },
          );
          w.once("message", () => {
            console.log("open", s.ledgerAppend(0, 0, 0) > 0);
            ${exit}
          });
        });
      `);
      expect(ran.stderr).toBe("");
      expect(ran.stdout.trim()).toBe("open true");
      expect(ran.status).toBe(0);
    });
  }
});
