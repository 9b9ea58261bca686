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
import { CARD_ENERGY, CARD_POWER, cardLabels, REQUEST_ENERGY, REQUEST_LABELS, REQUESTS } from "./names.js";

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

const L = REQUEST_LABELS;
const REQUEST_LABEL_NAMES = [L.hwId, L.hwType, L.method, L.backend, L.node].map((l) => l.prometheus);
const HW_LABELS = ["hw_id", "hw_type", "hw_name", "hw_vendor", "hw_driver_version"] as const;

/**
 * Registers giul's metrics in `registry` (default: prom-client's global one) and fills them from
 * every window closed from now on. Once per registry (prom-client refuses a name registered twice).
 *
 * - `giul_request_energy_joules` (histogram): joules charged to each request, labelled `hw_id`,
 *   `hw_type`, `energy_method`, `backend`, `node`; windows without a figure (`unknown`) are not in it;
 * - `giul_requests_total` (counter): every window closed, `unknown` ones included;
 * - `hw_energy_joules_total` (counter) and `hw_power_watts` (gauge) per local GPU, labelled
 *   `hw_id`, `hw_type="gpu"`, `hw_name`, `hw_vendor`, `hw_driver_version`, read at each scrape from
 *   the samplers already running (no NVML call).
 * The names and HELP texts are those of every face (./names.ts).
 */
export function collectGiulMetrics(
  registry: AnyRegistry = register,
  options: PrometheusOptions = {},
): PrometheusCollection {
  const registers = [registry];
  const histogram = new Histogram({
    name: REQUEST_ENERGY.prometheus,
    help: REQUEST_ENERGY.help,
    labelNames: REQUEST_LABEL_NAMES,
    buckets: [...(options.buckets ?? JOULE_BUCKETS)],
    registers,
  });
  const requests = new Counter({
    name: REQUESTS.prometheus,
    help: REQUESTS.help,
    labelNames: REQUEST_LABEL_NAMES,
    registers,
  });
  const names = [REQUEST_ENERGY.prometheus, REQUESTS.prometheus];
  if (options.cardMetrics ?? true) names.push(...cardMetrics(registers));

  const labels = new LabelCache("prometheus");
  const onEnergy = (message: unknown): void => {
    try {
      const { node, energy: e } = message as EnergyMessage;
      const tags = labels.of(e.method, e.backend, node).labels;
      requests.inc(tags);
      if (e.joules === null) return;
      histogram.observe(tags, e.joules);
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
    name: CARD_ENERGY.prometheus,
    help: CARD_ENERGY.help,
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
    name: CARD_POWER.prometheus,
    help: CARD_POWER.help,
    labelNames: HW_LABELS,
    registers,
    collect() {
      this.reset();
      for (const card of reader.read()) {
        if (card.powerW !== null) this.set(hwLabels(card.identity), card.powerW);
      }
    },
  });
  return [CARD_ENERGY.prometheus, CARD_POWER.prometheus];
}

type HwLabel = (typeof HW_LABELS)[number];

function hwLabels(identity: CardIdentity): Partial<Record<HwLabel, string>> {
  return Object.fromEntries(cardLabels(identity)) as Partial<Record<HwLabel, string>>;
}
