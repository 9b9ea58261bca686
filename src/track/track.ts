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
   * An edge at an instant of the card's event log (CLOCK_MONOTONIC ns, at most a few ms past for
   * this environment's own events, older for other processes'), where the track can take one:
   * windows then share the card with every window in the log. `own`: the event was appended here
   * just now (the track asks its sampler for a read right after it).
   */
  loggedEdge?(tNs: bigint, own: boolean): Edge;
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

/** One event of a card's event log (see EventLog). */
export interface EventLogEntry {
  /** ns since the log's epochNs (CLOCK_MONOTONIC), stamped when the event was appended. */
  t: number;
  /** Total weight open on the card just before and after, and windows open after (every process). */
  weightBefore: number;
  weightAfter: number;
  countAfter: number;
  /** The idle floor charged for the card after the event (NaN when none is open). */
  idleAfter: number;
  /** The appending participant (a process's copy of giul): its slot, NaN where the log has none. */
  slot: number;
  /** What the event is (CardLogLayout.eKind: 1 open, 2 close, 3 weight, 4 mark, 5 and 6 closings). */
  kind: number;
}

/** An entry to read the log into (every field present, so that its shape never changes). */
export function emptyLogEntry(): EventLogEntry {
  return {
    t: 0,
    weightBefore: 0,
    weightAfter: 0,
    countAfter: 0,
    idleAfter: Number.NaN,
    slot: Number.NaN,
    kind: 0,
  };
}

/** Where a card's event log is shared: see EventLog.scope. */
export type LogScope = "host" | "process" | "environment";

/**
 * Windows' events on one card, appended by every window that shares it, in time order: the
 * host's (every process of the user, src/sources/native/card-log.ts), this process's (where the
 * host's cannot be had), or one environment's (a track that cannot take an edge at a logged
 * instant).
 */
export interface EventLog {
  readonly scope: LogScope;
  /** Why the log is not shared host-wide (null when it is). */
  readonly reason: string | null;
  /** What the entries' `t` count from (CLOCK_MONOTONIC ns). */
  readonly epochNs: bigint;
  /** Entries held (older ones are overwritten). */
  readonly capacity: number;
  /** The slot this environment's appends carry (EventLogEntry.slot). */
  readonly slot: number;
  /**
   * Appends an event (binding.d.ts NativeCardLog.append); its sequence number, or a negative code:
   * −2 released, −3 the lock was not had in time, −4 the log holds values no giul wrote.
   */
  append(deltaWeight: number, deltaCount: number, idleW: number, kind: number): number;
  /** Entries appended so far. */
  published(): number;
  /** Copies entry k into `out` (checked: a foreign writer's garbage is not an entry); false when it is not held. */
  read(k: number, out: EventLogEntry): boolean;
  /** Closes the windows of processes that died (host logs); how many processes were reaped. */
  reap?(): number;
  /** The pids of the processes holding the log (host logs; this one included). */
  pids?(): readonly number[];
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
  /**
   * Why an integral of this track's power readings bounds nothing now (readings that hold their
   * values, or a trailing average), or null: null too on a counter.
   */
  integralProblem(): string | null;
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
      /**
       * On an integral, its running bound at the sample before the edge and what the changes read
       * within the readings' lag after it add (mJ; ../ring/held.ts spreadAround); NaN on a counter.
       */
      readonly spreadMj: number;
      readonly spreadAheadMj: number;
      /** On an integral, how long before and after the edge the reads around it were, and the readings' lag (ns); else NaN. */
      readonly readBeforeNs: number;
      readonly readAfterNs: number;
      readonly lagNs: number;
      /**
       * On a counter: the fused edge was placed by the counter alone (its power readings bound
       * nothing inside a step), and the counter's reading at the sample before it (mJ; else NaN).
       */
      readonly counterOnly: boolean;
      readonly counterMj: number;
    }
  | { readonly ok: false; readonly reason: string };
