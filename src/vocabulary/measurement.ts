/**
 * The shared vocabulary: what backends hand up to the rules, and the one shape of a failure.
 * Imports nothing of ours, so every part (backends, selection, the rules, the faces) can use it
 * without pointing upwards.
 */

/** How a figure was obtained. `method` says sampled/estimated/unknown; `backend` says from what. */
export type BackendName =
  | "nvml_counter"
  | "nvml_sampler"
  /** An AMD card's energy counter (AMD SMI), read by the addon's sampling thread. */
  | "amdsmi_counter"
  /** The same thread's integral of AMD SMI socket power, where the counter is absent or refused. */
  | "amdsmi_sampler"
  /** An AMD card's energy counter as the amd-smi tool prints it, once a second (no addon or library). */
  | "amdsmi_cli"
  | "smi_sampler"
  | "remote_agent"
  /** A card declared by simulateCard() (giul/testing): no hardware is measured. */
  | "simulated"
  /** A window over several cards measured by different backends (each card's is in `cards`). */
  | "mixed"
  | "none";

/** How a figure was obtained: measured, estimated from a hint, or not known at all. */
export type Method = "sampled" | "estimated" | "unknown";

const METHODS: readonly unknown[] = ["sampled", "estimated", "unknown"] satisfies Method[];

/** Whether `value` names a Method (a record read back from a log, a header, an SDK's usage). */
export function isMethod(value: unknown): value is Method {
  return METHODS.includes(value);
}

export const BACKEND_NAMES: readonly BackendName[] = [
  "nvml_counter",
  "nvml_sampler",
  "amdsmi_counter",
  "amdsmi_sampler",
  "amdsmi_cli",
  "smi_sampler",
  "remote_agent",
  "simulated",
  "mixed",
  "none",
];

/**
 * Something that could not be done, as a value: the one failure shape of the codebase. `reason` is
 * for a person: what failed and, where known, how to fix it.
 */
export interface Failure {
  readonly ok: false;
  readonly reason: string;
}

/** A value, or why there is none. */
export type Result<T> = { readonly ok: true; readonly value: T } | Failure;

/** Something that either worked or did not (nothing to hand back when it worked). */
export type Check = { readonly ok: true } | Failure;

export const OK: { readonly ok: true } = Object.freeze({ ok: true as const });

export function fail(reason: string): Failure {
  return { ok: false, reason };
}

export function ok<T>(value: T): { readonly ok: true; readonly value: T } {
  return { ok: true, value };
}

/** A process resident on a card. Unreadable values are null, never 0. */
export interface ProcessInfo {
  readonly pid: number;
  readonly name: string | null;
  readonly usedMib: number | null;
  /** The MIG GPU instance it runs on, where the card is in MIG mode and NVML says. */
  readonly gpuInstanceId?: number;
  /** The UUID of the MIG slice it runs on, where known (a contending process on a MIG card). */
  readonly slice?: string;
}

/** One MIG slice of a card, as NVML lists it (readSlices). Unreadable values are null. */
export interface SliceInfo {
  readonly uuid: string | null;
  /** As nvidia-smi names it ("3g.40gb"), or null. */
  readonly profile: string | null;
  readonly gpuInstanceId: number | null;
  readonly computeInstanceId: number | null;
  /** Its GPU instance's slices of the card. */
  readonly slices: number | null;
  readonly memoryTotalMib: number | null;
  readonly memoryUsedMib: number | null;
}

/** A card's MIG mode and slices; `enabled` false for a card not in MIG mode (or without MIG). */
export interface CardSlices {
  readonly enabled: boolean;
  readonly cardSlices: number | null;
  readonly slices: readonly SliceInfo[];
}

/**
 * The part of a card a node names: a MIG slice (no sensor of its own; its windows are charged
 * their share of the card, weighted by its slices of the card's).
 */
export interface Partition {
  readonly kind: "mig";
  /** The profile, as nvidia-smi names it ("3g.40gb"), or null. */
  readonly profile: string | null;
  readonly sliceUuid: string;
  readonly cardUuid: string | null;
  /** The GPU instance's slices (3 for a 3g profile) and the card's (7 on A100, H100, H200). */
  readonly slices: number;
  readonly cardSlices: number;
  readonly gpuInstanceId: number | null;
  readonly computeInstanceId: number | null;
}

/** A resident process that was not ours at a window's edge. */
export type ContendingProcess = ProcessInfo;

/** One read of a card's compute processes. `tNs` is when the read started (CLOCK_MONOTONIC). */
export type ProcessRead =
  | { readonly ok: true; readonly tNs: bigint; readonly processes: readonly ProcessInfo[] }
  | (Failure & { readonly tNs: bigint });

/** A card's own values, read without its processes. Unreadable values are null, never 0. */
export interface CardInfo {
  readonly name: string | null;
  readonly memoryFreeMib: number | null;
  readonly memoryUsedMib: number | null;
  readonly memoryTotalMib: number | null;
  readonly utilizationPct: number | null;
  /** Power as the card reported it with its state (W), where that read gives one: no sampler's. */
  readonly powerW: number | null;
}

/** A card's values and its resident processes (probeNode, giul-agent). */
export interface CardState extends CardInfo {
  readonly computeApps: readonly ProcessInfo[];
}

/** What a backend measured over one span (a window or a stage), before any rule is applied. */
export type SpanMeasurement =
  | {
      readonly ok: true;
      /** Energy drawn by the whole card over the span, idle included (J). */
      readonly grossJoules: number;
      /** Samples strictly inside the span. */
      readonly samples: number;
      /** Largest interval between consecutive samples covering the span (ms). */
      readonly maxGapMs: number;
      /** Bound on the error the edges and the counter's step can introduce (J). */
      readonly uncertaintyJoules: number;
      /** A caveat about the source (averaged power, say), or null. */
      readonly caveat: string | null;
    }
  | Failure;

/**
 * No card draws this much (W): a larger figure is a glitch or a counter reset, not power, and a
 * larger idle floor a mistake. The addon's sampling thread applies the same limit to counter jumps
 * in C++ (`kMaxMjPerNs` in native/sampler.cc); change both together.
 */
export const MAX_PLAUSIBLE_W = 5_000;
