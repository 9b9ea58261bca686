/**
 * `giul/prometheus`: each metered request's energy, and the local GPUs', in a prom-client
 * registry, for the server's own `/metrics`. Subscribes to giul's `giul:energy` channel
 * (src/diagnostics.ts); the Meter knows nothing of it.
 *
 * ```ts
 * import { Registry } from "prom-client";
 * import { collectGiulMetrics } from "giul/prometheus";
 * const registry = new Registry();
 * collectGiulMetrics(registry);
 * ```
 *
 * `prom-client` is an optional peer dependency of giul: install it to use this entry.
 */
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import {
  Counter,
  Gauge,
  Histogram,
  type OpenMetricsContentType,
  type PrometheusContentType,
  type Registry,
  register,
} from "prom-client";
import { type EnergyMessage, GIUL_CHANNELS } from "../diagnostics.js";
import type { CardIdentity } from "../select/in-use.js";
import { JOULE_BUCKETS, LabelCache } from "./attributes.js";
import { CardFigureReader } from "./cards.js";

export interface PrometheusOptions {
  /** Buckets of `giul_request_energy_joules` (J). Default: 0.1, 0.25, 0.5, 1, … 5000, 10000. */
  readonly buckets?: readonly number[];
  /** Report `hw_energy_joules_total` and `hw_power_watts` for the local GPUs (default true). */
  readonly cardMetrics?: boolean;
}

export interface PrometheusCollection {
  /** Stops: unsubscribes from giul's channel and removes giul's metrics from the registry. Idempotent. */
  disable(): void;
}

type AnyRegistry = Registry<PrometheusContentType> | Registry<OpenMetricsContentType>;

const REQUEST_LABELS = ["method", "backend", "node"] as const;
const HW_LABELS = ["hw_id", "hw_type", "hw_name", "hw_vendor", "hw_model", "hw_driver_version"] as const;

/**
 * Registers giul's metrics in `registry` (default: prom-client's global one) and fills them from
 * every window closed from now on. Once per registry (prom-client refuses a name registered twice).
 *
 * - `giul_request_energy_joules` (histogram): joules charged to each request, labelled `method`,
 *   `backend`, `node`; windows without a figure (`unknown`) are not in it;
 * - `giul_attributed_energy_joules_total` (counter): the same joules summed;
 * - `giul_requests_total` (counter): every window closed, `unknown` ones included;
 * - `hw_energy_joules_total` (counter) and `hw_power_watts` (gauge) per local GPU, labelled
 *   `hw_id`, `hw_type="gpu"`, `hw_name`, `hw_vendor`, `hw_model`, `hw_driver_version`, read at each
 *   scrape from the samplers already running (no NVML call).
 */
export function collectGiulMetrics(
  registry: AnyRegistry = register,
  options: PrometheusOptions = {},
): PrometheusCollection {
  const registers = [registry];
  const histogram = new Histogram({
    name: "giul_request_energy_joules",
    help: "Energy charged to each metered request (J above idle; its share of the card under shared attribution).",
    labelNames: REQUEST_LABELS,
    buckets: [...(options.buckets ?? JOULE_BUCKETS)],
    registers,
  });
  const attributed = new Counter({
    name: "giul_attributed_energy_joules_total",
    help: "Joules charged to metered requests, summed (sampled or estimated, as method says).",
    labelNames: REQUEST_LABELS,
    registers,
  });
  const requests = new Counter({
    name: "giul_requests_total",
    help: "Metered requests (windows closed), by how their energy was obtained: unknown ones included.",
    labelNames: REQUEST_LABELS,
    registers,
  });
  const names = ["giul_request_energy_joules", "giul_attributed_energy_joules_total", "giul_requests_total"];
  if (options.cardMetrics ?? true) names.push(...cardMetrics(registers));

  const labels = new LabelCache({ method: "method", backend: "backend", node: "node" });
  const onEnergy = (message: unknown): void => {
    try {
      const { node, energy: e } = message as EnergyMessage;
      const tags = labels.of(e.method, e.backend, node.name).labels;
      requests.inc(tags);
      if (e.joules === null) return;
      histogram.observe(tags, e.joules);
      if (e.joules > 0) attributed.inc(tags, e.joules);
    } catch {
      // An exporter never throws into the Meter's caller.
    }
  };
  subscribe(GIUL_CHANNELS.energy, onEnergy);
  let enabled = true;
  return {
    disable() {
      if (!enabled) return;
      enabled = false;
      unsubscribe(GIUL_CHANNELS.energy, onEnergy);
      for (const name of names) registry.removeSingleMetric(name);
    },
  };
}

/** hw_energy_joules_total and hw_power_watts, read at each scrape. */
function cardMetrics(registers: AnyRegistry[]): string[] {
  const reader = new CardFigureReader();
  /** What each series has been increased by so far (the counter follows the reader's total). */
  const exported = new Map<string, number>();
  new Counter({
    name: "hw_energy_joules_total",
    help: "Energy consumed by the GPU, as giul's sampler saw it while it ran (never decreasing; see giul's README).",
    labelNames: HW_LABELS,
    registers,
    collect() {
      for (const card of reader.read()) {
        if (card.energyJ === null) continue;
        const before = exported.get(card.identity.id);
        if (before === undefined || card.energyJ > before) {
          this.inc(hwLabels(card.identity), card.energyJ - (before ?? 0));
          exported.set(card.identity.id, card.energyJ);
        }
      }
    },
  });
  new Gauge({
    name: "hw_power_watts",
    help: "Instantaneous power consumed by the GPU: the newest sample of giul's sampler (W).",
    labelNames: HW_LABELS,
    registers,
    collect() {
      this.reset();
      for (const card of reader.read()) {
        if (card.powerW !== null) this.set(hwLabels(card.identity), card.powerW);
      }
    },
  });
  return ["hw_energy_joules_total", "hw_power_watts"];
}

type HwLabel = (typeof HW_LABELS)[number];

function hwLabels(identity: CardIdentity): Partial<Record<HwLabel, string>> {
  const out: Partial<Record<HwLabel, string>> = {
    hw_id: identity.id,
    hw_type: "gpu",
    hw_name: identity.name,
    hw_vendor: identity.vendor,
  };
  if (identity.model !== null) out.hw_model = identity.model;
  if (identity.driverVersion !== null) out.hw_driver_version = identity.driverVersion;
  return out;
}
