/**
 * The addon's card event log (openCardLog, binding.d.ts CardLogLayout) on its own: what an append
 * stamps and computes host-wide, the card's one idle floor, environments and processes seen alike,
 * a dropped reference's and a killed process's windows closed, a segment of another layout
 * refused, and every segment it cannot trust (not the user's alone, truncated, never initialised,
 * a lock left by the dead) handled without a hang. Garbage segments: card-log.fuzz.test.ts.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync, rmSync, statSync, writeSync } from "node:fs";
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { beforeAll, describe, expect, it } from "vitest";
import type { GiulBinding, NativeCardLog } from "../binding.js";
import { NativeCardEventLog } from "../src/sources/native/card-log.js";
import { type EventLogEntry, emptyLogEntry } from "../src/track/track.js";
import { ADDON, built } from "./fakes/paths.js";

let b: GiulBinding;
const GROUP = process.env.GIUL_SHARE_GROUP ?? "";
const UID = process.getuid?.() ?? 0;
let keys = 0;
/** A card key no other test of this file uses. */
const freshKey = () => `GPU-test-${process.pid}-${keys++}`;
const segment = (key: string) => `/dev/shm/giul.${UID}.${GROUP}.${key}`;

function open(key: string, processOnly = false): NativeCardLog {
  const log = b.openCardLog(key, GROUP, processOnly);
  if (!log.ok) throw new Error(`refused: ${log.reason}`);
  return log;
}

function entries(log: NativeCardLog): EventLogEntry[] {
  const reader = new NativeCardEventLog(log, b.cardLogLayout);
  const out: EventLogEntry[] = [];
  for (let k = 0; k < reader.published(); k++) {
    const e = emptyLogEntry();
    if (reader.read(k, e)) out.push(e);
  }
  return out;
}

/** A node child holding the card's log: it appends `weights` as open windows, then waits. */
function child(key: string, weights: readonly number[]): Promise<ChildProcess> {
  const code = `
    const b = require(process.env.TEST_ADDON);
    const log = b.openCardLog(process.env.TEST_KEY, process.env.GIUL_SHARE_GROUP);
    if (!log.ok) throw new Error(log.reason);
    for (const w of JSON.parse(process.env.TEST_WEIGHTS)) if (log.append(w, 1, 40, 1) < 0) throw new Error("append");
    process.stdout.write("ready\\n");
    setInterval(() => {}, 1000);
  `;
  const p = spawn(process.execPath, ["-e", code], {
    env: { ...process.env, TEST_ADDON: ADDON, TEST_KEY: key, TEST_WEIGHTS: JSON.stringify(weights) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    p.stdout?.once("data", () => resolve(p));
    p.once("exit", (c) => reject(new Error(`child exited ${c}`)));
  });
}

/** A segment of `bytes` bytes holding a giul header of layout `version`, ready. */
function writeHeader(path: string, version: number, bytes: number): void {
  const h = Buffer.alloc(bytes);
  h.writeUInt32LE(0x4c554947, 0);
  h.writeUInt32LE(version, 4);
  h.writeUInt32LE(2, 8);
  const fd = openSync(path, "w", 0o600);
  writeSync(fd, h);
  closeSync(fd);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.runIf(built([ADDON], "the addon"))("the card's event log (addon)", () => {
  beforeAll(() => {
    b = createRequire(import.meta.url)(ADDON) as GiulBinding;
  });

  it("stamps each event with the host-wide totals and the card's one idle floor", () => {
    const key = freshKey();
    const log = open(key);
    expect(log.scope).toBe("host");
    expect(log.reason).toBeNull();
    const mode = statSync(segment(key)).mode & 0o777;
    expect(mode).toBe(0o600);
    const before = process.hrtime.bigint();
    expect(log.append(2, 1, 60, 1)).toBe(0);
    expect(log.append(3, 1, 75, 1)).toBe(1); // another floor: the card keeps 60 W
    expect(log.append(1, 0, Number.NaN, 3)).toBe(2);
    expect(log.append(-3, -1, Number.NaN, 2)).toBe(3);
    expect(log.append(-3, -1, Number.NaN, 2)).toBe(4);
    const after = process.hrtime.bigint();
    const e = entries(log);
    expect(e.map((x) => [x.weightBefore, x.weightAfter, x.countAfter, x.kind])).toEqual([
      [0, 2, 1, 1],
      [2, 5, 2, 1],
      [5, 6, 2, 3],
      [6, 3, 1, 2],
      [3, 0, 0, 2],
    ]);
    expect(e.map((x) => x.idleAfter)).toEqual([60, 60, 60, 60, Number.NaN]);
    for (const x of e) {
      const t = log.epochNs + BigInt(x.t);
      expect(t >= before && t <= after).toBe(true);
      expect(x.slot).toBe(log.slot);
    }
    expect(e.map((x) => x.t)).toEqual([...e.map((x) => x.t)].sort((p, q) => p - q));
    expect(log.pids()).toContain(process.pid);
  });

  it("refuses arguments of the wrong kind with a TypeError naming them", () => {
    const log = open(freshKey());
    const append = log.append.bind(log) as (...a: unknown[]) => number;
    expect(() => append(1, 2, 40, 1)).toThrow(/deltaCount must be -1, 0 or 1/);
    expect(() => append(1, 1, Number.NaN, 1)).toThrow(/an open's idleW must be finite/);
    expect(() => append(Number.POSITIVE_INFINITY, 0, 0, 3)).toThrow(/deltaWeight must be finite/);
    expect(() => append(1, 1, 40, 6)).toThrow(/kind must be 1 to 4/);
    const refused = b.openCardLog("a/b", GROUP);
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.reason).toMatch(/\[A-Za-z0-9._-\]/);
  });

  it("is one log for every environment; a terminated worker's windows are closed for it", async () => {
    const key = freshKey();
    const log = open(key);
    log.append(1, 1, 50, 1);
    const worker = new Worker(
      `const { parentPort, workerData } = require("node:worker_threads");
       const b = require(workerData.addon);
       const log = b.openCardLog(workerData.key, workerData.group);
       log.append(2, 1, 50, 1); log.append(4, 1, 50, 1);
       parentPort.postMessage("ready");`,
      { eval: true, workerData: { addon: ADDON, key, group: GROUP } },
    );
    await new Promise((r) => worker.once("message", r));
    expect(entries(log).at(-1)).toMatchObject({ weightAfter: 7, countAfter: 3 });
    await worker.terminate();
    const last = entries(log).at(-1);
    expect(last).toMatchObject({ weightBefore: 7, weightAfter: 1, countAfter: 1, kind: 5 });
    log.release();
    expect(log.append(1, 1, 50, 1)).toBe(-2);
  });

  it("closes the windows of a process killed with SIGKILL; one that lives keeps its share", async () => {
    const key = freshKey();
    const log = open(key);
    const live = await child(key, [1]);
    const doomed = await child(key, [2, 0.5]);
    try {
      expect(entries(log).at(-1)).toMatchObject({ weightAfter: 3.5, countAfter: 3 });
      expect(log.pids()).toEqual(expect.arrayContaining([process.pid, live.pid, doomed.pid]));
      doomed.kill("SIGKILL");
      await new Promise((r) => doomed.once("exit", r));
      const started = Date.now();
      let reaped = 0;
      while (reaped === 0 && Date.now() - started < 1000) {
        reaped = log.reap();
        await sleep(20);
      }
      expect(reaped).toBe(1);
      expect(entries(log).at(-1)).toMatchObject({
        weightBefore: 3.5,
        weightAfter: 1,
        countAfter: 1,
        kind: 6,
      });
      expect(log.pids()).not.toContain(doomed.pid);
      await sleep(250);
      expect(log.reap()).toBe(0); // the living child stays
    } finally {
      live.kill("SIGKILL");
    }
  });

  it("refuses a segment of another layout, and says which", () => {
    const key = freshKey();
    writeHeader(segment(key), 99, 16);
    const refused = b.openCardLog(key, GROUP);
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.reason).toMatch(
      /shared with processes that giul cannot account \(their event log has layout 99, this giul's is 1\)/,
    );
  });

  it("falls back to this process's log, with why, where the segment cannot be trusted", () => {
    const cases: [string, (path: string) => void, RegExp][] = [
      ["not the user's alone", (p) => closeSync(openSync(p, "w", 0o644)), /not this user's alone/],
      ["truncated", (p) => writeHeader(p, 1, 64), /truncated/],
      [
        "no giul log",
        (p) => {
          const fd = openSync(p, "w", 0o600);
          writeSync(fd, Buffer.from("not a giul segment at all"));
          closeSync(fd);
        },
        /holds no giul event log/,
      ],
    ];
    for (const [, make, why] of cases) {
      const key = freshKey();
      make(segment(key));
      const log = open(key);
      expect(log.scope).toBe("process");
      expect(log.reason).toMatch(why);
      expect(log.append(1, 1, 50, 1)).toBe(0);
      expect(entries(log)).toHaveLength(1);
      rmSync(segment(key), { force: true });
    }
    const off = open(freshKey(), true);
    expect(off.scope).toBe("process");
    expect(off.reason).toMatch(/GIUL_SHARING=process/);
  });

  it("makes again a segment whose creator died before initialising it", () => {
    const key = freshKey();
    const fd = openSync(segment(key), "w", 0o600);
    const h = Buffer.alloc(16); // state 0, creator pid 0: nobody is initialising it
    writeSync(fd, h);
    closeSync(fd);
    const started = Date.now();
    const log = open(key);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(log.scope).toBe("host");
    expect(log.append(1, 1, 50, 1)).toBe(0);
  });

  it("takes over a lock left held by a dead process, and gives up in time on one held by the living", () => {
    const key = freshKey();
    const log = open(key);
    log.append(1, 1, 50, 1);
    const fd = openSync(segment(key), "r+");
    const word = Buffer.alloc(4);
    word.writeUInt32LE(2_000_000_000, 0); // beyond any pid_max: no such process
    writeSync(fd, word, 0, 4, 16);
    expect(log.append(-1, -1, Number.NaN, 2)).toBe(1);
    word.writeUInt32LE(1, 0); // init: alive, and not us
    writeSync(fd, word, 0, 4, 16);
    const started = performance.now();
    expect(log.append(1, 1, 50, 1)).toBe(-3);
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(15);
    expect(took).toBeLessThan(1000);
    word.writeUInt32LE(0, 0);
    writeSync(fd, word, 0, 4, 16);
    closeSync(fd);
    expect(log.append(1, 1, 50, 1)).toBe(2);
  });
});
