/**
 * giul-proxy's /metrics (Prometheus text, version 0.0.4): the energy of each request as a histogram,
 * request counts, and the card's power and cumulative energy.
 *
 * Names follow the OpenTelemetry hardware semantic conventions as Prometheus spells them
 * (`hw.energy` → `hw_energy_joules_total`, `hw.power` → `hw_power_watts`, attributes `hw.id`,
 * `hw.type`, `hw.name` → labels `hw_id`, `hw_type="gpu"`, `hw_name`); the per-request histogram is
 * `giul_request_energy_joules`. They are named here, in one place, so that the package's shared
 * exporter can take over once it exists. A value that cannot be read is left out, never written as 0.
 */
import { escapeLabel } from "../agent/metrics.js";
import type { ProxyRecord } from "./record.js";

/** Upper bounds of the histogram's buckets (J): a short embedding to a long generation on a big card. */
export const ENERGY_BUCKETS: readonly number[] = [
  0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
];

/** Distinct models given their own label; the rest are counted as "other". */
const MAX_MODELS = 64;

/** The card as the sampler last read it. */
export interface CardGauges {
  /** The card's hw_id label. */
  readonly hwId: string;
  readonly watts: number | null;
  readonly energyJ: number | null;
  readonly name: string | null;
}

interface Histogram {
  readonly buckets: number[];
  count: number;
  sum: number;
}

function num(value: number): string {
  return Number.isFinite(value) ? String(value) : "NaN";
}

export class ProxyMetrics {
  /** Requests being forwarded now. */
  inFlight = 0;
  /** Log lines dropped so far, when there is a log (giul-proxy sets it). */
  logDropped: (() => number) | null = null;
  private readonly hwId: string;
  private readonly histograms = new Map<string, Histogram>();
  private readonly requests = new Map<string, number>();
  private readonly models = new Set<string>();
  /** A node of several cards: each card's hw_id, and the joules its parts were charged. */
  private readonly cardIds: readonly string[] | null;
  private readonly cardJoules: number[];

  /** `hwId`: the node's (its cards' joined); `cardIds`: each card's, for a node of several. */
  constructor(hwId: string, cardIds: readonly string[] | null = null) {
    this.hwId = hwId;
    this.cardIds = cardIds;
    this.cardJoules = (cardIds ?? []).map(() => 0);
  }

  /** Counts one finished request. */
  observe(record: ProxyRecord): void {
    const key = `outcome="${record.outcome}",method="${record.method}"`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
    if (record.joules === null) return;
    record.cards?.forEach((card, i) => {
      if (card.joules !== null && i < this.cardJoules.length)
        this.cardJoules[i] = (this.cardJoules[i] as number) + card.joules;
    });
    // Only a model the upstream answered for gets a label: a client cannot invent series.
    let model = "";
    if (record.model !== null && record.status !== null && record.status < 300) {
      if (this.models.has(record.model) || this.models.size < MAX_MODELS) {
        this.models.add(record.model);
        model = record.model;
      } else model = "other";
    }
    const labels = `method="${record.method}",model="${escapeLabel(model)}"`;
    let h = this.histograms.get(labels);
    if (h === undefined) {
      h = { buckets: ENERGY_BUCKETS.map(() => 0), count: 0, sum: 0 };
      this.histograms.set(labels, h);
    }
    for (let i = 0; i < ENERGY_BUCKETS.length; i++) {
      if (record.joules <= (ENERGY_BUCKETS[i] as number)) h.buckets[i] = (h.buckets[i] as number) + 1;
    }
    h.count++;
    h.sum += record.joules;
  }

  /** The exposition text. */
  format(cards: readonly CardGauges[]): string {
    const logDropped = this.logDropped?.() ?? null;
    const hw = `hw_id="${escapeLabel(this.hwId)}",hw_type="gpu"`;
    const out: string[] = [
      "# HELP giul_request_energy_joules Energy charged to each request above idle (J): its share of the card while it was in flight. Requests whose energy is unknown are not observed.",
      "# TYPE giul_request_energy_joules histogram",
    ];
    for (const [labels, h] of this.histograms) {
      ENERGY_BUCKETS.forEach((le, i) => {
        out.push(`giul_request_energy_joules_bucket{${hw},${labels},le="${le}"} ${h.buckets[i]}`);
      });
      out.push(`giul_request_energy_joules_bucket{${hw},${labels},le="+Inf"} ${h.count}`);
      out.push(`giul_request_energy_joules_sum{${hw},${labels}} ${num(h.sum)}`);
      out.push(`giul_request_energy_joules_count{${hw},${labels}} ${h.count}`);
    }
    out.push(
      "# HELP giul_proxy_requests_total Requests forwarded, by how they ended and how their energy was obtained.",
      "# TYPE giul_proxy_requests_total counter",
    );
    for (const [labels, n] of this.requests) out.push(`giul_proxy_requests_total{${hw},${labels}} ${n}`);
    out.push(
      "# HELP giul_proxy_requests_in_flight Requests being forwarded now.",
      "# TYPE giul_proxy_requests_in_flight gauge",
      `giul_proxy_requests_in_flight{${hw}} ${this.inFlight}`,
    );
    if (logDropped !== null) {
      out.push(
        "# HELP giul_proxy_log_dropped_total Log lines dropped because the log's destination fell behind.",
        "# TYPE giul_proxy_log_dropped_total counter",
        `giul_proxy_log_dropped_total ${logDropped}`,
      );
    }
    if (this.cardIds !== null) {
      out.push(
        "# HELP giul_card_request_energy_joules_total Energy charged to requests on each card of the node (J): the sum of their sampled parts on it.",
        "# TYPE giul_card_request_energy_joules_total counter",
      );
      this.cardIds.forEach((id, i) => {
        out.push(
          `giul_card_request_energy_joules_total{hw_id="${escapeLabel(id)}",hw_type="gpu"} ${num(this.cardJoules[i] as number)}`,
        );
      });
    }
    const named = (card: CardGauges) => {
      const id = `hw_id="${escapeLabel(card.hwId)}",hw_type="gpu"`;
      return card.name ? `${id},hw_name="${escapeLabel(card.name)}"` : id;
    };
    out.push("# HELP hw_power_watts Instantaneous power of the card (W).", "# TYPE hw_power_watts gauge");
    for (const card of cards)
      if (card.watts != null && Number.isFinite(card.watts))
        out.push(`hw_power_watts{${named(card)}} ${card.watts}`);
    out.push(
      "# HELP hw_energy_joules_total Energy consumed by the card (J): its energy counter, or the integral of its power since sampling started.",
      "# TYPE hw_energy_joules_total counter",
    );
    for (const card of cards)
      if (card.energyJ != null && Number.isFinite(card.energyJ))
        out.push(`hw_energy_joules_total{${named(card)}} ${card.energyJ}`);
    return `${out.join("\n")}\n`;
  }
}
