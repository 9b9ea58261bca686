import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CardLedger, type LedgerWindow } from "../src/ledger/ledger.js";
import type {
  Edge,
  EdgeError,
  EventLog,
  EventLogEntry,
  IntervalMeasurement,
  Track,
} from "../src/track/track.js";
import type { Check, SpanMeasurement } from "../src/vocabulary/measurement.js";
import { fairShare } from "./fakes/fair-share.js";

// The per-card ledger on its own, against a synthetic card whose cumulative energy is exact and
// whose readings at each edge are off by a known, adversarial error: the shares must be the exact
// weighted fair share when the readings are exact, must add up to the card, and must stay within
// their bars whatever the readings' errors are (each within what edgeError declares).

interface FakeEdge extends Edge {
  /** The reading's value at the edge: the truth, off by the injected error. */
  readonly value: number;
}

/** A card drawing `powerW(t)` (piecewise constant per ms), read with the given per-edge errors. */
class FakeTrack implements Track {
  readonly backend = "nvml_counter" as const;
  now = 1_000_000_000n;
  /** Error of the next edge's reading: two-sided part and lag (J). */
  nextErr = 0;
  nextLag = 0;
  constructor(
    readonly errJ: number,
    readonly lagJ: number,
    readonly powerW: (ms: number) => number,
  ) {}
  /** Exact energy from time 0 to t (J). */
  energy(tNs: bigint): number {
    const ms = Number(tNs - 1_000_000_000n) / 1e6;
    let e = 0;
    const whole = Math.floor(ms);
    for (let i = 0; i < whole; i++) e += this.powerW(i) / 1000;
    return e + (this.powerW(whole) * (ms - whole)) / 1000;
  }
  ready(): Promise<Check> {
    return Promise.resolve({ ok: true });
  }
  edge(): Edge {
    return { tNs: this.now, value: this.energy(this.now) + this.nextErr - this.nextLag } as FakeEdge;
  }
  settle(): Promise<void> {
    return Promise.resolve();
  }
  span(): SpanMeasurement {
    return { ok: false, reason: "unused" };
  }
  interval(from: Edge, to: Edge): IntervalMeasurement {
    return { ok: true, grossJoules: (to as FakeEdge).value - (from as FakeEdge).value, spreadJoules: 0 };
  }
  edgeError(): EdgeError {
    return { ok: true, errJoules: this.errJ, lagJoules: this.lagJ };
  }
  retain(): void {}
  release(): void {}
}

/** A card's log as the addon keeps it: stamped with the shared clock, totals and the card's idle included. */
class FakeLog implements EventLog {
  readonly scope = "host" as const;
  readonly reason = null;
  readonly epochNs = 1_000_000_000n;
  readonly capacity = 1 << 20;
  readonly slot = 0;
  readonly entries: EventLogEntry[] = [];
  open = 0;
  weight = 0;
  idle = Number.NaN;
  constructor(readonly clock: { now: bigint }) {}
  append(deltaWeight: number, deltaCount: number, idleW: number, kind: number): number {
    const before = this.weight;
    this.open += deltaCount;
    this.weight = this.open === 0 ? 0 : this.weight + deltaWeight;
    if (deltaCount > 0 && Number.isNaN(this.idle)) this.idle = idleW;
    if (this.open === 0) this.idle = Number.NaN;
    this.entries.push({
      t: Number(this.clock.now - this.epochNs),
      weightBefore: before,
      weightAfter: this.weight,
      countAfter: this.open,
      idleAfter: this.idle,
      slot: 0,
      kind,
    });
    return this.entries.length - 1;
  }
  published(): number {
    return this.entries.length;
  }
  read(k: number, out: EventLogEntry): boolean {
    const e = this.entries[k];
    if (e === undefined) return false;
    Object.assign(out, e);
    return true;
  }
}

/** One JavaScript environment's (or process's) view of the card: its own track over the shared log. */
class EnvTrack extends FakeTrack {
  constructor(
    readonly clock: { now: bigint },
    powerW: (ms: number) => number,
  ) {
    super(0, 0, powerW);
  }
  loggedEdge(tNs: bigint): Edge {
    return { tNs, value: this.energy(tNs) } as FakeEdge;
  }
}

function envLedger(clock: { now: bigint }, log: FakeLog): CardLedger {
  return new CardLedger(new EnvTrack(clock, power), "card", null, log);
}

interface Step {
  /** Which window acts (modulo the windows), after `afterMs`. */
  readonly who: number;
  readonly afterMs: number;
  readonly action: "toggle" | "weight" | "mark";
  readonly weight: number;
  readonly err: number;
  readonly lag: number;
}

const stepArb = fc.record({
  who: fc.nat(40),
  afterMs: fc.integer({ min: 0, max: 50 }),
  action: fc.constantFrom("toggle", "toggle", "weight", "mark"),
  weight: fc.double({ min: 0.05, max: 20, noNaN: true, noDefaultInfinity: true }),
  err: fc.double({ min: -1, max: 1, noNaN: true }),
  lag: fc.double({ min: 0, max: 1, noNaN: true }),
}) as fc.Arbitrary<Step>;

const IDLE_W = 50;

async function play(steps: readonly Step[], errJ: number, lagJ: number, powerW: (ms: number) => number) {
  const track = new FakeTrack(errJ, lagJ, powerW);
  const ledger = new CardLedger(track, null);
  const open = new Map<number, { w: LedgerWindow; weights: [bigint, number][] }>();
  const done: { w: LedgerWindow; weights: [bigint, number][] }[] = [];
  for (const s of steps) {
    track.now += BigInt(s.afterMs) * 1_000_000n;
    track.nextErr = s.err * errJ;
    track.nextLag = s.lag * lagJ;
    const mine = open.get(s.who);
    if (s.action === "toggle") {
      if (mine === undefined) {
        const w = ledger.openWindow(s.weight, IDLE_W);
        open.set(s.who, { w, weights: [[track.now, s.weight]] });
      } else {
        const close = ledger.closeWindow(mine.w);
        await ledger.settleThrough(close);
        open.delete(s.who);
        done.push(mine);
      }
    } else if (mine !== undefined && s.action === "weight") {
      ledger.setWeight(mine.w, s.weight);
      mine.weights.push([track.now, s.weight]);
    } else if (mine !== undefined) ledger.mark(mine.w);
  }
  for (const [, mine] of open) {
    track.now += 1_000_000n;
    track.nextErr = 0;
    track.nextLag = 0;
    await ledger.settleThrough(ledger.closeWindow(mine.w));
    done.push(mine);
  }
  const truth = fairShare(
    done.map((d) => ({
      open: d.w.events[0]?.edge.tNs as bigint,
      close: d.w.events[d.w.events.length - 1]?.edge.tNs as bigint,
      weights: d.weights,
    })),
    (a, b) => track.energy(b) - track.energy(a),
    IDLE_W,
  );
  const shares = done.map((d) => ledger.share(d.w, 0, d.w.events.length - 1));
  return { ledger, truth, shares, done };
}

const power = (ms: number) => 60 + ((ms * 7919) % 400);

describe("the per-card ledger", () => {
  it("with exact readings, every share is the exact weighted fair share, and they add up to the card", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 400 }), async (steps) => {
        const { ledger, truth, shares } = await play(steps, 0, 0, power);
        let sum = 0;
        shares.forEach((s, i) => {
          expect(s.ok).toBe(true);
          if (!s.ok) return;
          const t = truth.shares[i] as number;
          expect(Math.abs(s.aboveJoules - t)).toBeLessThanOrEqual(1e-9 * (1 + Math.abs(truth.unionAbove)));
          expect(s.uncertaintyJoules).toBe(0);
          sum += s.aboveJoules;
        });
        expect(Math.abs(sum - truth.unionAbove)).toBeLessThanOrEqual(1e-9 * (1 + Math.abs(truth.unionAbove)));
        expect(Math.abs(ledger.cardAboveJoules - truth.unionAbove)).toBeLessThanOrEqual(
          1e-9 * (1 + Math.abs(truth.unionAbove)),
        );
      }),
      { numRuns: 200 },
    );
  });

  it("with readings off by up to their declared error (a lag one way only), every share is within its bar", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 400 }), async (steps) => {
        const { truth, shares } = await play(steps, 0.05, 0.4, power);
        shares.forEach((s, i) => {
          expect(s.ok).toBe(true);
          if (!s.ok) return;
          const t = truth.shares[i] as number;
          expect(Math.abs(s.aboveJoules - t)).toBeLessThanOrEqual(s.uncertaintyJoules + 1e-9);
        });
      }),
      { numRuns: 300 },
    );
  });

  it("a window alone has the two edges' errors and the larger lag as its bar, not both lags", async () => {
    const track = new FakeTrack(0.01, 0.5, () => 300);
    const ledger = new CardLedger(track, null);
    const w = ledger.openWindow(2, IDLE_W);
    track.now += 100_000_000n;
    await ledger.settleThrough(ledger.closeWindow(w));
    const s = ledger.share(w, 0, 1);
    expect(s.ok && s.uncertaintyJoules).toBeCloseTo(0.01 + 0.01 + 0.5, 12);
    expect(s.ok && s.aboveJoules).toBeCloseTo((300 - IDLE_W) * 0.1, 9);
  });

  it("environments sharing a process-wide log split the card among all their windows", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ env: fc.nat(2), step: stepArb }), { minLength: 1, maxLength: 300 }),
        async (script) => {
          const clock = { now: 1_000_000_000n };
          const log = new FakeLog(clock);
          const ledgers = [0, 1, 2].map(() => envLedger(clock, log));
          const open = new Map<
            string,
            { ledger: CardLedger; w: LedgerWindow; weights: [bigint, number][] }
          >();
          const done: { ledger: CardLedger; w: LedgerWindow; weights: [bigint, number][] }[] = [];
          for (const { env, step } of script) {
            clock.now += BigInt(step.afterMs) * 1_000_000n + 1n;
            const ledger = ledgers[env] as CardLedger;
            const key = `${env}:${step.who % 8}`;
            const mine = open.get(key);
            if (step.action === "toggle") {
              if (mine === undefined) {
                const w = ledger.openWindow(step.weight, IDLE_W);
                open.set(key, { ledger, w, weights: [[clock.now, step.weight]] });
              } else {
                await ledger.settleThrough(ledger.closeWindow(mine.w));
                open.delete(key);
                done.push(mine);
              }
            } else if (mine !== undefined && step.action === "weight") {
              ledger.setWeight(mine.w, step.weight);
              mine.weights.push([clock.now, step.weight]);
            }
          }
          for (const [, mine] of open) {
            clock.now += 1_000_000n;
            await mine.ledger.settleThrough(mine.ledger.closeWindow(mine.w));
            done.push(mine);
          }
          const track = new FakeTrack(0, 0, power);
          const truth = fairShare(
            done.map((d) => ({
              open: d.w.events[0]?.edge.tNs as bigint,
              close: d.w.events[d.w.events.length - 1]?.edge.tNs as bigint,
              weights: d.weights,
            })),
            (a, b) => track.energy(b) - track.energy(a),
            IDLE_W,
          );
          let sum = 0;
          done.forEach((d, i) => {
            const share = d.ledger.share(d.w, 0, d.w.events.length - 1);
            expect(share.ok).toBe(true);
            if (!share.ok) return;
            const t = truth.shares[i] as number;
            expect(Math.abs(share.aboveJoules - t)).toBeLessThanOrEqual(
              1e-9 * (1 + Math.abs(truth.unionAbove)),
            );
            sum += share.aboveJoules;
          });
          expect(Math.abs(sum - truth.unionAbove)).toBeLessThanOrEqual(
            1e-9 * (1 + Math.abs(truth.unionAbove)),
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it("an open with another idle floor elsewhere is charged the card's, says so, and warns once; here it is refused", async () => {
    const clock = { now: 1_000_000_000n };
    const log = new FakeLog(clock);
    const a = envLedger(clock, log);
    const b = envLedger(clock, log);
    a.openWindow(1, IDLE_W);
    const warned: string[] = [];
    const onWarning = (w: Error & { code?: string }) => {
      if (w.code === "GIUL_IDLE_MISMATCH") warned.push(w.message);
    };
    process.on("warning", onWarning);
    try {
      const w = b.openWindow(1, IDLE_W + 5);
      expect(w.idleW).toBe(IDLE_W);
      expect(w.caveat).toMatch(
        /idleW 55 W was given, but windows open on the card elsewhere charge its idle as 50 W/,
      );
      b.openWindow(1, IDLE_W + 5);
      expect(() => b.openWindow(1, IDLE_W + 7)).toThrow(
        /idleW: 57 W, but windows open on the same card charge its idle as 55 W/,
      );
      expect(log.entries.length).toBe(3);
    } finally {
      await new Promise((r) => setImmediate(r));
      process.off("warning", onWarning);
    }
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatch(/idleW 55 W given .* charge its idle as 50 W; 50 W is used/);
  });

  it("counts the most windows open at once, and the time-weighted mean", async () => {
    const track = new FakeTrack(0, 0, () => 100);
    const ledger = new CardLedger(track, null);
    const a = ledger.openWindow(1, IDLE_W);
    const openA = a.events[0];
    track.now += 10_000_000n;
    const b = ledger.openWindow(1, IDLE_W);
    track.now += 10_000_000n;
    const c = ledger.openWindow(1, IDLE_W);
    track.now += 10_000_000n;
    ledger.closeWindow(b);
    ledger.closeWindow(c);
    track.now += 10_000_000n;
    const closeA = ledger.closeWindow(a);
    if (openA === undefined) throw new Error("no event");
    const conc = ledger.concurrency(openA, closeA);
    expect(conc.max).toBe(3);
    expect(conc.mean).toBeCloseTo((1 + 2 + 3 + 1) / 4, 12);
  });
});
