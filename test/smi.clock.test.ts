/**
 * SmiClock, which places nvidia-smi's readings on CLOCK_MONOTONIC from the wall-clock timestamps
 * it prints: synthetic streams whose true reading times are known, read late and irregularly
 * (as a busy event loop reads the pipe), with the clock's zone, steps of the wall clock and its
 * ms resolution. Every placement is compared with the true reading time.
 */
import { describe, expect, it } from "vitest";
import { OFFSET_WINDOW_MS, SmiClock } from "../src/sources/smi/clock.js";

const MS = 1_000_000n;
const PERIOD = 100n * MS;

/** A fixed pseudo-random sequence in [0, 1) (mulberry32). */
function rng(seed: number): () => number {
  let s = seed | 0;
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let x = Math.imul(s ^ (s >>> 15), 1 | s);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

interface Row {
  /** When nvidia-smi read the power (CLOCK_MONOTONIC ns): the truth. */
  readonly readNs: bigint;
  /** What it printed: its wall clock at that instant, truncated to the ms. */
  readonly wallMs: number;
  /** When this process read the row. */
  readonly arrivalNs: bigint;
}

/**
 * `n` iterations of a loop sleeping `PERIOD` after a query of 0–3 ms, starting at `startNs`; the
 * wall clock reads CLOCK_MONOTONIC + `wallOffsetNs(readNs)`. Rows arrive in order, each at least
 * `delay()` after its read (a row cannot overtake the one before it in the pipe).
 */
function stream(
  n: number,
  random: () => number,
  delay: () => number,
  wallOffsetNs: (readNs: bigint) => bigint,
  startNs = 5_000_000_000n,
): Row[] {
  const rows: Row[] = [];
  let t = startNs;
  let lastArrival = 0n;
  for (let k = 0; k < n; k++) {
    const wallNs = t + wallOffsetNs(t);
    const wallMs = Number(wallNs / MS); // truncated, as nvidia-smi prints it
    let arrivalNs = t + BigInt(Math.round(delay() * 1e6));
    if (arrivalNs < lastArrival) arrivalNs = lastArrival;
    lastArrival = arrivalNs;
    rows.push({ readNs: t, wallMs, arrivalNs });
    t += PERIOD + BigInt(Math.round(random() * 3e6));
  }
  return rows;
}

/** A busy event loop: most rows are read within a ms, the rest up to 80 ms late. */
function busyDelay(random: () => number): () => number {
  return () => (random() < 0.6 ? 0.1 + 0.9 * random() : 80 * random());
}

function place(clock: SmiClock, rows: readonly Row[]): bigint[] {
  return rows.map((r) => clock.map(r.arrivalNs, r.wallMs, true, PERIOD));
}

/** Largest |placed − true| in ms over rows[from..]. */
function worstMs(rows: readonly Row[], placed: readonly bigint[], from = 0): number {
  let worst = 0;
  for (let k = from; k < rows.length; k++) {
    const e = Math.abs(Number((placed[k] as bigint) - (rows[k] as Row).readNs)) / 1e6;
    if (e > worst) worst = e;
  }
  return worst;
}

describe("SmiClock", () => {
  it("places late, irregular rows at their reading time within the ms of the stamp, whatever the zone", () => {
    const random = rng(1);
    // The wall clock is 55 years and 2 hours (a zone) ahead of CLOCK_MONOTONIC here.
    const ahead = 1_735_689_600_000n * MS + 7_200_000n * MS;
    const rows = stream(300, random, busyDelay(random), () => ahead);
    const clock = new SmiClock();
    const placed = place(clock, rows);
    // After the first few rows (one read within a ms of its arrival is enough)...
    expect(worstMs(rows, placed, 5)).toBeLessThanOrEqual(2);
    for (let k = 0; k < rows.length; k++) {
      // ...and never after the row arrived, however late that was.
      expect(placed[k] as bigint).toBeLessThanOrEqual((rows[k] as Row).arrivalNs);
    }
    expect(clock.steps).toBe(0);
    // The arrival times themselves were up to 80 ms off: what the mapping removes.
    const lateMs = rows.map((r) => Number(r.arrivalNs - r.readNs) / 1e6);
    expect(Math.max(...lateMs)).toBeGreaterThan(50);
  });

  it("follows a step of the wall clock forward at once", () => {
    const random = rng(2);
    const rows = stream(200, random, busyDelay(random), (t) => (t < 12_000_000_000n ? 0n : 3_600_000n * MS));
    const clock = new SmiClock();
    const placed = place(clock, rows);
    const after = rows.findIndex((r) => r.readNs >= 12_000_000_000n);
    expect(after).toBeGreaterThan(10);
    // The first row after the step lowers the estimate by the hour: placed right away, up to its
    // own delay late until a row read promptly comes.
    expect(worstMs(rows, placed, 5)).toBeLessThanOrEqual(81);
    expect(worstMs(rows, placed, after + 10)).toBeLessThanOrEqual(2);
  });

  it("restarts the estimate on a step back (a stamp that goes back, or an iteration too soon)", () => {
    for (const [seed, backMs] of [
      [3, 3_600_000n], // a DST change back, an hour
      [4, 70n], // less than a period: the next iteration comes 30 ms after the last
    ] as const) {
      const random = rng(seed);
      const rows = stream(200, random, busyDelay(random), (t) => (t < 12_000_000_000n ? 0n : -backMs * MS));
      const clock = new SmiClock();
      const placed = place(clock, rows);
      expect(clock.steps, `step of ${backMs} ms`).toBe(1);
      const after = rows.findIndex((r) => r.readNs >= 12_000_000_000n);
      // Never placed early by the step: at worst one row's delay late, then within the ms again.
      for (let k = after; k < rows.length; k++) {
        expect(placed[k] as bigint).toBeGreaterThanOrEqual((rows[k] as Row).readNs - MS);
      }
      expect(worstMs(rows, placed, after + 10), `step of ${backMs} ms`).toBeLessThanOrEqual(2);
    }
  });

  it("forgets a small step back that it cannot see once the window has passed", () => {
    const random = rng(5);
    const n = Math.ceil((OFFSET_WINDOW_MS * 2) / 100);
    // 30 ms back: the iteration after it is still 70 ms after the previous one (over half a period).
    const rows = stream(n, random, busyDelay(random), (t) => (t < 8_000_000_000n ? 0n : -30n * MS));
    const clock = new SmiClock();
    const placed = place(clock, rows);
    expect(clock.steps).toBe(0);
    const after = rows.findIndex((r) => r.readNs >= 8_000_000_000n);
    expect(worstMs(rows, placed, after)).toBeLessThanOrEqual(31); // placed early while it lasts
    const cleared = rows.findIndex((r) => r.readNs >= 8_000_000_000n + BigInt(OFFSET_WINDOW_MS + 1_000) * MS);
    expect(cleared).toBeGreaterThan(after);
    expect(worstMs(rows, placed, cleared)).toBeLessThanOrEqual(2);
  });

  it("takes the rows of one iteration (one stamp) without seeing a step, and its first row may start a stream", () => {
    const clock = new SmiClock();
    const base = 1_000_000_000_000;
    // Two cards per iteration share the stamp; the second row is not an iteration of its own.
    let t = 10_000_000_000n;
    // Every row arrives 0.4 ms or more after its read: that is what the estimate holds.
    for (let k = 0; k < 20; k++) {
      const wallMs = base + k * 100;
      expect(clock.map(t + 400_000n, wallMs, true, PERIOD)).toBe(t + 400_000n);
      expect(clock.map(t + 700_000n, wallMs, false, PERIOD)).toBe(t + 400_000n);
      t += PERIOD;
    }
    expect(clock.offsetNs()).toBe(10_000_000_000n + 400_000n - BigInt(base) * MS);
    // A new child's first query, 20 ms after the last one: not held to the period.
    clock.newStream();
    expect(clock.map(t - 80n * MS + 300_000n, base + 20 * 100 - 80, true, PERIOD)).toBe(
      t - 80n * MS + 300_000n,
    );
    expect(clock.steps).toBe(0);
    // A new child's first row may also have been read a little before the last child's last row.
    clock.newStream();
    expect(clock.map(t - 85n * MS + 300_000n, base + 20 * 100 - 85, true, PERIOD)).toBe(
      t - 85n * MS + 300_000n,
    );
    expect(clock.steps).toBe(0);
    // But 20 ms between two iterations of one child is a step back.
    expect(clock.map(t - 65n * MS + 300_000n, base + 20 * 100 - 65, true, PERIOD)).toBe(
      t - 65n * MS + 300_000n,
    );
    expect(clock.steps).toBe(1);
  });
});
