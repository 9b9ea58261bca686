/**
 * The addon's per-device event log (NativeSampler.ledger, ledgerAppend) against the libnvidia-ml
 * test double: what an append stamps and computes, the idle rule, appends from several
 * worker_threads seen alike by every environment, consistent reads while another thread appends,
 * and wrap-around. What happens to a dropped reference's windows: native.ledger-log.lifetime.
 *
 * The log belongs to a device's sampler, so each test uses its own device of the scenario: a log
 * starts empty with its sampler.
 */
import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GiulBinding, NativeSampler } from "../binding.js";
import {
  ask,
  type LedgerEntry,
  type LedgerReader,
  ledgerReader,
  ledgerWorker,
  nextMessage,
  waitFor,
} from "./fakes/ledger.js";
import { ADDON, haveDoubles } from "./fakes/paths.js";
import { type Scenario, writeScenario } from "./fakes/scenario.js";

let b: GiulBinding;
let sc: Scenario;

function open(index: number, periodMs = 10): NativeSampler {
  const s = b.openSampler(index, periodMs);
  if (!s.ok) throw new Error(`openSampler failed: ${s.code}: ${s.reason}`);
  return s;
}

function reader(s: NativeSampler): LedgerReader {
  return ledgerReader(s, b.ledgerLayout);
}

/** The ring's head, under the ring's seqlock. */
function ringHead(s: NativeSampler): number {
  const u32 = new Uint32Array(s.buffer);
  const f64 = new Float64Array(s.buffer);
  for (;;) {
    const g = Atomics.load(u32, 0);
    if (g % 2 === 1) continue;
    const head = f64[b.layout.hHead] ?? Number.NaN;
    if (Atomics.compareExchange(u32, 0, g, g) === g) return head;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

/** Appends from the main thread and checks the call returned a sequence number. */
function append(s: NativeSampler, deltaWeight: number, deltaCount: number, idleW: number): number {
  const k = s.ledgerAppend(deltaWeight, deltaCount, idleW);
  expect(k).toBeGreaterThanOrEqual(0);
  return k;
}

describe.skipIf(!haveDoubles())("native event log (test double)", () => {
  beforeAll(async () => {
    sc = writeScenario({ devices: Array.from({ length: 6 }, () => ({})) });
    Object.assign(process.env, sc.env());
    b = createRequire(import.meta.url)(ADDON) as GiulBinding;
    const info = await b.nvmlInit();
    if (!info.ok) throw new Error(`nvmlInit: ${info.reason}`);
  });

  afterAll(() => {
    sc?.remove();
  });

  it("exports the layout of binding.d.ts, and an empty log of 65,536 entries per device", () => {
    const L = b.ledgerLayout;
    expect(Object.isFrozen(L)).toBe(true);
    const header = [L.hPublished, L.hCapacity, L.hIdleW, L.hOpen, L.hWeight];
    const entry = [
      L.eT,
      L.eRingHead,
      L.eWeightBefore,
      L.eWeightAfter,
      L.eCountAfter,
      L.eRef,
      L.eOwner,
      L.eOwn,
      L.eKind,
      L.eIdleW,
    ];
    expect(new Set(header).size).toBe(header.length);
    expect(new Set(entry).size).toBe(entry.length);
    for (const slot of header) expect(slot).toBeGreaterThanOrEqual(1); // slot 0 is the seqlock
    for (const slot of header) expect(slot).toBeLessThan(L.headerSlots);
    for (const slot of entry) expect(slot).toBeLessThan(L.entrySlots);
    expect(L.entrySlots).toBe(10);

    const s = open(3, 1000);
    try {
      const log = reader(s);
      expect(log.version()).toBe(L.version);
      expect(log.header()).toEqual({ published: 0, capacity: 65_536, idleW: Number.NaN, open: 0, weight: 0 });
      expect(s.ledger.byteLength).toBe((L.headerSlots + 65_536 * L.entrySlots) * 8);
      // A second reference in the same environment: another buffer over the same log.
      const again = open(3, 1000);
      expect(again.ledger).not.toBe(s.ledger);
      expect(append(s, 0, 0, 0)).toBe(0);
      expect(reader(again).header().published).toBe(1);
      again.release();
    } finally {
      s.release();
    }
  });

  it("stamps each append with the clock and the ring's head, and keeps the card's totals", async () => {
    const s = open(0, 2);
    const log = reader(s);
    const epoch = s.epochNs;
    await waitFor("two samples", () => ringHead(s) >= 2);
    // Weights whose floating sums drift: the empty card must still have exactly no weight.
    const events: ReadonlyArray<readonly [number, number, number]> = [
      [0.1, 1, 40],
      [0.2, 1, 40],
      [0.5, 0, Number.NaN], // a weight change: idleW is not read
      [0, 0, 0], // a stage mark
      [-0.1, -1, 0],
      [-0.7, -1, 0],
    ];
    let weight = 0;
    let count = 0;
    let lastT = -1;
    const heads: number[] = [];
    for (const [i, [dw, dc, idle]] of events.entries()) {
      const headBefore = ringHead(s);
      const before = b.monotonicNs();
      const k = s.ledgerAppend(dw, dc, idle);
      const after = b.monotonicNs();
      const headAfter = ringHead(s);
      expect(k).toBe(i);
      const e = log.entry(k);
      if (e === null) throw new Error(`entry ${k} is missing`);
      expect(e.t).toBeGreaterThanOrEqual(Number(before - epoch));
      expect(e.t).toBeLessThanOrEqual(Number(after - epoch));
      expect(e.t).toBeGreaterThan(lastT);
      lastT = e.t;
      expect(e.ringHead).toBeGreaterThanOrEqual(headBefore);
      expect(e.ringHead).toBeLessThanOrEqual(headAfter);
      heads.push(e.ringHead);
      count += dc;
      const weightBefore = weight;
      weight = count === 0 ? 0 : weight + dw;
      expect(e).toEqual({
        k,
        t: e.t,
        ringHead: e.ringHead,
        weightBefore,
        weightAfter: weight,
        countAfter: count,
        ref: s.refId,
        owner: Number.NaN,
        own: Number.NaN,
        kind: Number.NaN,
        idleW: dc > 0 ? idle : Number.NaN,
      });
      expect(log.header()).toEqual({
        published: k + 1,
        capacity: 65_536,
        idleW: count === 0 ? Number.NaN : 40,
        open: count,
        weight,
      });
      await sleep(12); // the thread samples every 2 ms: the head moves between events
    }
    expect(weight).toBe(0);
    expect(Object.is(log.header().weight, 0)).toBe(true);
    expect(heads.at(-1)).toBeGreaterThan(heads[0] ?? Number.POSITIVE_INFINITY);

    // Arguments src never passes are TypeErrors, and append nothing.
    const bad: ReadonlyArray<readonly unknown[]> = [
      ["1", 1, 40],
      [1, 1],
      [Number.NaN, 0, 0],
      [Number.POSITIVE_INFINITY, 0, 0],
      [0, 2, 0],
      [0, 0.5, 0],
      [0, -2, 0],
      [1, 1, Number.NaN],
    ];
    const append = s.ledgerAppend.bind(s) as (...args: unknown[]) => number;
    for (const args of bad) expect(() => append(...args), JSON.stringify(args)).toThrow(TypeError);
    expect(log.header().published).toBe(events.length);

    // After release() nothing more is appended: -2, and the buffer stays readable.
    s.release();
    expect(s.ledgerAppend(1, 1, 40)).toBe(-2);
    expect(log.header().published).toBe(events.length);
  });

  it("stores what the environment says of each event as given, with the appending reference's id", () => {
    const s = open(2, 1000);
    const other = open(2, 1000);
    try {
      const log = reader(s);
      expect(s.refId).toBeGreaterThan(0);
      expect(other.refId).not.toBe(s.refId);
      const k0 = s.ledgerAppend(2, 1, 40, 7, 2, 0);
      const k1 = other.ledgerAppend(1, 1, 40, 7, 1, 0);
      const k2 = s.ledgerAppend(0, 0, Number.NaN, 7, 2, 1);
      const k3 = s.ledgerAppend(-2, -1, Number.NaN, 7, 0, 3);
      const tags = [k0, k1, k2, k3].map((k) => {
        const e = log.entry(k);
        return e && [e.ref, e.owner, e.own, e.kind, e.idleW];
      });
      expect(tags).toEqual([
        [s.refId, 7, 2, 0, 40],
        [other.refId, 7, 1, 0, 40],
        [s.refId, 7, 2, 1, Number.NaN],
        [s.refId, 7, 0, 3, Number.NaN],
      ]);
      const append = s.ledgerAppend.bind(s) as (...args: unknown[]) => number;
      expect(() => append(0, 0, 0, "7")).toThrow(TypeError);
      // A reference dropped with a window open closes it: kind 4, its own id, nothing said.
      other.release();
      const last = log.entry(log.header().published - 1);
      expect(last && [last.ref, last.owner, last.own, last.kind, last.countAfter]).toEqual([
        other.refId,
        Number.NaN,
        Number.NaN,
        4,
        0,
      ]);
    } finally {
      other.release();
      s.release();
    }
  });

  it("ledgerAppendStamped appends the same entry and returns its instant (eT); the same −1 and −2 when nothing is appended", () => {
    const s = open(3, 1000);
    const other = open(3, 1000);
    try {
      const log = reader(s);
      const before = process.hrtime.bigint() - s.epochNs;
      const t0 = s.ledgerAppendStamped(2, 1, 40, 9, 2, 0);
      const t1 = s.ledgerAppendStamped(0, 0, Number.NaN, 9, 2, 1);
      const after = process.hrtime.bigint() - s.epochNs;
      const k = log.header().published - 2;
      const e0 = log.entry(k);
      const e1 = log.entry(k + 1);
      // The instant is the entry's own, in the same clock as the rest of the log.
      expect([t0, t1]).toEqual([e0?.t, e1?.t]);
      expect(BigInt(t0)).toBeGreaterThanOrEqual(before);
      expect(BigInt(t1)).toBeLessThanOrEqual(after);
      expect(t1).toBeGreaterThanOrEqual(t0);
      expect(e0 && [e0.ref, e0.owner, e0.own, e0.kind, e0.countAfter, e0.weightAfter]).toEqual([
        s.refId,
        9,
        2,
        0,
        1,
        2,
      ]);
      expect(other.ledgerAppendStamped(1, 1, 50)).toBe(-1); // another idle floor while one is open
      const stamped = s.ledgerAppendStamped.bind(s) as (...args: unknown[]) => number;
      expect(() => stamped(0, 2, 0)).toThrow(/ledgerAppendStamped\(.*deltaCount must be -1, 0 or 1/);
      expect(s.ledgerAppendStamped(-2, -1, Number.NaN, 9, 0, 3)).toBeGreaterThanOrEqual(t1);
      s.release();
      expect(s.ledgerAppendStamped(1, 1, 40)).toBe(-2);
    } finally {
      other.release();
      s.release();
    }
  });

  it("refuses an open whose idle floor differs from the open windows', and takes any once none is open", () => {
    const s = open(1, 1000);
    const other = open(1, 1000);
    const log = reader(s);
    try {
      expect(append(s, 1, 1, 40)).toBe(0);
      expect(s.ledgerAppend(1, 1, 50)).toBe(-1);
      expect(other.ledgerAppend(2, 1, 60)).toBe(-1);
      expect(log.header()).toEqual({ published: 1, capacity: 65_536, idleW: 40, open: 1, weight: 1 });
      expect(append(other, 2, 1, 40)).toBe(1); // the same floor is fine
      expect(append(s, 1, 0, 50)).toBe(2); // idleW is read only for an open
      expect(log.header().idleW).toBe(40);
      expect(append(s, -2, -1, 0)).toBe(3);
      expect(append(other, -2, -1, 0)).toBe(4);
      expect(log.header()).toEqual({ published: 5, capacity: 65_536, idleW: Number.NaN, open: 0, weight: 0 });
      expect(append(other, 3, 1, 50)).toBe(5);
      expect(log.header()).toMatchObject({ idleW: 50, open: 1, weight: 3 });
      expect(append(other, -3, -1, 0)).toBe(6);

      // A close with none open is clamped and still appended; it is not the reference's to undo.
      expect(append(s, -1, -1, 0)).toBe(7);
      expect(log.entry(7)).toMatchObject({ weightBefore: 0, weightAfter: 0, countAfter: 0 });
      expect(log.header()).toMatchObject({ published: 8, open: 0, weight: 0 });
      s.release();
      other.release();
      expect(log.header()).toMatchObject({ published: 8, open: 0, weight: 0 });
    } finally {
      s.release();
      other.release();
    }
  });

  it("orders appends from several workers at once, and every environment reads the same log", async () => {
    const DEVICE = 2;
    const s = open(DEVICE, 1000);
    const log = reader(s);
    // The workers start appending together: each waits at this gate until all four are at it.
    const gate = new Int32Array(new SharedArrayBuffer(4));
    // Each worker: rounds of (open its weight, raise it by 1, close it), at least 1,000 and on
    // until another worker's append came between two of its own (at most 5,000: the log never
    // wraps here); then one window left open with weight 10 × (id + 1). Integer weights: every sum
    // is exact.
    const body = `
      const id = workerData.id;
      const gate = workerData.gate;
      const mine = [];
      let interleaved = false;
      const add = (dw, dc) => {
        const k = s.ledgerAppend(dw, dc, 30);
        if (k < 0) throw new Error("refused: " + k);
        if (mine.length > 0 && k !== mine[mine.length - 1][0] + 1) interleaved = true;
        mine.push([k, dw, dc]);
      };
      parentPort.on("message", (m) => {
        if (m === "go") {
          Atomics.add(gate, 0, 1);
          Atomics.notify(gate, 0);
          for (let at = Atomics.load(gate, 0); at < 4; at = Atomics.load(gate, 0)) Atomics.wait(gate, 0, at, 5);
          for (let i = 0; i < 1000 || (!interleaved && i < 5000); i++) {
            add(id + 1, 1);
            add(1, 0);
            add(-(id + 2), -1);
          }
          add(10 * (id + 1), 1);
          parentPort.postMessage(mine);
        } else if (m === "read") {
          parentPort.postMessage(log.entries());
        }
      });
    `;
    const workers = [0, 1, 2, 3].map((id) => ledgerWorker(body, { device: DEVICE, id, gate }));
    try {
      await Promise.all(workers.map((w) => nextMessage(w)));
      const appended = await Promise.all(workers.map((w) => ask<Array<[number, number, number]>>(w, "go")));
      const total = appended.reduce((sum, list) => sum + list.length, 0);
      const bySeq = new Map<number, [number, number]>();
      const owner = new Map<number, number>();
      for (const [id, list] of appended.entries()) {
        for (const [k, dw, dc] of list) {
          bySeq.set(k, [dw, dc]);
          owner.set(k, id);
        }
      }
      expect(bySeq.size).toBe(total); // no sequence number twice
      expect(Math.min(...bySeq.keys())).toBe(0);
      expect(Math.max(...bySeq.keys())).toBe(total - 1);
      // The workers really appended at once: their sequence numbers interleave.
      let switches = 0;
      for (let k = 1; k < total; k++) if (owner.get(k) !== owner.get(k - 1)) switches++;
      expect(switches).toBeGreaterThan(3);

      const mine = log.entries();
      expect(mine).toHaveLength(total);
      let weight = 0;
      let count = 0;
      let t = -1;
      // Each entry as the appends computed it, and sequence order is time order (one expect at the
      // end: tens of thousands of entries).
      const wrong: string[] = [];
      for (const e of mine) {
        const [dw, dc] = bySeq.get(e.k) ?? [Number.NaN, Number.NaN];
        const before = weight;
        count += dc;
        weight += dw;
        if (e.weightBefore !== before || e.weightAfter !== weight || e.countAfter !== count || e.t < t) {
          wrong.push(`${e.k}: ${JSON.stringify(e)}, expected weight ${before} → ${weight}, count ${count}`);
        }
        t = e.t;
      }
      expect(wrong).toEqual([]);
      expect(log.header()).toEqual({ published: total, capacity: 65_536, idleW: 30, open: 4, weight: 100 });

      // Every environment reads the same entries: same sequence, same time, same totals.
      const theirs = await Promise.all(workers.map((w) => ask<LedgerEntry[]>(w, "read")));
      for (const entries of theirs) expect(entries).toEqual(mine);

      // Terminated with a window open each: one closing event per worker.
      await Promise.all(workers.map((w) => w.terminate()));
      await waitFor("the workers' windows closed", () => log.header().open === 0);
      const closing = log.entries().slice(total);
      expect(closing).toHaveLength(4);
      expect(closing.map((e) => e.weightBefore - e.weightAfter).sort((x, y) => x - y)).toEqual([
        10, 20, 30, 40,
      ]);
      expect(log.header()).toEqual({
        published: total + 4,
        capacity: 65_536,
        idleW: Number.NaN,
        open: 0,
        weight: 0,
      });
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
      s.release();
    }
  });

  it("reads consistent entries and totals while another thread appends continuously", async () => {
    const DEVICE = 4;
    const s = open(DEVICE, 1000);
    const log = reader(s);
    const stop = new Int32Array(new SharedArrayBuffer(8));
    // Append j: (+1 open, +2, +4 open, -4 close)[j % 4]. After j appends, with c = floor(j / 4)
    // and r = j % 4, the card holds c + [0, 1, 1, 2][r] windows of weight 3c + [0, 1, 3, 7][r].
    const writer = ledgerWorker(
      `
      const pattern = [[1, 1], [2, 0], [4, 1], [-4, -1]];
      const stop = workerData.stop;
      parentPort.on("message", () => {}); // stays (windows open) until terminated
      setImmediate(() => {
        let j = 0;
        while (Atomics.load(stop, 0) === 0) {
          const [dw, dc] = pattern[j % 4];
          if (s.ledgerAppend(dw, dc, 20) !== j) throw new Error("out of sequence at " + j);
          j++;
        }
        Atomics.store(stop, 1, j);
        parentPort.postMessage(j);
      });
      `,
      { device: DEVICE, stop },
    );
    const countAt = (j: number): number => Math.floor(j / 4) + ([0, 1, 1, 2][j % 4] ?? Number.NaN);
    const weightAt = (j: number): number => 3 * Math.floor(j / 4) + ([0, 1, 3, 7][j % 4] ?? Number.NaN);
    try {
      await nextMessage(writer);
      const capacity = log.capacity;
      let headers = 0;
      let entries = 0;
      let overwritten = 0;
      const started = Date.now();
      // Read until the writer has wrapped the log twice (and for at least 300 ms).
      while (Date.now() - started < 300 || log.header().published < 2 * capacity) {
        if (Date.now() - started > 20_000) throw new Error("the writer did not wrap the log twice");
        const h = log.header();
        headers++;
        expect(h.open).toBe(countAt(h.published));
        expect(h.weight).toBe(weightAt(h.published));
        if (h.published === 0) continue;
        expect(h.idleW).toBe(20);
        // The oldest entries are the ones being overwritten; also read the newest.
        for (const k of [h.published - capacity, h.published - capacity + 1, h.published - 1]) {
          if (k < 0) continue;
          const e = log.entry(k);
          if (e === null) {
            overwritten++;
            continue;
          }
          entries++;
          expect(e.weightBefore).toBe(weightAt(k));
          expect(e.weightAfter).toBe(weightAt(k + 1));
          expect(e.countAfter).toBe(countAt(k + 1));
          const next = log.entry(k + 1);
          if (next !== null) expect(next.t).toBeGreaterThanOrEqual(e.t);
        }
      }
      Atomics.store(stop, 0, 1);
      const appended = await nextMessage<number>(writer);
      expect(log.header()).toMatchObject({
        published: appended,
        open: countAt(appended),
        weight: weightAt(appended),
      });
      expect(headers).toBeGreaterThan(100);
      expect(entries).toBeGreaterThan(100);
      // Retried reads show the writer really raced the reader.
      expect(log.retries + overwritten).toBeGreaterThan(0);
    } finally {
      Atomics.store(stop, 0, 1);
      await writer.terminate();
      s.release();
    }
  });

  it("wraps around: entry k lives at k % capacity, and hPublished keeps counting", () => {
    const s = open(5, 1000);
    const log = reader(s);
    const L = b.ledgerLayout;
    try {
      // One window open, then weight +1 per event: entry k's weightAfter is k + 1.
      const total = 65_536 + 1_000;
      expect(s.ledgerAppend(1, 1, 10)).toBe(0);
      for (let k = 1; k < total; k++) {
        if (s.ledgerAppend(1, 0, 0) !== k) throw new Error(`append ${k} out of sequence`);
      }
      const h = log.header();
      expect(h).toEqual({ published: total, capacity: 65_536, idleW: 10, open: 1, weight: total });
      const raw = new Float64Array(s.ledger);
      const slot = (k: number): number => L.headerSlots + (k % 65_536) * L.entrySlots;
      let t = -1;
      const wrong: string[] = [];
      for (let k = total - 65_536; k < total; k++) {
        const e = log.entry(k);
        if (raw[slot(k) + L.eWeightAfter] !== k + 1 || e === null || e.weightBefore !== k || e.t < t) {
          wrong.push(`${k}: ${JSON.stringify(e)} at slot ${slot(k)}`);
        }
        t = e?.t ?? t;
      }
      expect(wrong).toEqual([]);
      // The first 1,000 were overwritten by the last 1,000.
      expect(log.entry(0)).toBeNull();
      expect(log.entry(999)).toBeNull();
      expect(raw[slot(0) + L.eWeightAfter]).toBe(65_537);
      expect(log.entries()).toHaveLength(65_536);
    } finally {
      s.release();
    }
  });
});
