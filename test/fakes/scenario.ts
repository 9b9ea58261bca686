/**
 * The TypeScript side of the test doubles: writes the scenario file that scripts
 * `libnvidia-ml.so.1` (test/fakes/nvml/fake_nvml.c) and the `nvidia-smi` stand-in, and computes
 * the same ground truth the double serves (test/fakes/SCENARIO.md).
 *
 * ```ts
 * const sc = writeScenario({
 *   devices: [{ power: [[0, 100], [500, 100], [500, 300]], procs: [{ pid: 4242, usedMib: 1024, name: "vllm" }] }],
 * });
 * const child = spawn(process.execPath, ["server.js"], { env: { ...process.env, ...sc.env() } });
 * // … later, with two CLOCK_MONOTONIC instants (process.hrtime.bigint()):
 * expect(measuredJ).toBeCloseTo(sc.energyJ(0, fromNs, toNs), 1);
 * sc.remove();
 * ```
 *
 * Every computation here mirrors fake_nvml.c operation for operation (same IEEE doubles, same
 * integer flooring of time), so `counterMj` and `powerUsageW` give exactly what the double answers.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, isAbsolute, join } from "node:path";
import { FAKE_NVML, FAKE_SMI_BIN, ROOT } from "./paths.js";

/** nvmlReturn_t values (nvml-facts.md §1.3) for `initError`, `errors` and `handleError`. */
export const NVML = {
  SUCCESS: 0,
  ERROR_UNINITIALIZED: 1,
  ERROR_INVALID_ARGUMENT: 2,
  ERROR_NOT_SUPPORTED: 3,
  ERROR_NO_PERMISSION: 4,
  ERROR_NOT_FOUND: 6,
  ERROR_INSUFFICIENT_SIZE: 7,
  ERROR_DRIVER_NOT_LOADED: 9,
  ERROR_TIMEOUT: 10,
  ERROR_LIBRARY_NOT_FOUND: 12,
  ERROR_FUNCTION_NOT_FOUND: 13,
  ERROR_GPU_IS_LOST: 15,
  ERROR_RESET_REQUIRED: 16,
  ERROR_LIB_RM_VERSION_MISMATCH: 18,
  ERROR_UNKNOWN: 999,
} as const;

/** One breakpoint of the piecewise-linear power: `[t_ms from t0, watts]`. */
export type PowerPoint = readonly [tMs: number, watts: number];

/** A compute process resident on a device during `[fromMs, untilMs)` (default: always). */
export interface ProcSpec {
  readonly pid: number;
  /** MiB of device memory; `"na"` is NVML_VALUE_NOT_AVAILABLE (ULLONG_MAX), as under WDDM. */
  readonly usedMib: number | "na";
  /** The process name (what nvmlSystemGetProcessName answers). */
  readonly name: string;
  readonly fromMs?: number;
  readonly untilMs?: number;
  /** The MIG slice it runs on (its GPU and compute instance ids; the card must be in MIG mode). */
  readonly gi?: number;
  readonly ci?: number;
}

/** A MIG device (slice) of a card with `mig: 1` (test/fakes/nvml/fake_nvml_mig.c). */
export interface SliceSpec {
  readonly gi: number;
  readonly ci: number;
  /** Its GPU instance's slices of the card (a 3g profile: 3). */
  readonly slices: number;
  /** Default `MIG-<card index, 8 digits>-0000-4000-8000-<gi×100+ci, 12 digits>`. */
  readonly uuid?: string;
  /** Default `<slices>g.<memory GiB>gb`; the name is the card's and " MIG <profile>". */
  readonly profile?: string;
  /** Default 10,240 MiB per slice. */
  readonly memTotalMib?: number;
  readonly memUsedMib?: number;
  /** Gone from then on (MIG reconfigured). */
  readonly untilMs?: number;
}

/** The UUID the double gives a slice declared without one. */
export function sliceUuid(cardIndex: number, gi: number, ci: number): string {
  return `MIG-${String(cardIndex).padStart(8, "0")}-0000-4000-8000-${String(gi * 100 + ci).padStart(12, "0")}`;
}

/** From t0 + fromMs on, device calls (or calls of `fn` and its `_vN` versions) return `code`. */
export interface ErrorSpec {
  readonly fromMs: number;
  readonly code: number;
  readonly fn?: string;
}

/** The energy counter jumps by `deltaMj` at `tMs` (negative: goes back, as after a reload). */
export interface JumpSpec {
  readonly tMs: number;
  readonly deltaMj: number | bigint;
}

/** One device; every field is optional and defaults as in SCENARIO.md. */
export interface DeviceSpec {
  readonly name?: string;
  readonly uuid?: string;
  /** Piecewise-linear power (W): a constant, or breakpoints. Default: a constant 50 W. */
  readonly power?: number | readonly PowerPoint[];
  /** nvmlDeviceGetTotalEnergyConsumption and fields 83/191 answer (default true). */
  readonly counter?: boolean;
  /** The counter changes only at multiples of this (ms from t0; default 10; 0: continuous). */
  readonly counterStepMs?: number;
  /**
   * Each update of the counter comes late by a pseudo-random share of this (ms; default 0, an
   * exactly regular cadence; must stay below counterStepMs): an irregular cadence.
   */
  readonly counterJitterMs?: number;
  /** Counter value at t0, mJ (default 1 000 000). */
  readonly energyOffsetMj?: number | bigint;
  /**
   * The sensor family of real cards (synthetic card only: the C double refuses them). Each update
   * of the counter lands up to ± this (ms) off its nominal instant, pseudo-randomly (default 0).
   */
  readonly counterWanderMs?: number;
  /** Synthetic only: the card's clock runs this many ppm fast (+) or slow (−) against the host's. */
  readonly counterDriftPpm?: number;
  /** Synthetic only: from each `[atMs, stepMs]` on, the counter updates every stepMs (a cadence change). */
  readonly counterCadence?: readonly (readonly [atMs: number, stepMs: number])[];
  /**
   * Synthetic only: each instantaneous reading (field 186, held powerUpdateMs) is the mean power
   * over this share of its hold before its refresh (A100/H100: 0.25); default 0, a point sample.
   */
  readonly powerAvgShare?: number;
  /** What nvmlDeviceGetPowerUsage returns (default "average", as on Ampere+ cards). */
  readonly powerMode?: "average" | "instant";
  /** The averaging window (default 1000 ms). */
  readonly avgWindowMs?: number;
  /** Field 186 answers with instantaneous power (default true). */
  readonly instantField?: boolean;
  /** Power readings only change at multiples of this (default 0: continuous). */
  readonly powerUpdateMs?: number;
  /** The power readings are this many times the power drawn (the counter and the truth are not). */
  readonly sensorGain?: number;
  /**
   * Field 186's readings carry up to ± this much noise (W; default 0), new at every refresh: a
   * sensor that refreshes at every read shows it does.
   */
  readonly powerNoiseW?: number;
  /** nvmlDeviceGetPowerUsage answers (default true). */
  readonly powerSupported?: boolean;
  /** Both memory APIs answer (default true; false: unified memory, NOT_SUPPORTED). */
  readonly memSupported?: boolean;
  readonly memTotalMib?: number;
  readonly memUsedMib?: number;
  /** Reserved memory: in v1 `used`, separate in v2 (default 0). */
  readonly memReservedMib?: number;
  /** Utilization answers (default true; false: NOT_SUPPORTED, as on MIG parents). */
  readonly utilSupported?: boolean;
  readonly utilGpu?: number;
  readonly utilMem?: number;
  /** nvmlDeviceGetHandleByIndex* returns this code for the device (default 0). */
  readonly handleError?: number;
  /** Power limits in W (default 700; enforced defaults to the management limit). */
  readonly powerLimitW?: number;
  readonly enforcedLimitW?: number;
  readonly procs?: readonly ProcSpec[];
  readonly errors?: readonly ErrorSpec[];
  readonly counterJumps?: readonly JumpSpec[];
  /** MIG mode: -1 not supported (a pre-Ampere card), 0 off (default), 1 on. */
  readonly mig?: -1 | 0 | 1;
  /** nvmlDeviceGetMaxMigDeviceCount: the card's slices (default 7). */
  readonly migSlots?: number;
  readonly slices?: readonly SliceSpec[];
  /** AMD double: which socket power fields answer (default "current", as on MI300). */
  readonly amdPower?: "current" | "average" | "both";
  /** AMD double: the counter resolution the library reports (µJ; default 15.3). */
  readonly counterResolutionUj?: number;
  /** AMD double: the counter counts this many times the energy (default 1; 0: frozen). */
  readonly counterRate?: number;
  /** AMD double: the counter also counts this device's energy (an MI250 die that reports both). */
  readonly energyOf?: number;
  /** AMD double: the socket this device is a partition of (default: its own). */
  readonly socket?: number;
}

export interface LatencySpec {
  readonly us: number;
  /** Only calls of this symbol (and its `_vN` versions); otherwise every call. */
  readonly fn?: string;
}

export interface ScenarioSpec {
  /** CLOCK_MONOTONIC origin of every time (default: `process.hrtime.bigint()` when written). */
  readonly t0Ns?: bigint;
  readonly driverVersion?: string;
  /** nvmlInit* return this NVML code (e.g. NVML.ERROR_DRIVER_NOT_LOADED). */
  readonly initError?: number;
  /** Every call sleeps this many µs first (shorthand for `latency: [{ us }]`). */
  readonly latencyUs?: number;
  readonly latency?: readonly LatencySpec[];
  /** Every NVML call appends its symbol name and a newline to this file. */
  readonly callsFile?: string;
  /**
   * Each `callsFile` line also gives the calling thread's id (`<symbol> <tid>`), so a test can
   * tell calls made on its JS thread (tid = process.pid) from the sampler's and the thread pool's.
   */
  readonly callsTid?: boolean;
  /** Devices in index order (default: one device with every default). At most 16. */
  readonly devices?: readonly DeviceSpec[];
  /** AMD double: the library's major version (default 26; 24 answers with ROCm 6's layouts). */
  readonly libMajor?: number;
}

/** A device with its defaults filled in: what the double uses. */
interface ResolvedDevice {
  readonly pts: readonly PowerPoint[];
  readonly cum: readonly number[];
  readonly counter: boolean;
  readonly counterStepMs: number;
  readonly counterJitterMs: number;
  readonly energyOffsetMj: bigint;
  readonly average: boolean;
  readonly avgWindowMs: number;
  readonly instantField: boolean;
  readonly powerUpdateMs: number;
  readonly sensorGain: number;
  readonly powerNoiseW: number;
  readonly powerSupported: boolean;
  readonly jumps: readonly { tMs: number; deltaMj: bigint }[];
  /** The counter's update instants (ms), where the spec asks for more than the C double models. */
  readonly updates: Float64Array | null;
  readonly powerAvgShare: number;
}

const MAX_DEVICES = 16;

function quoteValue(key: string, v: string): string {
  if (v.includes('"') || v.includes("\n")) throw new Error(`scenario: ${key} must not hold " or a newline`);
  return /[\s#]/.test(v) || v === "" ? `"${v}"` : v;
}

function num(key: string, v: number): string {
  if (!Number.isFinite(v)) throw new Error(`scenario: ${key} must be a finite number, got ${v}`);
  return String(v);
}

function powerPoints(p: DeviceSpec["power"]): readonly PowerPoint[] {
  if (p === undefined) return [[0, 50]];
  if (typeof p === "number") return [[0, p]];
  if (p.length === 0) throw new Error("scenario: power needs at least one point");
  for (let i = 1; i < p.length; i++) {
    const a = p[i - 1];
    const b = p[i];
    if (a && b && b[0] < a[0]) throw new Error(`scenario: power points go back in time at ${b[0]} ms`);
  }
  return p;
}

function resolve(d: DeviceSpec): ResolvedDevice {
  const pts = powerPoints(d.power);
  const cum: number[] = [0];
  for (let i = 1; i < pts.length; i++) {
    const a = pts[i - 1] as PowerPoint;
    const b = pts[i] as PowerPoint;
    cum.push((cum[i - 1] as number) + ((b[0] - a[0]) * (b[1] + a[1])) / 2);
  }
  return {
    pts,
    cum,
    counter: d.counter ?? true,
    counterStepMs: d.counterStepMs ?? 10,
    counterJitterMs: d.counterJitterMs ?? 0,
    energyOffsetMj: BigInt(d.energyOffsetMj ?? 1_000_000),
    average: (d.powerMode ?? "average") === "average",
    avgWindowMs: d.avgWindowMs ?? 1000,
    instantField: d.instantField ?? true,
    powerUpdateMs: d.powerUpdateMs ?? 0,
    sensorGain: d.sensorGain ?? 1,
    powerNoiseW: d.powerNoiseW ?? 0,
    powerSupported: d.powerSupported ?? true,
    jumps: (d.counterJumps ?? []).map((j) => ({ tMs: j.tMs, deltaMj: BigInt(j.deltaMj) })),
    updates: updateSchedule(d, pts),
    powerAvgShare: d.powerAvgShare ?? 0,
  };
}

/** The keys only the synthetic card models: a scenario file for the C double refuses them. */
const SYNTHETIC_ONLY = ["counterWanderMs", "counterDriftPpm", "counterCadence", "powerAvgShare"] as const;

/**
 * Every update instant of a counter that wanders, drifts or changes cadence (ms from t0), up to
 * 30 s past the trace's last point; null for the C double's own grid (counterStepMs, jitter).
 */
function updateSchedule(d: DeviceSpec, pts: readonly PowerPoint[]): Float64Array | null {
  if (d.counterWanderMs === undefined && d.counterDriftPpm === undefined && d.counterCadence === undefined)
    return null;
  const cadence = [[0, d.counterStepMs ?? 10] as const, ...(d.counterCadence ?? [])];
  const wander = d.counterWanderMs ?? 0;
  const scale = 1 + (d.counterDriftPpm ?? 0) * 1e-6;
  const end = Math.max(60_000, (pts[pts.length - 1] as PowerPoint)[0] + 30_000);
  const out: number[] = [];
  let nominal = 0;
  let prev = Number.NEGATIVE_INFINITY;
  let c = 0;
  for (let j = 0; nominal * scale < end; j++) {
    while (c + 1 < cadence.length && ((cadence[c + 1] as readonly number[])[0] as number) <= nominal * scale)
      c++;
    const step = (cadence[c] as readonly number[])[1] as number;
    if (!(step > 0)) throw new Error("scenario: counter steps must be > 0 ms");
    if (!(wander < step / 2)) throw new Error("scenario: counterWanderMs must stay below half a step");
    const u = j === 0 ? 0 : nominal * scale + wander * (2 * jitter01(BigInt(j)) - 1);
    prev = Math.max(u, prev + 1e-3);
    out.push(prev);
    nominal += step;
  }
  return Float64Array.from(out);
}

/** The last of `updates` at or before `t` (ms), or −∞. */
function lastUpdate(updates: Float64Array, t: number): number {
  let lo = 0;
  let hi = updates.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((updates[mid] as number) <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? Number.NEGATIVE_INFINITY : (updates[lo - 1] as number);
}

/** Renders a spec as the text of a scenario file. */
export function renderScenario(spec: ScenarioSpec, t0Ns: bigint): string {
  const out: string[] = ["# written by test/fakes/scenario.ts", `t0_ns ${t0Ns}`];
  if (spec.driverVersion !== undefined)
    out.push(`driver_version ${quoteValue("driverVersion", spec.driverVersion)}`);
  if (spec.initError !== undefined) out.push(`init_error ${Math.trunc(spec.initError)}`);
  if (spec.libMajor !== undefined) out.push(`lib_major ${Math.trunc(spec.libMajor)}`);
  if (spec.latencyUs !== undefined) out.push(`latency_us ${Math.trunc(spec.latencyUs)}`);
  for (const l of spec.latency ?? []) {
    out.push(`latency_us ${Math.trunc(l.us)}${l.fn ? ` fn=${l.fn}` : ""}`);
  }
  if (spec.callsFile !== undefined)
    out.push(`calls_file ${quoteValue("callsFile", spec.callsFile)}${spec.callsTid ? " tid=1" : ""}`);
  const devices = spec.devices ?? [{}];
  for (const d of devices)
    for (const k of SYNTHETIC_ONLY)
      if (d[k] !== undefined) throw new Error(`scenario: ${k} is modelled by the synthetic card only`);
  if (devices.length > MAX_DEVICES) throw new Error(`scenario: at most ${MAX_DEVICES} devices`);
  devices.forEach((d, i) => {
    const keys: string[] = [];
    const flag = (k: string, v: boolean | undefined) => {
      if (v !== undefined) keys.push(`${k}=${v ? 1 : 0}`);
    };
    const n = (k: string, v: number | undefined) => {
      if (v !== undefined) keys.push(`${k}=${num(k, v)}`);
    };
    if (d.name !== undefined) keys.push(`name=${quoteValue("name", d.name)}`);
    if (d.uuid !== undefined) keys.push(`uuid=${quoteValue("uuid", d.uuid)}`);
    flag("counter", d.counter);
    n("counter_step_ms", d.counterStepMs);
    n("counter_jitter_ms", d.counterJitterMs);
    if (d.energyOffsetMj !== undefined) keys.push(`energy_offset_mj=${BigInt(d.energyOffsetMj)}`);
    if (d.powerMode !== undefined) keys.push(`power_mode=${d.powerMode}`);
    n("avg_window_ms", d.avgWindowMs);
    flag("instant_field", d.instantField);
    n("power_update_ms", d.powerUpdateMs);
    n("sensor_gain", d.sensorGain);
    n("power_noise_w", d.powerNoiseW);
    flag("power", d.powerSupported);
    flag("mem", d.memSupported);
    n("mem_total_mib", d.memTotalMib);
    n("mem_used_mib", d.memUsedMib);
    n("mem_reserved_mib", d.memReservedMib);
    flag("util", d.utilSupported);
    n("util_gpu", d.utilGpu);
    n("util_mem", d.utilMem);
    n("handle_error", d.handleError);
    n("power_limit_w", d.powerLimitW);
    n("enforced_limit_w", d.enforcedLimitW);
    n("mig", d.mig);
    n("mig_slots", d.migSlots);
    if (d.amdPower !== undefined) keys.push(`amd_power=${d.amdPower}`);
    n("counter_resolution_uj", d.counterResolutionUj);
    n("counter_rate", d.counterRate);
    n("energy_of", d.energyOf);
    n("socket", d.socket);
    out.push(`device ${i}${keys.length ? ` ${keys.join(" ")}` : ""}`);
    const pts = powerPoints(d.power);
    out.push(`power ${i} ${pts.map(([t, w]) => `${num("power t", t)} ${num("power W", w)}`).join(" ")}`);
    for (const p of d.procs ?? []) {
      if (p.name.includes("\n")) throw new Error("scenario: a process name must not hold a newline");
      const used = p.usedMib === "na" ? "na" : num("usedMib", p.usedMib);
      const from = p.fromMs !== undefined ? ` from_ms=${num("fromMs", p.fromMs)}` : "";
      const until = p.untilMs !== undefined ? ` until_ms=${num("untilMs", p.untilMs)}` : "";
      const slice = p.gi !== undefined ? ` gi=${Math.trunc(p.gi)} ci=${Math.trunc(p.ci ?? 0)}` : "";
      out.push(`proc ${i} ${Math.trunc(p.pid)} ${used}${from}${until}${slice} ${p.name}`);
    }
    for (const sl of d.slices ?? []) {
      const keys = [`slice ${i} ${Math.trunc(sl.gi)} ${Math.trunc(sl.ci)} ${Math.trunc(sl.slices)}`];
      if (sl.uuid !== undefined) keys.push(`uuid=${quoteValue("uuid", sl.uuid)}`);
      if (sl.profile !== undefined) keys.push(`profile=${quoteValue("profile", sl.profile)}`);
      if (sl.memTotalMib !== undefined) keys.push(`mem_total_mib=${num("memTotalMib", sl.memTotalMib)}`);
      if (sl.memUsedMib !== undefined) keys.push(`mem_used_mib=${num("memUsedMib", sl.memUsedMib)}`);
      if (sl.untilMs !== undefined) keys.push(`until_ms=${num("untilMs", sl.untilMs)}`);
      out.push(keys.join(" "));
    }
    for (const e of d.errors ?? []) {
      out.push(`error ${i} ${num("fromMs", e.fromMs)} ${Math.trunc(e.code)}${e.fn ? ` fn=${e.fn}` : ""}`);
    }
    for (const j of d.counterJumps ?? []) {
      out.push(`counter_jump ${i} ${num("tMs", j.tMs)} ${BigInt(j.deltaMj)}`);
    }
  });
  return `${out.join("\n")}\n`;
}

/** `a` floored to a multiple of `b` (b > 0), for bigints (which divide toward zero). */
function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}

/** rel ns floored to a multiple of stepMs (0: unchanged), in ms; as floor_to_ms in the C. */
function floorToMs(relNs: bigint, stepMs: number): number {
  const stepNs = BigInt(Math.round(stepMs * 1e6));
  if (stepNs <= 0n) return Number(relNs) / 1e6;
  return Number(floorDiv(relNs, stepNs) * stepNs) / 1e6;
}

/** A pseudo-random number in [0, 1) for update j: jitter01 in fake_nvml.c, operation for operation. */
export function jitter01(j: bigint): number {
  let x = Math.imul(Number(BigInt.asUintN(32, j)), 2654435761) >>> 0;
  x = (x ^ (x >>> 16)) >>> 0;
  x = Math.imul(x, 0x85ebca6b) >>> 0;
  x = (x ^ (x >>> 13)) >>> 0;
  x = Math.imul(x, 0xc2b2ae35) >>> 0;
  x = (x ^ (x >>> 16)) >>> 0;
  return x / 4294967296;
}

/** The counter's last update at or before relNs, in ms (counter_update_ms in the C). */
function counterUpdateMs(d: ResolvedDevice, relNs: bigint): number {
  if (d.updates !== null) return lastUpdate(d.updates, Number(relNs) / 1e6);
  const stepNs = BigInt(Math.round(d.counterStepMs * 1e6));
  const jitterNs = Math.round(d.counterJitterMs * 1e6);
  if (stepNs <= 0n || jitterNs <= 0) return floorToMs(relNs, d.counterStepMs);
  let j = floorDiv(relNs, stepNs);
  let u = j * stepNs + BigInt(Math.round(jitter01(j) * jitterNs));
  if (u > relNs) {
    j -= 1n;
    u = j * stepNs + BigInt(Math.round(jitter01(j) * jitterNs));
  }
  return Number(u) / 1e6;
}

/** Index of the last breakpoint at or before t, for pts[0].t <= t < pts[last].t. */
function segment(pts: readonly PowerPoint[], t: number): number {
  let lo = 0;
  let hi = pts.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if ((pts[mid] as PowerPoint)[0] <= t) lo = mid;
    else hi = mid;
  }
  return lo;
}

function powerAt(d: ResolvedDevice, t: number): number {
  const p = d.pts;
  const first = p[0] as PowerPoint;
  const last = p[p.length - 1] as PowerPoint;
  if (t < first[0]) return first[1];
  if (t >= last[0]) return last[1];
  const lo = segment(p, t);
  const a = p[lo] as PowerPoint;
  const b = p[lo + 1] as PowerPoint;
  return a[1] + ((b[1] - a[1]) * (t - a[0])) / (b[0] - a[0]);
}

function prim(d: ResolvedDevice, t: number): number {
  const p = d.pts;
  const n = p.length;
  const first = p[0] as PowerPoint;
  const last = p[n - 1] as PowerPoint;
  if (t <= first[0]) return (t - first[0]) * first[1];
  if (t >= last[0]) return (d.cum[n - 1] as number) + (t - last[0]) * last[1];
  const lo = segment(p, t);
  const a = p[lo] as PowerPoint;
  return (d.cum[lo] as number) + ((t - a[0]) * (a[1] + powerAt(d, t))) / 2;
}

/** What the counter's jumps up to `ms` (from t0) added to it, mJ. */
function jumpsMj(d: ResolvedDevice, ms: number): bigint {
  let jumps = 0n;
  for (const j of d.jumps) if (j.tMs <= ms) jumps += j.deltaMj;
  return jumps;
}

/** Energy from t0 to t (ms from t0), in mJ (= W·ms). */
function energyMjAt(d: ResolvedDevice, t: number): number {
  return prim(d, t) - prim(d, 0);
}

/**
 * One device's ground truth without a file: what the double answers at an instant (ns from t0),
 * operation for operation as fake_nvml.c computes it. Tests and the accuracy harness
 * (test/fakes/synthetic.ts) sample it at the instants a sampling thread would read the card.
 */
export class DeviceTruth {
  private readonly d: ResolvedDevice;

  constructor(spec: DeviceSpec = {}) {
    this.d = resolve(spec);
  }

  /** Exact energy between two instants (ns from t0), J: the piecewise-linear power's integral. */
  energyJ(fromRelNs: number, toRelNs: number): number {
    return (energyMjAt(this.d, toRelNs / 1e6) - energyMjAt(this.d, fromRelNs / 1e6)) / 1000;
  }

  /** The true board power at an instant (ns from t0), W. */
  powerW(relNs: number): number {
    return powerAt(this.d, relNs / 1e6);
  }

  /**
   * What the counter would read at an instant (ns from t0) if it updated continuously (mJ, not
   * truncated): the exact cumulative energy an edge's fused value estimates; null without one.
   */
  cumulativeMj(relNs: number): number | null {
    const d = this.d;
    if (!d.counter) return null;
    return Number(d.energyOffsetMj + jumpsMj(d, relNs / 1e6)) + energyMjAt(d, relNs / 1e6);
  }

  /** The counter (mJ) as the double answers it at an instant (ns from t0); null without one. */
  counterMj(relNs: number): number | null {
    const d = this.d;
    if (!d.counter) return null;
    const s = counterUpdateMs(d, BigInt(Math.round(relNs)));
    const v = d.energyOffsetMj + BigInt(Math.trunc(energyMjAt(d, s))) + jumpsMj(d, s);
    return Number(v < 0n ? 0n : v);
  }

  /**
   * The counter as the libamd_smi double counts it (fake_amdsmi.c): 2^-16 J counts of the energy at
   * its last update, in mJ; null without one.
   */
  amdCounterMj(relNs: number): number | null {
    const d = this.d;
    if (!d.counter) return null;
    const s = counterUpdateMs(d, BigInt(Math.round(relNs)));
    const mj = Number(d.energyOffsetMj) + Number(jumpsMj(d, s)) + energyMjAt(d, s);
    return mj <= 0 ? 0 : Math.floor(mj * 65.536) / 65.536;
  }

  /** Field 186 (instantaneous power, held for power_update_ms) at an instant, mW; null without it. */
  instantMw(relNs: number): number | null {
    const d = this.d;
    if (!d.instantField) return null;
    const u = floorToMs(BigInt(Math.round(relNs)), d.powerUpdateMs);
    const span = d.powerAvgShare * d.powerUpdateMs;
    const w = span > 0 ? (energyMjAt(d, u) - energyMjAt(d, u - span)) / span : powerAt(d, u);
    const noise = d.powerNoiseW * (2 * jitter01(BigInt(Math.floor(u * 1000))) - 1);
    return toMw(d.sensorGain * w + noise);
  }

  /** nvmlDeviceGetPowerUsage at an instant, mW (averaged or instant by power_mode); null without it. */
  powerUsageMw(relNs: number): number | null {
    const d = this.d;
    if (!d.powerSupported) return null;
    const u = floorToMs(BigInt(Math.round(relNs)), d.powerUpdateMs);
    const w = d.average
      ? (energyMjAt(d, u) - energyMjAt(d, u - d.avgWindowMs)) / d.avgWindowMs
      : powerAt(d, u);
    return toMw(d.sensorGain * w);
  }

  /** The power the addon's sampler reads: field 186 where it answers, else GetPowerUsage (mW). */
  sampledPowerMw(relNs: number): number | null {
    return this.instantMw(relNs) ?? this.powerUsageMw(relNs);
  }

  /** The sampler reads averaged power only (no field 186, GetPowerUsage in average mode). */
  get averagedOnly(): boolean {
    return !this.d.instantField && this.d.average;
  }
}

/** A written scenario: its file, its clock origin, and its ground truth. */
export class Scenario {
  /** The scenario file (GIUL_FAKE_NVML_SCENARIO). */
  readonly path: string;
  /** The folder holding it (removed by {@link remove}). */
  readonly dir: string;
  private current: ScenarioSpec;
  private devs: readonly ResolvedDevice[];
  private origin: bigint;
  private serial = 0;

  constructor(spec: ScenarioSpec = {}, dir?: string) {
    this.dir = dir ?? mkdtempSync(join(tmpdir(), "giul-scenario-"));
    this.path = join(this.dir, "scenario.txt");
    this.current = spec;
    this.origin = spec.t0Ns ?? process.hrtime.bigint();
    this.devs = (spec.devices ?? [{}]).map(resolve);
    this.write();
  }

  /** CLOCK_MONOTONIC ns of the scenario's time 0. */
  get t0Ns(): bigint {
    return this.origin;
  }

  /** The spec now in the file. */
  get spec(): ScenarioSpec {
    return this.current;
  }

  /** Number of devices. */
  get deviceCount(): number {
    return this.devs.length;
  }

  /**
   * Replaces the scenario (atomically: temp file + rename, which the double notices on its next
   * call). `t0Ns` is kept unless the new spec gives one, so times stay on the same clock.
   */
  update(spec: ScenarioSpec): this {
    this.current = spec;
    if (spec.t0Ns !== undefined) this.origin = spec.t0Ns;
    this.devs = (spec.devices ?? [{}]).map(resolve);
    this.write();
    return this;
  }

  private write(): void {
    const text = renderScenario(this.current, this.origin);
    const tmp = join(this.dir, `.scenario.${process.pid}.${this.serial++}.tmp`);
    writeFileSync(tmp, text);
    renameSync(tmp, this.path);
  }

  private device(index: number): ResolvedDevice {
    const d = this.devs[index];
    if (!d) throw new Error(`scenario: no device ${index} (there are ${this.devs.length})`);
    return d;
  }

  /** The CLOCK_MONOTONIC instant `ms` milliseconds after t0. */
  at(ms: number): bigint {
    return this.origin + BigInt(Math.round(ms * 1e6));
  }

  /** Milliseconds from t0 of a CLOCK_MONOTONIC instant. */
  msAt(tNs: bigint): number {
    return Number(tNs - this.origin) / 1e6;
  }

  /** Milliseconds from t0 now. */
  nowMs(): number {
    return this.msAt(process.hrtime.bigint());
  }

  /**
   * Exact energy in joules of the piecewise-linear power between two CLOCK_MONOTONIC instants
   * (counter jumps and the counter's staircase excluded): the ground truth of a window.
   */
  energyJ(device: number, fromNs: bigint, toNs: bigint): number {
    const d = this.device(device);
    const a = Number(fromNs - this.origin) / 1e6;
    const b = Number(toNs - this.origin) / 1e6;
    return (energyMjAt(d, b) - energyMjAt(d, a)) / 1000;
  }

  /** Mean power in watts over a window: energyJ / seconds. */
  meanPowerW(device: number, fromNs: bigint, toNs: bigint): number {
    return this.energyJ(device, fromNs, toNs) / (Number(toNs - fromNs) / 1e9);
  }

  /** The true board power P(t) in watts (no update period, no averaging). */
  powerW(device: number, tNs: bigint): number {
    return powerAt(this.device(device), Number(tNs - this.origin) / 1e6);
  }

  /** Instantaneous power as the double reports it (field 186; GetPowerUsage in instant mode). */
  instantW(device: number, tNs: bigint): number {
    const d = this.device(device);
    return d.sensorGain * powerAt(d, floorToMs(tNs - this.origin, d.powerUpdateMs));
  }

  /** Trailing-average power as the double reports it (field 185; GetPowerUsage in average mode). */
  averageW(device: number, tNs: bigint): number {
    const d = this.device(device);
    const u = floorToMs(tNs - this.origin, d.powerUpdateMs);
    return (d.sensorGain * (energyMjAt(d, u) - energyMjAt(d, u - d.avgWindowMs))) / d.avgWindowMs;
  }

  /** What nvmlDeviceGetPowerUsage answers at t, in watts (null: NOT_SUPPORTED). */
  powerUsageW(device: number, tNs: bigint): number | null {
    const d = this.device(device);
    if (!d.powerSupported) return null;
    return d.average ? this.averageW(device, tNs) : this.instantW(device, tNs);
  }

  /** The same in integer mW, rounded as the double rounds. */
  powerUsageMw(device: number, tNs: bigint): number | null {
    const w = this.powerUsageW(device, tNs);
    return w === null ? null : toMw(w);
  }

  /** The energy counter (mJ) the double answers at t, staircase and jumps included (null: none). */
  counterMj(device: number, tNs: bigint): bigint | null {
    const d = this.device(device);
    if (!d.counter) return null;
    const s = counterUpdateMs(d, tNs - this.origin);
    const v = d.energyOffsetMj + BigInt(Math.trunc(energyMjAt(d, s))) + jumpsMj(d, s);
    return v < 0n ? 0n : v;
  }

  /**
   * The environment a child process needs to use the doubles: the scenario, the NVML double as
   * GIUL_NVML_LIBRARY, and the nvidia-smi stand-in first on PATH. `extra` is merged last.
   */
  env(extra: Readonly<Record<string, string>> = {}): Record<string, string> {
    return {
      GIUL_FAKE_NVML_SCENARIO: this.path,
      GIUL_NVML_LIBRARY: FAKE_NVML,
      PATH: `${FAKE_SMI_BIN}${delimiter}${process.env.PATH ?? ""}`,
      ...extra,
    };
  }

  /** Deletes the scenario's folder. */
  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  [Symbol.dispose](): void {
    this.remove();
  }
}

/** Watts to the integer mW the double answers (rounded half away from zero, ≥ 0). */
export function toMw(w: number): number {
  const mw = w * 1000;
  if (!(mw > 0)) return 0;
  if (mw >= 4294967295) return 4294967295;
  return Math.round(mw);
}

/** Writes a scenario to a fresh temporary folder and returns it. */
export function writeScenario(spec: ScenarioSpec = {}): Scenario {
  return new Scenario(spec);
}

/**
 * Writes a scenario, runs `fn` with it, and removes it afterwards (also when `fn` throws).
 * Also sets GIUL_FAKE_NVML_SCENARIO, GIUL_NVML_LIBRARY and PATH in this process for the
 * duration, restoring them after, so in-process code (the addon) sees the double too.
 */
export async function withScenario<T>(spec: ScenarioSpec, fn: (sc: Scenario) => T | Promise<T>): Promise<T> {
  const sc = new Scenario(spec);
  const env = sc.env();
  const saved = new Map<string, string | undefined>();
  for (const [k, v] of Object.entries(env)) {
    saved.set(k, process.env[k]);
    process.env[k] = v;
  }
  try {
    return await fn(sc);
  } finally {
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    sc.remove();
  }
}

/** The folder of restated real nvidia-smi outputs (test/fakes/smi/captures/README.md). */
export const SMI_CAPTURES = join(ROOT, "test", "fakes", "smi", "captures");

/**
 * The environment that makes the nvidia-smi stand-in replay a capture verbatim and exit with
 * `exitCode`: `capture` is a file name in {@link SMI_CAPTURES} or an absolute path.
 */
export function smiReplayEnv(capture: string, exitCode = 0): Record<string, string> {
  return {
    GIUL_FAKE_SMI_REPLAY: isAbsolute(capture) ? capture : join(SMI_CAPTURES, capture),
    GIUL_FAKE_SMI_EXIT: String(exitCode),
    PATH: `${FAKE_SMI_BIN}${delimiter}${process.env.PATH ?? ""}`,
  };
}

/**
 * Writes a scenario and points this process at the NVML double for good (the double reads
 * GIUL_FAKE_NVML_SCENARIO once, on its first call; later changes go through `sc.update()`).
 * Call it at the top of a test file, before giul is imported. Clears GIUL_BACKEND so an outer
 * environment cannot force a backend on the test.
 */
export function scenarioForThisProcess(spec: ScenarioSpec = {}): Scenario {
  const sc = new Scenario(spec);
  process.env.GIUL_FAKE_NVML_SCENARIO = sc.path;
  process.env.GIUL_NVML_LIBRARY = FAKE_NVML;
  delete process.env.GIUL_BACKEND;
  return sc;
}
