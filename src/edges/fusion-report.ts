/**
 * What the fused counter (./fusion.ts) has seen of the card, for diagnosis (giul-probe, the GPU
 * check): how edges are bounded now, the counter's cadence, the power sensor's refresh and gain.
 */
import type { CounterCadence } from "./cadence.js";
import {
  type Basis,
  CONTINUOUS,
  COUNTER_ONLY,
  type GainEvidence,
  HOLD,
  HOLD_AVERAGED,
  type PowerReadings,
} from "./power-model.js";

/** Names of the bases, for reports. */
const BASIS_NAMES: Readonly<Record<Basis, string>> = {
  [CONTINUOUS]: "continuous sensor",
  [HOLD]: "held sensor",
  [HOLD_AVERAGED]: "held and averaging sensor",
  [COUNTER_ONLY]: "counter alone",
};

export interface UpdateIntervals {
  readonly least: number;
  readonly median: number;
  readonly most: number;
  readonly count: number;
}

/** What CounterFusion.report says. */
export interface FusionReport {
  /** How edges are bounded now. */
  readonly basis: string;
  /** The counter's cadence (cadence.ts report) and whether it changed at every read. */
  readonly counter: {
    readonly periodNs: [number, number] | null;
    readonly irregular: boolean;
    readonly readIntervalNs: number;
    readonly lockedNs: number;
    /**
     * Each of the last 64 reads showed a new value: it updates faster than it is read (AMD's, every
     * ms or so), whatever the power readings are, so no update interval can be timed.
     */
    readonly changeEveryRead: boolean;
    /**
     * The most the counter goes between updates (./staleness.ts, ns; null before two steps): what
     * a value standing still longer is called stalled against, at every sampler period.
     */
    readonly updateAtMostNs: number | null;
    /**
     * How often it updates (ns; null before any well-read step): least, median and most of its last
     * 64 well-read update intervals, and how many there were. Their spread shows a counter that
     * wanders off its grid, or changes cadence.
     */
    readonly updateIntervalNs: UpdateIntervals | null;
  };
  /** The reading of the sensor that bounds edges now (its name), and the lag its shape is read with (ns). */
  readonly bounding: string;
  readonly shapeLagNs: number;
  /** Share of power readings that differed from the one before (1: the sensor refreshes faster than reads). */
  readonly powerChangedShare: number;
  /** An upper bound on the sensor's refresh, its shortest and median run of one value (ns). */
  readonly refreshUpperNs: number;
  readonly shortestRunNs: number;
  readonly medianRunNs: number;
  /** The sensor's gain against the counter (true = gain × sensor), null without one. */
  readonly gain: [number, number] | null;
  /** Closed counter steps checked. */
  readonly steps: number;
  /**
   * Steps that disagree with the power readings have recurred: the counter and the sensor disagree
   * for good, and bars stay as wide as that disagreement (a one-time one is a fault, not evidence).
   */
  readonly persistentMismatch: boolean;
}

/** The report from what the fused counter holds. */
export function fusionReport(seen: {
  readonly basis: Basis;
  /** The evidence of the basis in force (null: the counter alone). */
  readonly gain: GainEvidence | null;
  readonly counter: ReturnType<CounterCadence["report"]>;
  readonly changeEveryRead: boolean;
  readonly updateAtMostNs: number;
  readonly updateIntervalNs: UpdateIntervals | null;
  readonly bounding: Basis;
  readonly shapeLagNs: number;
  readonly power: PowerReadings;
  readonly steps: number;
  readonly persistentMismatch: boolean;
}): FusionReport {
  const { power, gain } = seen;
  return {
    basis: BASIS_NAMES[seen.basis],
    counter: {
      ...seen.counter,
      changeEveryRead: seen.changeEveryRead,
      updateAtMostNs: Number.isFinite(seen.updateAtMostNs) ? seen.updateAtMostNs : null,
      updateIntervalNs: seen.updateIntervalNs,
    },
    bounding: BASIS_NAMES[seen.bounding],
    shapeLagNs: seen.shapeLagNs,
    powerChangedShare: power.changes / Math.max(1, power.head),
    refreshUpperNs: power.refreshUpperNs,
    shortestRunNs: power.shortestRunNs,
    medianRunNs: power.runs.medianNs(),
    gain: gain === null ? null : [gain.gainLo, gain.gainHi],
    steps: seen.steps,
    persistentMismatch: seen.persistentMismatch,
  };
}
