import type { NativeSampler } from "../../binding.js";
import {
  type BackendName,
  type Check,
  type Failure,
  fail,
  type SpanMeasurement,
} from "../vocabulary/measurement.js";

/**
 * An instant at which a window (or stage) starts or ends. A track captures it at once and
 * evaluates it later, when the samples around it exist.
 */
export interface Edge {
  /** CLOCK_MONOTONIC ns when the edge was taken. */
  readonly tNs: bigint;
}

/**
 * One card's stream of readings, shared by every window on that card. Backends implement it;
 * none of them applies the rules (src/rules/energy.ts does).
 */
/** Told once when a settle call has finished (Track.settleThen's `done`). */
export interface Finished {
  finished(): void;
}

export interface Track {
  readonly backend: BackendName;
  /** Single readings of the card's cumulative energy, where the track has them (giul-agent). */
  readonly readings?: TrackReadings;
  /**
   * Resolves when the track can take an edge with a sample before it, or with why it cannot: at
   * once when it can or when its sampler is known stalled, else within `withinMs` (the caller's
   * budget; without one, the track's own start-up allowance).
   */
  ready(withinMs?: number): Promise<Check>;
  /** What ready() would resolve with at once, or null when it would wait (optional: a fast path). */
  readyNow?(): Check | null;
  /** Takes an edge now. Never throws, never blocks. */
  edge(): Edge;
  /**
   * Resolves once every edge can be evaluated, or never can be: a sampling track waits a bounded
   * time for the samples (see ring-waits.ts), and not at all on a sampler known stalled. Never
   * rejects.
   */
  settle(edges: readonly Edge[]): Promise<void>;
  /**
   * settle() with a callback (optional: a track that has it spares each caller a promise):
   * `done.finished()` is called once, when settle()'s promise would resolve, never from within this
   * call. Never throws. An object, not a closure: each close hands one, and a crowd of closes kept
   * the closures and their scopes alive.
   */
  settleThen?(edges: readonly Edge[], done: Finished): void;
  /**
   * Card energy between two settled edges, idle included, with its quality. `bound` false: the
   * caller uses the value, samples and quality but not the span's own bound (a shared window's bar
   * is the ledger's), so a track may skip the work that only narrows it.
   */
  span(from: Edge, to: Edge, bound?: boolean): SpanMeasurement;
  /**
   * Card energy between two settled edges however close together, idle included, with its bound:
   * what the per-card ledger splits among overlapping windows. Unlike span() there is no "shorter
   * than the counter's step" rule (the bound covers a short interval).
   */
  interval(from: Edge, to: Edge): IntervalMeasurement;
  /** How far the card's cumulative energy at a settled edge can be from the truth (for the ledger). */
  edgeError(edge: Edge): EdgeError;
  /**
   * The card's process-wide event log, where the track has one (the native sampler's, shared by
   * every JavaScript environment of the process), with how to take an edge at a logged instant;
   * null or absent where windows are seen only by this environment.
   */
  sharedLog?(): SharedLog | null;
  /** A window starts using the track (and asks for a sampling period, ms). */
  retain(periodMs: number): void;
  /** A window stops using the track. */
  release(): void;
}

/** Card energy over one interval between two edges (see Track.interval). */
export type IntervalMeasurement =
  | {
      readonly ok: true;
      /** The card's energy between the edges, idle included (J). */
      readonly grossJoules: number;
      /** Bound on the errors of the interval itself (trapezoid between samples, averaging), J. */
      readonly spreadJoules: number;
    }
  | Failure;

/** The error of the card's cumulative energy at one edge (see Track.edgeError). */
export type EdgeError =
  | {
      readonly ok: true;
      /** The value can be this far off either way (interpolation, quantisation, timing), J. */
      readonly errJoules: number;
      /** … and this much lower than the truth: a counter's value lags, J (0 when it cannot). */
      readonly lagJoules: number;
    }
  | Failure;

/**
 * The track of a card that cannot be metered (the `none` backend): edges are instants, and every
 * span says why there is no measurement. Keeps the Meter free of "no track" special cases.
 */
export class NullTrack implements Track {
  readonly backend: BackendName = "none";
  private readonly failure: Failure;

  constructor(reason: string) {
    this.failure = fail(reason);
  }

  ready(): Promise<Check> {
    return Promise.resolve(this.failure);
  }

  readyNow(): Check {
    return this.failure;
  }

  edge(): Edge {
    return { tNs: process.hrtime.bigint() };
  }

  settle(): Promise<void> {
    return Promise.resolve();
  }

  span(): SpanMeasurement {
    return this.failure;
  }

  interval(): IntervalMeasurement {
    return this.failure;
  }

  edgeError(): EdgeError {
    return this.failure;
  }

  retain(): void {}

  release(): void {}
}

/** One event of a process-wide log (see Track.sharedLog). */
export interface EventLogEntry {
  /** ns relative to the track's epoch (CLOCK_MONOTONIC), stamped when the event was appended. */
  t: number;
  /** The ring's head when it was stamped (where to start looking for the samples around it). */
  ringHead: number;
  /** Total weight open on the card in the process just before and after, and windows open after. */
  weightBefore: number;
  weightAfter: number;
  countAfter: number;
  /**
   * Where the log says whose the event is (the native one): the appending reference's id, what
   * its environment said (the window's number, its own weight after the event, the event's kind),
   * and an open's idle floor; NaN where not said.
   */
  ref?: number;
  owner?: number;
  own?: number;
  kind?: number;
  idleW?: number;
}

/** An entry to read the log into (every field present, so that its shape never changes). */
export function emptyLogEntry(): EventLogEntry {
  return {
    t: 0,
    ringHead: 0,
    weightBefore: 0,
    weightAfter: 0,
    countAfter: 0,
    ref: Number.NaN,
    owner: Number.NaN,
    own: Number.NaN,
    kind: Number.NaN,
    idleW: Number.NaN,
  };
}

/**
 * What an append says (the addon's ledgerAppend, binding.d.ts): the change of weight and of
 * windows open, an open's idle floor, and, where the log keeps them (the native one), the window's
 * number, its own weight after the event and the event's kind.
 */
export type AppendArgs = Parameters<NativeSampler["ledgerAppend"]>;

/** Windows' events appended by every environment of the process, in time order. */
export interface EventLog {
  /**
   * Appends an event; its sequence number, or −1 when an open's idleW conflicts with the card's,
   * or −2 when the log can no longer be written from here (its reference was released).
   */
  append(...args: AppendArgs): number;
  /**
   * Where the log records who appended each event (the native one): the id it records for this
   * environment's appends (EventLogEntry.ref).
   */
  readonly refId?: number;
  /** What the entries' `t` count from (CLOCK_MONOTONIC ns), where the log says. */
  readonly epochNs?: bigint;
  /** Entries appended so far. */
  published(): number;
  /** Entries held (older ones are overwritten), where the log is a ring. */
  readonly capacity?: number;
  /** Copies entry k into `out`; false when it is not (or no longer) held. */
  read(k: number, out: EventLogEntry): boolean;
  /** The idle floor of the windows open on the card (NaN when none). */
  idleW(): number;
  /** Windows open on the card now, in the whole process, where the log says (the native one). */
  openCount?(): number;
}

export interface SharedLog {
  readonly log: EventLog;
  /** An edge at a logged instant (`t` and `ringHead` of an entry). */
  edgeAt(t: number, ringHead: number): Edge;
}

/**
 * Single readings of a track's cumulative energy, for a track that has them (a ring of samples:
 * RingTrack). giul-agent serves them (/power, /energy, /metrics) to remote meters; windows never
 * use them (they use Track.span).
 */
export interface TrackReadings {
  /** The newest sample, or null before the first (or when the sampler is not running). */
  latest(): LatestSample | null;
  /** What the running ring is: its column, period and counter step; null when none runs. */
  ringInfo(): RingInfo | null;
  /** An edge of the track at an instant already past (CLOCK_MONOTONIC ns), to settle and read. */
  edgeAt(tNs: bigint): Edge;
  /** The cumulative value at one settled edge of the track, with the samples that bracket it. */
  reading(edge: Edge): EdgeReading;
  /**
   * Least and most power among the samples from `sinceNs` (CLOCK_MONOTONIC) to the newest, mW;
   * null when none of them read power.
   */
  powerRange(sinceNs: bigint): { readonly minMw: number; readonly maxMw: number } | null;
}

/** The newest sample of a track (TrackReadings.latest). */
export interface LatestSample {
  /** CLOCK_MONOTONIC ns of the sample. */
  readonly tNs: bigint;
  /** Its index k in the ring. */
  readonly index: number;
  /** The cumulative energy column (counter or integral of power), mJ; NaN when that read failed. */
  readonly cumulativeMj: number;
  /** Power, mW; NaN when that read failed. */
  readonly powerMw: number;
  /** Faulty samples so far. */
  readonly faults: number;
  /** Which run of the sampler (see RingInfo.generation). */
  readonly generation: number;
}

/** What a running ring is (TrackReadings.ringInfo). */
export interface RingInfo {
  readonly column: "energy" | "integral";
  readonly averagedPower: boolean;
  readonly periodNs: number;
  readonly counterStepNs: number;
  /** Incremented each time the track opens a ring: values of two generations do not subtract. */
  readonly generation: number;
}

/** The cumulative value at one edge (TrackReadings.reading). */
export type EdgeReading =
  | {
      readonly ok: true;
      readonly tNs: bigint;
      /** Cumulative column at the edge, interpolated between the two samples around it (mJ). */
      readonly valueMj: number;
      /** Power at the sample after the edge (mW; NaN when unknown). */
      readonly powerMw: number;
      /** Largest error of valueMj either way (mJ): the interpolation, or the fused bound. */
      readonly interpErrMj: number;
      /**
       * interpErrMj includes a counter's staleness (the fused counter's edges): nothing lags. False
       * where it is the interpolation alone.
       */
      readonly bounded: boolean;
      /** Longest read among the two samples (ns). */
      readonly readNs: number;
      /** Index of the sample before the edge. */
      readonly kA: number;
      /** Cumulative faults at the sample before and after the edge. */
      readonly faultsA: number;
      readonly faultsB: number;
      readonly generation: number;
    }
  | { readonly ok: false; readonly reason: string };
