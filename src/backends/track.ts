import type { BackendName, Check, SpanMeasurement } from "../measurement.js";
import type { TrackReadings } from "./readings.js";

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
 * none of them applies the rules (src/energy.ts does).
 */
export interface Track {
  readonly backend: BackendName;
  /** Single readings of the card's cumulative energy, where the track has them (giul-agent). */
  readonly readings?: TrackReadings;
  /** Resolves when the track can take an edge with a sample before it, or with why it cannot. */
  ready(): Promise<Check>;
  /** Takes an edge now. Never throws, never blocks. */
  edge(): Edge;
  /** Resolves once every edge can be evaluated, or never can be. Never rejects. */
  settle(edges: readonly Edge[]): Promise<void>;
  /** Card energy between two settled edges, idle included, with its quality. */
  span(from: Edge, to: Edge): SpanMeasurement;
  /** A window starts using the track (and asks for a sampling period, ms). */
  retain(periodMs: number): void;
  /** A window stops using the track. */
  release(): void;
}
