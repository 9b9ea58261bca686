/**
 * Measuring a card's idle draw, for the caller to put in its Node's `idleW`. giul never guesses,
 * defaults or learns idle (a wrong floor rewrites every figure the node reports): this is a tool
 * the operator runs on a quiet card, and whose answer they paste. Nothing applies it anywhere.
 */

import { RunningEnergy, type RunningTotal, SETTLE_MS } from "./edges/running-energy.js";
import { resolveNode } from "./rules/node.js";
import { forcedBackend, select } from "./select/index.js";
import type { CardReader } from "./track/card.js";
import type { Track, TrackReadings } from "./track/track.js";
import { whileAlive } from "./vocabulary/alive.js";
import { GiulError } from "./vocabulary/errors.js";
import type { BackendName, ProcessInfo } from "./vocabulary/measurement.js";
import { describeValue, firstUnknownKey, unknownKey } from "./vocabulary/validate.js";

export interface IdleOptions {
  /** The card (NVML / nvidia-smi index). Default 0. */
  readonly gpuIndex?: number;
  /** How long to measure (s, 1..3600). Default 30. */
  readonly seconds?: number;
  /** Called about once a second with the seconds measured so far (a progress line, say). */
  readonly onProgress?: ((elapsedSeconds: number, seconds: number) => void) | null;
}

/** A card's idle draw over a quiet span, in watts. */
export interface IdleMeasurement {
  readonly ok: true;
  readonly gpuIndex: number;
  /** Median, 5th and 95th percentile of the power samples (W). */
  readonly medianW: number;
  readonly p5W: number;
  readonly p95W: number;
  /** The energy counter's average over the span (W), or null where the card has no counter. */
  readonly counterAvgW: number | null;
  /** The span measured (s) and the power samples in it. */
  readonly seconds: number;
  readonly samples: number;
  readonly backend: BackendName;
}

/** The measurement, or why there is none (a compute process resident, a card that cannot be read). */
export type IdleResult = IdleMeasurement | { readonly ok: false; readonly reason: string };

const KNOWN: readonly string[] = ["gpuIndex", "seconds", "onProgress"];
/** How often the resident processes are looked at during the measurement (ms). */
const PROCESS_CHECK_MS = 1_000;

function optionError(field: string, message: string): GiulError {
  return new GiulError("INVALID_OPTION", `${field}: ${message}`, { field });
}

/**
 * Measures GPU `gpuIndex`'s draw while nothing runs on it: samples its power through the backend a
 * Meter would use for `seconds`, and refuses (a failure with the reason, not a figure) when a compute
 * process is resident at the start or appears during the span. Only bad options throw.
 */
export async function measureIdle(options: IdleOptions = {}): Promise<IdleResult> {
  if (options === null || typeof options !== "object") {
    throw optionError("options", `expected an object, got ${describeValue(options)}`);
  }
  const unknown = firstUnknownKey(options, KNOWN);
  if (unknown !== null) throw optionError(unknown, unknownKey(unknown, KNOWN));
  const seconds = options.seconds ?? 30;
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 1 || seconds > 3600) {
    throw optionError(
      "seconds",
      `expected a number of seconds from 1 to 3600, got ${describeValue(seconds)}`,
    );
  }
  const onProgress = options.onProgress ?? null;
  if (onProgress !== null && typeof onProgress !== "function") {
    throw optionError("onProgress", `expected a function, got ${describeValue(onProgress)}`);
  }
  // The node's checks for the index (idleW is what is being measured: 0 is a placeholder here).
  const node = resolveNode({ name: "idle", gpuIndex: options.gpuIndex ?? 0, idleW: 0 });
  const selection = await whileAlive(select(node, forcedBackend()));
  const track = selection.track;
  const readings = track?.readings ?? null;
  if (track === null || readings === null) {
    return fail(
      `GPU ${node.gpuIndex} cannot be sampled: ${selection.reason ?? `the ${selection.backend} backend has no power samples`}`,
    );
  }
  const reader = selection.reader ?? null;
  if (reader === null) {
    return fail(`GPU ${node.gpuIndex}'s processes cannot be read, so it cannot be shown to be idle`);
  }
  const busy = await whileAlive(residents(reader));
  if (busy !== null) return fail(`GPU ${node.gpuIndex} is not idle: ${busy}`);
  track.retain(10);
  try {
    return await whileAlive(
      sample(node.gpuIndex, selection.backend, track, readings, reader, seconds, onProgress),
    );
  } finally {
    track.release();
  }
}

async function sample(
  gpuIndex: number,
  backend: BackendName,
  track: Track,
  readings: TrackReadings,
  reader: CardReader,
  seconds: number,
  onProgress: ((elapsed: number, seconds: number) => void) | null,
): Promise<IdleResult> {
  const ready = await track.ready();
  if (!ready.ok) return fail(`GPU ${gpuIndex} cannot be sampled: ${ready.reason}`);
  await new Promise((done) => setTimeout(done, SETTLE_MS));
  const powers: number[] = [];
  // The counter's energy as a window measures it (a raw reading is up to a counter step stale).
  const counter = readings.ringInfo()?.column === "energy" ? new RunningEnergy(track) : null;
  let total: RunningTotal | null = null;
  let lastIndex = -1;
  const t0 = process.hrtime.bigint();
  const endNs = t0 + BigInt(Math.round(seconds * 1e9));
  let nextCheck = t0 + BigInt(PROCESS_CHECK_MS * 1e6);
  let nextProgress = t0 + 1_000_000_000n;
  const periodMs = Math.max(1, (readings.ringInfo()?.periodNs ?? 10e6) / 1e6);
  for (;;) {
    const s = readings.latest();
    if (s !== null && s.index !== lastIndex) {
      lastIndex = s.index;
      if (Number.isFinite(s.powerMw)) powers.push(s.powerMw / 1000);
    }
    const now = process.hrtime.bigint();
    if (now >= nextCheck) {
      nextCheck = now + BigInt(PROCESS_CHECK_MS * 1e6);
      const busy = await residents(reader);
      if (busy !== null) return fail(`GPU ${gpuIndex} did not stay idle: ${busy}`);
    }
    if (now >= nextProgress) {
      nextProgress += 1_000_000_000n;
      // Summed a second at a time, so that no span outlives the ring.
      if (counter !== null) total = await counter.advance();
      onProgress?.(Math.min(seconds, Number(now - t0) / 1e9), seconds);
    }
    if (now >= endNs) break;
    await new Promise((done) => setTimeout(done, periodMs));
  }
  const busy = await residents(reader);
  if (busy !== null) return fail(`GPU ${gpuIndex} did not stay idle: ${busy}`);
  if (powers.length === 0) return fail(`GPU ${gpuIndex} gave no power reading in ${seconds} s`);
  powers.sort((a, b) => a - b);
  if (counter !== null) total = await counter.advance();
  return {
    ok: true,
    gpuIndex,
    medianW: quantile(powers, 0.5),
    p5W: quantile(powers, 0.05),
    p95W: quantile(powers, 0.95),
    counterAvgW: total?.ok === true && total.seconds > 0 ? total.joules / total.seconds : null,
    seconds,
    samples: powers.length,
    backend,
  };
}

/** The compute processes resident on the card, described; null when there are none. */
async function residents(reader: CardReader): Promise<string | null> {
  const read = await reader.readProcesses();
  if (!read.ok) return `its processes could not be read (${read.reason})`;
  if (read.processes.length === 0) return null;
  return `${describe(read.processes)} resident; stop ${read.processes.length === 1 ? "it" : "them"} and measure again`;
}

function describe(processes: readonly ProcessInfo[]): string {
  return processes.map((p) => `${p.name ?? "?"} (pid ${p.pid})`).join(", ");
}

function quantile(sorted: readonly number[], q: number): number {
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (at - lo);
}

function fail(reason: string): { readonly ok: false; readonly reason: string } {
  return { ok: false, reason };
}
