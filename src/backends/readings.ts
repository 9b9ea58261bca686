import type { Edge } from "./track.js";

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
