/**
 * A synthetic card for accuracy runs: the NVML double's answers (test/fakes/scenario.ts
 * DeviceTruth, operation for operation as fake_nvml.c) read at the instants a sampling thread
 * would read them, written into a JsRing and measured by a RingTrack — without real time, so that
 * 10,000 windows take seconds. The tick schedule mirrors native/sampler.cc: a fixed period, the
 * counter read first (its midpoint stamps the sample), then power.
 */
import { JsRing } from "../../src/ring/js-ring.js";
import { RingTrack } from "../../src/ring/ring-track.js";
import type { RingSource } from "../../src/track/ring.js";
import type { Edge } from "../../src/track/track.js";
import { ok } from "../../src/vocabulary/measurement.js";
import { type DeviceSpec, DeviceTruth } from "./scenario.js";

/** How the sampling thread reads the card. */
export interface SamplerModel {
  /** Period (ms; default 10). */
  readonly periodMs?: number;
  /**
   * Offsets of the ticks inside their period: "none" (every tick on the period's grid, as before),
   * or "golden" (tick k is late by frac(k × 0.618…) of a period, as native/sampler.cc does now).
   */
  readonly dither?: "none" | "golden";
  /** Largest scheduling latency added to a tick (µs; default 200), pseudo-random. */
  readonly latencyUs?: number;
  /** Duration of each NVML call (µs; default 30). */
  readonly readUs?: number;
  /**
   * Each edge asks for a read, as the native sampler does now: the thread reads about 50 µs after
   * the edge (never sooner than a quarter of its period, 0.5 to 2.5 ms, after its previous read
   * began), and its period counts from that read. Default false (periodic reads only).
   */
  readonly readsAtEdges?: boolean;
  /**
   * The card is read as AMD SMI reads an MI300X (native/amd_reads.cc): the counter in 2^-16 J
   * counts, instantaneous power in whole watts (the ring's power quantum 1 W). Default false.
   */
  readonly amd?: boolean;
}

/** How long after an edge the thread asked for a read starts it (ns). */
const WAKE_NS = 50e3;

const GOLDEN = 0.6180339887498949;
/** A new sampler's first ticks come at most this often (native/sampler.h kLearningPeriodMs, kLearningMs). */
const LEARNING_PERIOD_NS = 2e6;
const LEARNING_NS = 250e6;
const EPOCH = 1_000_000_000n;

/** A deterministic pseudo-random number in [0, 1) for integer n (splitmix-like). */
export function hash01(n: number, salt = 0): number {
  let x = (Math.imul(n ^ (salt * 0x9e3779b9), 0x85ebca6b) ^ (n >>> 13)) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0xc2b2ae35) >>> 0;
  x = (x ^ (x >>> 15)) >>> 0;
  return x / 4294967296;
}

export class SyntheticCard {
  readonly truth: DeviceTruth;
  readonly ring: JsRing;
  readonly track: RingTrack;
  private readonly periodNs: number;
  private readonly dither: boolean;
  private readonly latencyNs: number;
  private readonly readNs: number;
  private readonly readsAtEdges: boolean;
  private readonly amd: boolean;
  /** Next tick to write, when it starts, and where the period counts from. */
  private k = 0;
  private nextStart = 0;
  private scheduled = 0;
  /** A read asked for by an edge (start, ns from t0), or NaN. */
  private asked = Number.NaN;
  private lastStart = Number.NEGATIVE_INFINITY;
  /** Stamp of the newest sample written (ns from t0). */
  private lastT = Number.NEGATIVE_INFINITY;
  private now = EPOCH;

  constructor(device: DeviceSpec, sampler: SamplerModel = {}) {
    // Real sensors' readings differ from one refresh to the next: ± 0.5 W unless the device says.
    this.truth = new DeviceTruth({ powerNoiseW: 0.5, ...device });
    this.periodNs = (sampler.periodMs ?? 10) * 1e6;
    this.dither = (sampler.dither ?? "none") === "golden";
    this.latencyNs = (sampler.latencyUs ?? 200) * 1e3;
    this.readNs = (sampler.readUs ?? 30) * 1e3;
    this.readsAtEdges = sampler.readsAtEdges ?? false;
    this.amd = sampler.amd ?? false;
    this.nextStart = this.periodicStart(0);
    const powerQuantumMw = this.amd ? 1000 : 1;
    this.ring = new JsRing({ epochNs: EPOCH, periodNs: this.periodNs, capacity: 16384, powerQuantumMw });
    const counter = device.counter ?? true;
    const source: RingSource = {
      column: counter ? "energy" : "integral",
      averagedPower: this.truth.averagedOnly,
      averagedPowerSource: "nvmlDeviceGetPowerUsage",
      open: () => ok(this.ring),
      setPeriod: () => {},
      close: () => {},
      describeError: (code) => `error ${code}`,
    };
    const backend = this.amd
      ? counter
        ? "amdsmi_counter"
        : "amdsmi_sampler"
      : counter
        ? "nvml_counter"
        : "nvml_sampler";
    this.track = new RingTrack(backend, source, () => this.now);
    this.track.retain(this.periodNs / 1e6);
  }

  /** The period in force after `scheduled` (ns): a new sampler's first ticks come faster (sampler.h). */
  private period(): number {
    return this.scheduled < LEARNING_NS ? Math.min(this.periodNs, LEARNING_PERIOD_NS) : this.periodNs;
  }

  /** When periodic tick k starts (ns from t0), the period counted from `scheduled`. */
  private periodicStart(k: number): number {
    const period = this.period();
    const grid = k === 0 ? 0 : this.scheduled + period;
    const dither = this.dither ? ((k * GOLDEN) % 1) * period : 0;
    return grid + dither + hash01(k, 1) * this.latencyNs;
  }

  /** The least gap between the start of a read and of a read asked for after it (ns). */
  private minReadGapNs(): number {
    return Math.min(2.5e6, Math.max(0.5e6, this.period() / 4));
  }

  /** When the next tick starts: a read asked for when it comes first, else the periodic one. */
  private upcoming(): number {
    return Number.isNaN(this.asked) ? this.nextStart : Math.min(this.asked, this.nextStart);
  }

  /** Writes the next tick and schedules the one after (as native/sampler.cc Run does). */
  private tick(): number {
    // A thread cannot begin a read before its previous one ended.
    const start = Math.max(this.upcoming(), this.lastStart + 2 * this.readNs);
    const askedRead = !Number.isNaN(this.asked) && this.asked <= this.nextStart;
    this.writeTick(this.k, start);
    this.k += 1;
    this.lastStart = start;
    if (askedRead) {
      this.asked = Number.NaN;
      this.scheduled = start;
    } else {
      this.scheduled = this.k === 1 ? 0 : this.scheduled + this.period();
      // A read still asked for comes at least the least gap after this one.
      if (!Number.isNaN(this.asked)) this.asked = Math.max(this.asked, start + this.minReadGapNs());
    }
    this.nextStart = this.periodicStart(this.k);
    return start + 2 * this.readNs;
  }

  /** Writes every sample written by `relNs` (ns from t0). */
  advanceTo(relNs: number): void {
    while (this.upcoming() + 2 * this.readNs <= relNs) this.tick();
    this.now = EPOCH + BigInt(Math.round(relNs));
  }

  /** Writes the next sample, whenever it comes. */
  advanceOne(): void {
    const end = this.tick();
    const endNs = EPOCH + BigInt(Math.round(end));
    if (endNs > this.now) this.now = endNs;
  }

  /** Stamp (ns from t0) of the newest sample written: an edge before it can be evaluated. */
  lastSampleT(): number {
    return this.lastT;
  }

  /** ns from t0 at which the next sample will have been written. */
  nextSampleAt(): number {
    return this.upcoming() + 2 * this.readNs;
  }

  private writeTick(k: number, start: number): void {
    const r = this.readNs;
    this.lastT = start + r / 2;
    // Each value belongs to some instant inside its call.
    const counterAt = start + hash01(k, 2) * r;
    const counter = this.amd ? this.truth.amdCounterMj(counterAt) : this.truth.counterMj(counterAt);
    const mw = this.truth.sampledPowerMw(start + r + hash01(k, 3) * r);
    const power = this.amd && mw !== null ? Math.round(mw / 1000) * 1000 : mw;
    this.ring.push(
      EPOCH + BigInt(Math.round(start + r / 2)),
      counter ?? Number.NaN,
      power ?? Number.NaN,
      0,
      r,
      EPOCH + BigInt(Math.round(start + 1.5 * r)),
      r,
    );
  }

  /** Takes an edge at `relNs` (ns from t0), after writing every sample written by then. */
  edgeAt(relNs: number): Edge {
    this.advanceTo(relNs);
    const edge = this.track.edge();
    if (this.readsAtEdges && Number.isNaN(this.asked)) {
      // A read in progress may have begun before the edge: the one asked for begins after it.
      this.asked = Math.max(relNs + WAKE_NS, this.lastStart + this.minReadGapNs());
    }
    return edge;
  }

  /** ns from t0 of an edge. */
  rel(edge: Edge): number {
    return Number(edge.tNs - EPOCH);
  }
}
