/**
 * The local cards whose tracks selection has opened in this process, with who they are: what the
 * card-level exporters (giul/otel, giul/prometheus) and giul-agent's /metrics read. Reading a card
 * here is reading its sampler's newest sample from memory (TrackReadings.latest): never an NVML
 * call, and nothing is started: a card whose sampler is not running (no window open on it for a
 * while) has no sample to read.
 *
 * The list lives on `globalThis` under a registered symbol, because the subpath bundles
 * (dist/otel.js, dist/prometheus.js) carry their own copy of this module and must see the cards
 * the main bundle's Meter opened (and a CommonJS copy those of an ESM one).
 */
import type { TrackReadings } from "../track/track.js";
import type { BackendName } from "../vocabulary/measurement.js";

/** Who a card is, as the OpenTelemetry hardware conventions name it (`hw.*`). */
export interface CardIdentity {
  /** `hw.id`: the card's UUID where NVML read it, else `gpu<index>`. */
  readonly id: string;
  /** `hw.name`: the card's model name (e.g. "NVIDIA H100 80GB HBM3"), else `gpu<index>`. */
  readonly name: string;
  /** `hw.vendor`: "NVIDIA" or "AMD", as the vendors write their names. */
  readonly vendor: string;
  /** `hw.driver_version`, or null when not read. */
  readonly driverVersion: string | null;
}

/** One local card with an open track. */
export interface CardInUse {
  readonly gpuIndex: number;
  readonly backend: BackendName;
  readonly identity: CardIdentity;
  /** The track's single readings (its sampler's newest sample and what its ring is). */
  readonly readings: TrackReadings;
}

const KEY = Symbol.for("giul.cards-in-use.v1");
type Registry = Map<number, CardInUse>;

function registry(): Registry {
  const holder = globalThis as { [KEY]?: Registry };
  let cards = holder[KEY];
  if (cards === undefined) {
    cards = new Map();
    holder[KEY] = cards;
  }
  return cards;
}

/** What the probe knew of a card (select/capabilities.ts). */
export interface KnownCard {
  readonly uuid: string | null | undefined;
  readonly name: string | null | undefined;
  readonly driverVersion: string | null | undefined;
  /** Whose card it is (absent: NVIDIA's, read through NVML or nvidia-smi). */
  readonly vendor?: "nvidia" | "amd" | undefined;
}

/**
 * Notes that selection opened a track on local card `gpuIndex` (a later track of the same card
 * replaces an earlier one). Tracks without single readings are not listed.
 */
export function noteCardInUse(
  gpuIndex: number,
  backend: BackendName,
  readings: TrackReadings | undefined,
  known: KnownCard | null,
): void {
  if (readings === undefined) return;
  registry().set(gpuIndex, {
    gpuIndex,
    backend,
    readings,
    identity: Object.freeze({
      id: known?.uuid ?? `gpu${gpuIndex}`,
      name: known?.name ?? `gpu${gpuIndex}`,
      vendor: known?.vendor === "amd" ? "AMD" : "NVIDIA",
      driverVersion: known?.driverVersion ?? null,
    }),
  });
}

/** The local cards with an open track, in index order. */
export function cardsInUse(): readonly CardInUse[] {
  return [...registry().values()].sort((a, b) => a.gpuIndex - b.gpuIndex);
}

/** Local card `gpuIndex`, when a track is open on it. */
export function cardInUse(gpuIndex: number): CardInUse | null {
  return registry().get(gpuIndex) ?? null;
}
