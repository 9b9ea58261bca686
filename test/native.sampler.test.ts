/**
 * The addon's sampler ring against the libnvidia-ml test double: times, the counter column, the
 * power integral, fault flags and periods, each checked against the scenario's ground truth.
 *
 * NVML is loaded once per process, so the double and its scenario are put into this process's
 * environment before the addon is first used; each test rewrites the scenario (same t0).
 */
import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GiulBinding, NativeFailure, NativeSampler } from "../binding.js";
import { ADDON, haveDoubles } from "./fakes/paths.js";
import { type DeviceSpec, NVML, type Scenario, writeScenario } from "./fakes/scenario.js";

interface Sample {
  readonly k: number;
  readonly t: number;
  readonly energyMj: number;
  readonly powerMw: number;
  readonly integralMj: number;
  readonly flags: number;
  readonly error: number;
  readonly faults: number;
  readonly readNs: number;
  readonly powerT: number;
  readonly powerReadNs: number;
}

interface Snapshot {
  readonly head: number;
  readonly capacity: number;
  readonly periodNs: number;
  readonly state: number;
  readonly lastError: number;
  readonly counter: number;
  readonly powerSource: number;
  readonly counterStepNs: number;
  readonly samples: readonly Sample[];
}

let b: GiulBinding;
let sc: Scenario;
/** Device 1 never has a counter; device 0 is what each test sets. */
const NO_COUNTER: DeviceSpec = { counter: false, instantField: false, powerMode: "instant", power: 75 };
/** Device 2 refuses its handle (as NO_PERMISSION does) until a test says otherwise. */
const NO_HANDLE: DeviceSpec = { handleError: NVML.ERROR_NO_PERMISSION };

function at(s: NativeSampler, t: number): bigint {
  return s.epochNs + BigInt(Math.round(t));
}

/** A consistent copy of the ring (seqlock protocol of binding.d.ts). */
function snapshot(s: NativeSampler): Snapshot {
  const L = b.layout;
  const u32 = new Uint32Array(s.buffer);
  const live = new Float64Array(s.buffer);
  for (;;) {
    const g = Atomics.load(u32, 0);
    if (g % 2 === 1) continue;
    const f = live.slice();
    if (Atomics.load(u32, 0) !== g) continue;
    const h = (slot: number): number => f[slot] ?? Number.NaN;
    const head = h(L.hHead);
    const capacity = h(L.hCapacity);
    const samples: Sample[] = [];
    for (let k = Math.max(0, head - capacity); k < head; k++) {
      const base = L.headerSlots + (k % capacity) * L.sampleSlots;
      const v = (slot: number): number => f[base + slot] ?? Number.NaN;
      samples.push({
        k,
        t: v(L.sT),
        energyMj: v(L.sEnergyMj),
        powerMw: v(L.sPowerMw),
        integralMj: v(L.sIntegralMj),
        flags: v(L.sFlags),
        error: v(L.sError),
        faults: v(L.sFaults),
        readNs: v(L.sReadNs),
        powerT: v(L.sPowerT),
        powerReadNs: v(L.sPowerReadNs),
      });
    }
    return {
      head,
      capacity,
      periodNs: h(L.hPeriodNs),
      state: h(L.hState),
      lastError: h(L.hLastError),
      counter: h(L.hCounter),
      powerSource: h(L.hPowerSource),
      counterStepNs: h(L.hCounterStepNs),
      samples,
    };
  }
}

async function waitFor(what: string, ok: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 10));
  }
}

/** Waits until the sampler has samples later than `ms` from t0. */
async function samplesPast(s: NativeSampler, ms: number): Promise<Snapshot> {
  let snap = snapshot(s);
  await waitFor(`samples past ${ms} ms`, () => {
    snap = snapshot(s);
    const last = snap.samples[snap.samples.length - 1];
    return last !== undefined && sc.msAt(at(s, last.t)) > ms;
  });
  return snap;
}

function open(index: number, periodMs: number): NativeSampler {
  const s: NativeSampler | NativeFailure = b.openSampler(index, periodMs);
  if (!s.ok) throw new Error(`openSampler failed: ${s.code}: ${s.reason}`);
  return s;
}

function mean(xs: readonly number[]): number {
  return xs.length === 0 ? Number.NaN : xs.reduce((a, x) => a + x, 0) / xs.length;
}

/** A new sampler ticks every 2 ms for its first 250 ms (native/sampler.h kLearningMs). */
const LEARNING_NS = 250e6;

/** Waits until the sampler's learning ticks are over (a sample written after them). */
async function pastLearning(s: NativeSampler): Promise<void> {
  await waitFor("the learning ticks to end", () => {
    const last = snapshot(s).samples.at(-1);
    return last !== undefined && last.t > LEARNING_NS + 5e6;
  });
}

function intervalsMs(samples: readonly Sample[]): number[] {
  const out: number[] = [];
  for (let i = 1; i < samples.length; i++) {
    out.push(((samples[i]?.t ?? 0) - (samples[i - 1]?.t ?? 0)) / 1e6);
  }
  return out;
}

const FAULTS = (): number => b.flags.COUNTER_BACKWARDS | b.flags.COUNTER_JUMP | b.flags.READ_FAILED;

describe.skipIf(!haveDoubles())("native sampler (test double)", () => {
  beforeAll(async () => {
    sc = writeScenario({ devices: [{}, NO_COUNTER, NO_HANDLE] });
    Object.assign(process.env, sc.env());
    b = createRequire(import.meta.url)(ADDON) as GiulBinding;
    const info = await b.nvmlInit();
    if (!info.ok) throw new Error(`nvmlInit: ${info.reason}`);
    expect(info.deviceCount).toBe(3);
  });

  afterAll(() => {
    sc?.remove();
  });

  it("exports the ring layout and flags of binding.d.ts", () => {
    const L = b.layout;
    const slots = [
      L.hHead,
      L.hCapacity,
      L.hPeriodNs,
      L.hState,
      L.hLastError,
      L.hCounter,
      L.hPowerSource,
      L.hCounterStepNs,
    ];
    expect(new Set(slots).size).toBe(slots.length);
    for (const slot of slots) expect(slot > 0 && slot < L.headerSlots).toBe(true);
    const sampleSlots = [
      L.sT,
      L.sEnergyMj,
      L.sPowerMw,
      L.sIntegralMj,
      L.sFlags,
      L.sError,
      L.sFaults,
      L.sReadNs,
    ];
    expect(new Set(sampleSlots).size).toBe(sampleSlots.length);
    for (const slot of sampleSlots) expect(slot >= 0 && slot < L.sampleSlots).toBe(true);
    const bits = Object.values(b.flags);
    expect(bits.reduce((x, y) => x | y, 0)).toBe(bits.reduce((x, y) => x + y, 0));
    const before = process.hrtime.bigint();
    const now = b.monotonicNs();
    expect(now >= before && now <= process.hrtime.bigint()).toBe(true);
  });

  it("writes monotonic samples whose counter, power and integral match the scenario", async () => {
    const now = sc.nowMs();
    // A ramp up, a step and a ramp down: the integral must follow power, not a constant.
    sc.update({
      devices: [
        {
          power: [
            [now, 100],
            [now + 300, 400],
            [now + 450, 400],
            [now + 450, 150],
            [now + 800, 250],
          ],
        },
        NO_COUNTER,
        NO_HANDLE,
      ],
    });
    const opened = process.hrtime.bigint();
    const s = open(0, 10);
    const snap = await samplesPast(s, now + 700);
    s.release();
    const closed = process.hrtime.bigint();

    expect(snap.capacity).toBe(16384);
    expect(snap.periodNs).toBe(10e6);
    expect(snap.state).toBe(1);
    expect(snap.counter).toBe(1);
    expect(snap.powerSource).toBe(1);
    expect(snap.lastError).toBe(0);
    expect(snap.samples[0]?.k).toBe(0);

    // The reads happen within a few µs of the stamped midpoint, unless the OS preempts the thread
    // between them: every sample must fit the scenario within 10 ms, nearly all within 2 ms.
    const fits = (value: number, f: (tNs: bigint) => number, tNs: bigint, tolMs: number): boolean => {
      // Power has steps, so look at the whole window, not only its ends.
      const values: number[] = [];
      for (let us = -tolMs * 1000; us <= tolMs * 1000; us += 100) values.push(f(tNs + BigInt(us * 1000)));
      return value >= Math.min(...values) - 1 && value <= Math.max(...values) + 1;
    };
    const counter = (tNs: bigint): number => Number(sc.counterMj(0, tNs));
    const powerMw = (tNs: bigint): number => sc.instantW(0, tNs) * 1000;
    let exact = 0;
    let tight = 0;
    for (const [i, x] of snap.samples.entries()) {
      const prev = snap.samples[i - 1];
      if (prev) expect(x.t).toBeGreaterThan(prev.t);
      const tNs = at(s, x.t);
      expect(tNs >= opened && tNs <= closed).toBe(true);
      expect(x.flags).toBe(b.flags.ENERGY_OK | b.flags.POWER_OK);
      expect(x.faults).toBe(0);
      expect(x.error).toBe(0);
      // The stamped read took some time, less than a tick (the double answers at once).
      expect(x.readNs).toBeGreaterThan(0);
      expect(x.readNs).toBeLessThan(10e6);
      // The power read has its own stamp, after the counter's, in the same tick.
      expect(x.powerT).toBeGreaterThan(x.t);
      expect(x.powerT - x.t).toBeLessThan(10e6);
      expect(x.powerReadNs).toBeGreaterThan(0);
      expect(fits(x.energyMj, counter, tNs, 10)).toBe(true);
      expect(fits(x.powerMw, powerMw, tNs, 10)).toBe(true);
      if (fits(x.energyMj, counter, tNs, 2) && fits(x.powerMw, powerMw, tNs, 2)) tight++;
      if (x.energyMj === counter(tNs)) exact++;
    }
    expect(tight / snap.samples.length).toBeGreaterThan(0.9);
    expect(exact / snap.samples.length).toBeGreaterThan(0.8);

    // The running integral over 0.5 s. First, exactly the trapezoids of the power reads at their
    // own stamps, every sample in between included.
    const ia = snap.samples.findIndex((x) => sc.msAt(at(s, x.t)) >= now + 100);
    const iz = snap.samples.findIndex((x) => ia >= 0 && x.t - (snap.samples[ia] as Sample).t >= 500e6);
    if (ia < 0 || iz < 0) throw new Error("not enough samples");
    const span = snap.samples.slice(ia, iz + 1);
    const integralJ = ((span[span.length - 1] as Sample).integralMj - (span[0] as Sample).integralMj) / 1000;
    let trapezoidsJ = 0;
    // Against the scenario: the trapezoids of its own power at the same stamps differ from its
    // energy by the sampling alone (a step inside an interval costs up to half the step × the
    // interval); a read that answered a little off its stamp (the thread preempted inside it) adds
    // what it was off by. Their sum bounds the integral's error; a fixed share of the energy does
    // not (an interval stretched by a loaded host straddling the step crossed 1 %).
    let boundJ = 0;
    for (let i = 1; i < span.length; i++) {
      const p = span[i - 1] as Sample;
      const q = span[i] as Sample;
      expect(q.k).toBe(p.k + 1);
      const [tp, tq] = [at(s, p.powerT), at(s, q.powerT)];
      const dtS = Number(tq - tp) / 1e9;
      trapezoidsJ += ((p.powerMw + q.powerMw) / 2000) * dtS;
      const [wp, wq] = [sc.instantW(0, tp), sc.instantW(0, tq)];
      boundJ += Math.abs(((wp + wq) / 2) * dtS - sc.energyJ(0, tp, tq));
      boundJ += ((Math.abs(p.powerMw / 1000 - wp) + Math.abs(q.powerMw / 1000 - wq)) / 2) * dtS;
    }
    expect(Math.abs(integralJ - trapezoidsJ)).toBeLessThan(1e-6 * trapezoidsJ);
    const truthJ = sc.energyJ(
      0,
      at(s, (span[0] as Sample).powerT),
      at(s, (span[span.length - 1] as Sample).powerT),
    );
    expect(Math.abs(integralJ - truthJ)).toBeLessThanOrEqual(boundJ + 1e-3);

    // The counter steps every 10 ms. The estimate is from above: never below the step (less the
    // few µs a read takes), about one 10 ms period over it.
    expect(snap.counterStepNs).toBeGreaterThanOrEqual(10e6 - 100e3);
    expect(snap.counterStepNs).toBeLessThan(35e6);
  });

  it("samples a device without a counter: power only, energy NaN, from nvmlDeviceGetPowerUsage", async () => {
    const s = open(1, 10);
    const snap = await samplesPast(s, sc.nowMs() + 100);
    s.release();
    expect(snap.counter).toBe(0);
    expect(snap.powerSource).toBe(2);
    expect(snap.state).toBe(1);
    expect(snap.samples.length).toBeGreaterThan(3);
    for (const x of snap.samples) {
      expect(x.flags).toBe(b.flags.POWER_OK);
      expect(x.energyMj).toBeNaN();
      expect(x.powerMw).toBe(75_000);
      expect(x.error).toBe(0);
    }
    const first = snap.samples[0];
    const last = snap.samples[snap.samples.length - 1];
    if (!first || !last) throw new Error("no samples");
    // The integral stamps each power read on its own, a few µs from the tick's stamp.
    expect((last.integralMj - first.integralMj) / 1000).toBeCloseTo(
      sc.energyJ(1, at(s, first.t), at(s, last.t)),
      2,
    );
  });

  it("flags reads that fail after a GPU is lost, and counts the faults", async () => {
    const lostAt = sc.nowMs() + 250;
    sc.update({
      devices: [
        { power: 200, errors: [{ fromMs: lostAt, code: NVML.ERROR_GPU_IS_LOST }] },
        NO_COUNTER,
        NO_HANDLE,
      ],
    });
    const s = open(0, 10);
    const snap = await samplesPast(s, lostAt + 150);
    s.release();
    let faults = 0;
    let before = 0;
    let after = 0;
    for (const x of snap.samples) {
      const ms = sc.msAt(at(s, x.t));
      if ((x.flags & FAULTS()) !== 0) faults++;
      expect(x.faults).toBe(faults);
      if (ms < lostAt - 2) {
        before++;
        expect(x.flags).toBe(b.flags.ENERGY_OK | b.flags.POWER_OK);
        expect(x.error).toBe(0);
      } else if (ms > lostAt + 2) {
        after++;
        expect(x.flags).toBe(b.flags.READ_FAILED);
        expect(x.error).toBe(15);
        expect(x.energyMj).toBeNaN();
        expect(x.powerMw).toBeNaN();
      }
    }
    expect(before).toBeGreaterThan(5);
    expect(after).toBeGreaterThan(5);
    expect(snap.lastError).toBe(15);
    expect(snap.state).toBe(1);
  });

  it("flags a counter that jumps and one that goes backwards, once each", async () => {
    const now = sc.nowMs();
    const jumpAt = now + 200;
    const backAt = now + 400;
    sc.update({
      devices: [
        {
          power: 300,
          counterJumps: [
            { tMs: jumpAt, deltaMj: 40_000_000 },
            { tMs: backAt, deltaMj: -60_000_000 },
          ],
        },
        NO_COUNTER,
        NO_HANDLE,
      ],
    });
    const s = open(0, 10);
    const snap = await samplesPast(s, backAt + 150);
    s.release();
    const jumps = snap.samples.filter((x) => (x.flags & b.flags.COUNTER_JUMP) !== 0);
    const backs = snap.samples.filter((x) => (x.flags & b.flags.COUNTER_BACKWARDS) !== 0);
    expect(jumps).toHaveLength(1);
    expect(backs).toHaveLength(1);
    const [jump] = jumps;
    const [back] = backs;
    if (!jump || !back) throw new Error("unreachable");
    // Flagged where the counter really moved: the first reads past each event's step.
    expect(sc.msAt(at(s, jump.t))).toBeGreaterThanOrEqual(jumpAt - 2);
    expect(sc.msAt(at(s, jump.t))).toBeLessThan(jumpAt + 30);
    expect(sc.msAt(at(s, back.t))).toBeGreaterThanOrEqual(backAt - 2);
    expect(sc.msAt(at(s, back.t))).toBeLessThan(backAt + 30);
    expect(snap.samples[snap.samples.length - 1]?.faults).toBe(2);
    // The energy column keeps the counter's values, the jumps included.
    const lo = Number(sc.counterMj(0, at(s, jump.t) - 2_000_000n));
    const hi = Number(sc.counterMj(0, at(s, jump.t) + 2_000_000n));
    expect(jump.energyMj).toBeGreaterThanOrEqual(lo);
    expect(jump.energyMj).toBeLessThanOrEqual(hi);
  });

  it("runs at the shortest period any live reference asks for", async () => {
    sc.update({ devices: [{}, NO_COUNTER, NO_HANDLE] });
    const a = open(0, 50);
    // Its first 250 ms it ticks every 2 ms (learning the counter's cadence), then at the period.
    await samplesPast(a, sc.nowMs() + 120);
    expect(mean(intervalsMs(snapshot(a).samples.slice(1)))).toBeLessThan(5);
    await pastLearning(a);
    await samplesPast(a, sc.nowMs() + 300);
    let snap = snapshot(a);
    expect(snap.periodNs).toBe(50e6);
    // Ticks are dithered (0.618 or 1.618 periods apart, so that the reads fall at every offset from
    // the counter's updates): the mean interval is the period, and both spacings occur.
    const gaps = intervalsMs(snap.samples.filter((x) => x.t > LEARNING_NS + 5e6));
    expect(mean(gaps)).toBeGreaterThan(40);
    expect(mean(gaps)).toBeLessThan(70);
    expect(gaps.some((g) => g < 40)).toBe(true);
    expect(gaps.some((g) => g > 70)).toBe(true);

    const b2 = open(0, 10);
    expect(b2.epochNs).toBe(a.epochNs); // the same thread and ring
    await waitFor("period 10 ms", () => snapshot(a).periodNs === 10e6);
    const from = snapshot(a).head;
    await samplesPast(a, sc.nowMs() + 300);
    snap = snapshot(a);
    expect(mean(intervalsMs(snap.samples.filter((x) => x.k > from)))).toBeLessThan(15);

    b2.release();
    b2.release(); // idempotent
    await waitFor("period back to 50 ms", () => snapshot(a).periodNs === 50e6);
    a.setPeriod(0); // clamped to 1 ms
    await waitFor("period 1 ms", () => snapshot(a).periodNs === 1e6);
    a.setPeriod(60_000); // clamped to 1000 ms
    await waitFor("period 1000 ms", () => snapshot(a).periodNs === 1000e6);
    expect(() => a.setPeriod("10" as unknown as number)).toThrow(TypeError);
    a.release();
    await waitFor("the thread to stop", () => snapshot(a).state === 3 && b.samplerThreads() === 0);
  });

  it("reads at once when woken with a read, and rings its doorbell once per wake after the sample", async () => {
    sc.update({ devices: [{}, NO_COUNTER, NO_HANDLE] });
    // A 1 s period: any sample within the next few hundred ms is a read asked for, not a tick.
    const s = open(0, 1000);
    await pastLearning(s);
    const rings: { head: number; tNs: bigint }[] = [];
    s.doorbell(() => rings.push({ head: snapshot(s).head, tNs: process.hrtime.bigint() }));
    const before = snapshot(s).head;
    const asked = process.hrtime.bigint();
    s.wake(true);
    await waitFor("the doorbell", () => rings.length > 0, 500);
    await new Promise((done) => setTimeout(done, 50));
    const snap = snapshot(s);
    expect(rings).toHaveLength(1);
    // The ring came after a sample written after the wake: its stamp is later than the ask.
    expect(rings[0]?.head).toBeGreaterThan(before);
    const read = snap.samples.find((x) => x.k === before);
    expect(read).toBeDefined();
    expect(at(s, read?.t ?? 0) > asked).toBe(true);
    expect(snap.head).toBe(before + 1);

    // Armed without a read: it rings after the next sample, here the next periodic one.
    s.wake(false);
    await new Promise((done) => setTimeout(done, 100));
    expect(rings).toHaveLength(1);
    await waitFor("the periodic sample's ring", () => rings.length === 2, 3000);
    expect(rings[1]?.head).toBeGreaterThan(before + 1);

    // Reads asked in a burst are at least a quarter of the period apart (here clamped to 2.5 ms),
    // whatever the number of asks, and the doorbell rings at most once per sample.
    const from = snapshot(s).head;
    const rungBefore = rings.length;
    for (let i = 0; i < 200; i++) {
      s.wake(true);
      if (i % 10 === 0) await new Promise((done) => setImmediate(done));
    }
    await new Promise((done) => setTimeout(done, 50));
    const burst = snapshot(s).samples.filter((x) => x.k >= from);
    expect(burst.length).toBeGreaterThan(0);
    expect(burst.length).toBeLessThan(200);
    for (const gap of intervalsMs(burst)) expect(gap).toBeGreaterThanOrEqual(2.4);
    expect(rings.length - rungBefore).toBeGreaterThan(0);
    expect(rings.length - rungBefore).toBeLessThanOrEqual(burst.length);

    expect(() => s.doorbell("no" as unknown as () => void)).toThrow(TypeError);
    s.release();
    // After release the doorbell never rings, even when woken.
    const rung = rings.length;
    s.wake(true);
    await new Promise((done) => setTimeout(done, 100));
    expect(rings).toHaveLength(rung);
    await waitFor("the thread to stop", () => b.samplerThreads() === 0);
  });

  it("armed for the counter only, rings after the first sample whose counter read changed", async () => {
    // A counter updating every 100 ms, read every 10 ms: most samples repeat the value before.
    sc.update({ devices: [{ counterStepMs: 100, power: 200 }, NO_COUNTER, NO_HANDLE] });
    const s = open(0, 10);
    await pastLearning(s);
    let quiet = 0;
    for (let round = 0; round < 3; round++) {
      const rings: number[] = [];
      s.doorbell(() => rings.push(snapshot(s).head));
      const armedAt = snapshot(s).head;
      s.wake(false, true);
      await waitFor("the counter's ring", () => rings.length > 0, 1000);
      await new Promise((done) => setTimeout(done, 30));
      expect(rings).toHaveLength(1);
      const samples = snapshot(s).samples;
      const energy = (k: number) => samples.find((x) => x.k === k)?.energyMj ?? Number.NaN;
      const rungAt = rings[0] as number;
      // The newest sample when it rang changed the counter; none written between the arming and
      // it did: they rang nobody (a 100 ms step at 10 ms reads leaves several).
      expect(energy(rungAt - 1)).not.toBe(energy(rungAt - 2));
      for (let k = armedAt; k < rungAt - 1; k++) expect(energy(k), `sample ${k}`).toBe(energy(k - 1));
      quiet += Math.max(0, rungAt - 1 - armedAt);
    }
    expect(quiet).toBeGreaterThan(3);
    // Armed as before (no counterOnly): it rings after the very next sample, changed or not.
    const rings: number[] = [];
    s.doorbell(() => rings.push(snapshot(s).head));
    const armedAt = snapshot(s).head;
    s.wake(false);
    await waitFor("the next sample's ring", () => rings.length > 0, 1000);
    expect(rings[0]).toBeLessThanOrEqual(armedAt + 2);
    s.release();
    await waitFor("the thread to stop", () => b.samplerThreads() === 0);
  });

  it("never blocks the JS thread on NVML: open, setPeriod and release with 20 ms calls", async () => {
    sc.update({ latencyUs: 20_000, devices: [{}, NO_COUNTER, NO_HANDLE] });
    const t0 = process.hrtime.bigint();
    const s = open(0, 10);
    const opened = process.hrtime.bigint() - t0;
    await waitFor("two samples", () => snapshot(s).head >= 2);
    const t1 = process.hrtime.bigint();
    s.setPeriod(20);
    const set = process.hrtime.bigint() - t1;
    const t2 = process.hrtime.bigint();
    s.release();
    const released = process.hrtime.bigint() - t2;
    expect(Number(opened) / 1e6).toBeLessThan(5);
    expect(Number(set) / 1e6).toBeLessThan(5);
    expect(Number(released) / 1e6).toBeLessThan(5);
    // The device reads run on the addon's own threads: the call returns a pending promise at once.
    const t3 = process.hrtime.bigint();
    const pending = b.deviceInfo(0);
    expect(Number(process.hrtime.bigint() - t3) / 1e6).toBeLessThan(5);
    expect((await pending).ok).toBe(true);
    // The thread finishes its call in progress, then stops; the buffer stays readable.
    await waitFor("the thread to stop", () => b.samplerThreads() === 0);
    expect(snapshot(s).state).toBe(3);
    sc.update({ devices: [{}, NO_COUNTER, NO_HANDLE] });
  });

  it("keeps trying a device whose reads all fail, more slowly, and resumes when it answers", async () => {
    const s = open(2, 10);
    await waitFor("the failed state", () => snapshot(s).state === 2 && snapshot(s).head >= 3);
    let snap = snapshot(s);
    expect(snap.lastError).toBe(NVML.ERROR_NO_PERMISSION);
    expect(snap.periodNs).toBe(100e6);
    for (const x of snap.samples) {
      expect(x.flags).toBe(0); // never read before, so not READ_FAILED either
      expect(x.error).toBe(NVML.ERROR_NO_PERMISSION);
      expect(x.faults).toBe(0);
      expect(x.energyMj).toBeNaN();
      expect(x.powerMw).toBeNaN();
    }
    expect(mean(intervalsMs(snap.samples))).toBeGreaterThan(80);

    sc.update({ devices: [{}, NO_COUNTER, {}] });
    await waitFor("the running state at the asked period", () => {
      snap = snapshot(s);
      return snap.state === 1 && snap.periodNs === 10e6;
    });
    s.release();
    const last = snap.samples[snap.samples.length - 1];
    expect(last?.flags).toBe(b.flags.ENERGY_OK | b.flags.POWER_OK);
    expect(last?.energyMj).toBe(Number(sc.counterMj(2, at(s, last?.t ?? 0))));
    sc.update({ devices: [{}, NO_COUNTER, NO_HANDLE] });
    // A released sampler's thread ends soon after, not within release(): the next test counts threads.
    await waitFor("the thread to stop", () => b.samplerThreads() === 0);
  });

  it("fails an absent device and bad arguments without starting a thread", () => {
    const missing = b.openSampler(3, 10);
    expect(missing.ok).toBe(false);
    expect(!missing.ok && missing.code).toBe("NVML_DEVICE_NOT_FOUND");
    expect(() => b.openSampler(-1, 10)).toThrow(TypeError);
    expect(() => b.openSampler(0, "x" as unknown as number)).toThrow(TypeError);
    expect(b.samplerThreads()).toBe(0);
  });
});
