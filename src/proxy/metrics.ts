/**
 * giul-proxy's /metrics (Prometheus text, version 0.0.4): the energy of each request as a histogram,
 * request counts, and each card's power and energy, under the names and labels every face of giul
 * uses (../exporters/names.ts): `giul_request_energy_joules` and `giul_requests_total` labelled
 * `hw_id`, `hw_type`, `energy_method`, `backend`, `node`, as giul/prometheus has them; the cards'
 * `hw_power_watts` and `hw_energy_joules_total` (energy since the first scrape) labelled
 * as giul-agent has them. The proxy's own families are `giul_proxy_*`. A value that cannot be read
 * is left out, never written as 0.
 */
import {
  CARD_ENERGY,
  CARD_POWER,
  cardLabelText,
  escapeLabel,
  REQUEST_ENERGY,
  REQUESTS,
} from "../exporters/names.js";
import type { CardIdentity } from "../select/in-use.js";
import type { ProxyRecord } from "./record.js";

/** Upper bounds of the histogram's buckets (J): a short embedding to a long generation on a big card. */
export const ENERGY_BUCKETS: readonly number[] = [
  0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
];

/** Distinct models given their own label; the rest are counted as "other". */
const MAX_MODELS = 64;

/** A card as the sampler last read it. */
export interface CardGauges {
  readonly identity: CardIdentity;
  readonly watts: number | null;
  /** Energy since the first scrape (J), or null before the first reading. */
  readonly energyJ: number | null;
}

interface Histogram {
  readonly buckets: number[];
  count: number;
  sum: number;
}

function num(value: number): string {
  return Number.isFinite(value) ? String(value) : "NaN";
}

function bump(map: Map<string, number>, key: string, by: number): void {
  map.set(key, (map.get(key) ?? 0) + by);
}

export class ProxyMetrics {
  /** Requests being forwarded now. */
  inFlight = 0;
  /** Log lines dropped so far, when there is a log (giul-proxy sets it). */
  logDropped: (() => number) | null = null;
  private readonly histograms = new Map<string, Histogram>();
  private readonly requests = new Map<string, number>();
  private readonly outcomes = new Map<string, number>();
  private readonly modelJoules = new Map<string, number>();
  private readonly modelAnswers = new Map<string, number>();
  /** A node of several cards: the joules each card's parts were charged, by card. */
  private readonly cardJoules: number[] | null;

  /**
   * `node`: the request metrics' `hw_id` and `node` labels (./names.ts nodeHwId: read at each
   * scrape, once the cards are known); `cards`: the node's card count.
   */
  constructor(
    private readonly node: () => { readonly hwId: string; readonly name: string },
    cards = 1,
  ) {
    this.cardJoules = cards > 1 ? Array.from({ length: cards }, () => 0) : null;
  }

  /** Counts one finished request. */
  observe(record: ProxyRecord): void {
    const { hwId, name } = this.node();
    const labels = `hw_id="${escapeLabel(hwId)}",hw_type="gpu",energy_method="${record.method}",backend="${escapeLabel(record.backend)}",node="${escapeLabel(name)}"`;
    bump(this.requests, labels, 1);
    bump(
      this.outcomes,
      `hw_id="${escapeLabel(hwId)}",hw_type="gpu",outcome="${record.outcome}",energy_method="${record.method}"`,
      1,
    );
    if (record.joules === null) return;
    record.cards?.forEach((card, i) => {
      const cards = this.cardJoules;
      if (cards !== null && card.joules !== null && i < cards.length)
        cards[i] = (cards[i] as number) + card.joules;
    });
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
    // By model: only a model the upstream answered for gets a label (a client cannot invent
    // series); a request that named none (GET /v1/models) is in no model's series.
    if (record.model !== null && record.status !== null && record.status < 300) {
      const known = this.modelJoules.has(record.model) || this.modelJoules.size < MAX_MODELS;
      const model = known ? record.model : "other";
      bump(this.modelJoules, model, record.joules);
      bump(this.modelAnswers, model, 1);
    }
  }

  /** The exposition text. */
  format(cards: readonly CardGauges[]): string {
    const logDropped = this.logDropped?.() ?? null;
    const { hwId } = this.node();
    const hw = `hw_id="${escapeLabel(hwId)}",hw_type="gpu"`;
    const out: string[] = [
      `# HELP ${REQUEST_ENERGY.prometheus} ${REQUEST_ENERGY.help}`,
      `# TYPE ${REQUEST_ENERGY.prometheus} histogram`,
    ];
    const family = REQUEST_ENERGY.prometheus;
    for (const [labels, h] of this.histograms) {
      ENERGY_BUCKETS.forEach((le, i) => {
        out.push(`${family}_bucket{${labels},le="${le}"} ${h.buckets[i]}`);
      });
      out.push(`${family}_bucket{${labels},le="+Inf"} ${h.count}`);
      out.push(`${family}_sum{${labels}} ${num(h.sum)}`);
      out.push(`${family}_count{${labels}} ${h.count}`);
    }
    out.push(`# HELP ${REQUESTS.prometheus} ${REQUESTS.help}`, `# TYPE ${REQUESTS.prometheus} counter`);
    for (const [labels, n] of this.requests) out.push(`${REQUESTS.prometheus}{${labels}} ${n}`);
    out.push(
      "# HELP giul_proxy_requests_total Requests forwarded, by how they ended and how their energy was obtained.",
      "# TYPE giul_proxy_requests_total counter",
    );
    for (const [labels, n] of this.outcomes) out.push(`giul_proxy_requests_total{${labels}} ${n}`);
    out.push(
      "# HELP giul_proxy_model_energy_joules_total Energy charged to the answers of each model (J above idle; sampled or estimated).",
      "# TYPE giul_proxy_model_energy_joules_total counter",
    );
    for (const [model, j] of this.modelJoules)
      out.push(`giul_proxy_model_energy_joules_total{${hw},model="${escapeLabel(model)}"} ${num(j)}`);
    out.push(
      "# HELP giul_proxy_model_answers_total Answers of each model with an energy figure (those in giul_proxy_model_energy_joules_total).",
      "# TYPE giul_proxy_model_answers_total counter",
    );
    for (const [model, n] of this.modelAnswers)
      out.push(`giul_proxy_model_answers_total{${hw},model="${escapeLabel(model)}"} ${n}`);
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
    if (this.cardJoules !== null) {
      out.push(
        "# HELP giul_card_request_energy_joules_total Energy charged to requests on each card of the node (J): the sum of their sampled parts on it.",
        "# TYPE giul_card_request_energy_joules_total counter",
      );
      cards.forEach((card, i) => {
        const j = this.cardJoules?.[i];
        if (j !== undefined)
          out.push(`giul_card_request_energy_joules_total{${cardLabelText(card.identity)}} ${num(j)}`);
      });
    }
    out.push(`# HELP ${CARD_POWER.prometheus} ${CARD_POWER.help}`, `# TYPE ${CARD_POWER.prometheus} gauge`);
    for (const card of cards)
      if (card.watts !== null && Number.isFinite(card.watts))
        out.push(`${CARD_POWER.prometheus}{${cardLabelText(card.identity)}} ${card.watts}`);
    out.push(
      `# HELP ${CARD_ENERGY.prometheus} ${CARD_ENERGY.help}`,
      `# TYPE ${CARD_ENERGY.prometheus} counter`,
    );
    for (const card of cards)
      if (card.energyJ !== null && Number.isFinite(card.energyJ))
        out.push(`${CARD_ENERGY.prometheus}{${cardLabelText(card.identity)}} ${card.energyJ}`);
    return `${out.join("\n")}\n`;
  }
}
