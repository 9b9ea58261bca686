/**
 * The one set of names giul's figures carry wherever they are exported: giul-proxy's and
 * giul-agent's /metrics, giul/prometheus, giul/otel. Each metric is named once, as OpenTelemetry
 * names it and as Prometheus spells it, with one HELP text; the card is labelled the same way
 * everywhere (OpenTelemetry's hardware conventions): `hw_id` its UUID, `hw_name` its model name,
 * `hw_type="gpu"`, `hw_vendor`, `hw_driver_version` where known. The README's table of names is
 * checked against what every face emits (test/names.test.ts).
 */
import type { NodeCard, ResolvedNode } from "../rules/node.js";
import { type CardIdentity, cardInUse } from "../select/in-use.js";

export interface MetricName {
  /** The OpenTelemetry instrument's name. */
  readonly otel: string;
  /** The Prometheus family's name (giul-proxy, giul-agent, giul/prometheus). */
  readonly prometheus: string;
  readonly unit: string;
  readonly help: string;
}

export const REQUEST_ENERGY: MetricName = {
  otel: "giul.request.energy",
  prometheus: "giul_request_energy_joules",
  unit: "J",
  help: "Energy charged to each metered request above idle (J): its share of its cards while it was in flight, sampled or estimated as energy_method says. Requests whose energy is unknown are not observed.",
};

export const REQUESTS: MetricName = {
  otel: "giul.requests",
  prometheus: "giul_requests_total",
  unit: "{request}",
  help: "Metered requests (windows closed), by how their energy was obtained: unknown ones included.",
};

export const CARD_ENERGY: MetricName = {
  otel: "hw.energy",
  prometheus: "hw_energy_joules_total",
  unit: "J",
  help: "Energy consumed by the GPU since this exporter first read it, at its first scrape or collection (J): starts at 0 there and never decreases, so rate() of it is the card's power.",
};

export const CARD_POWER: MetricName = {
  otel: "hw.power",
  prometheus: "hw_power_watts",
  unit: "W",
  help: "Instantaneous power consumed by the GPU: the newest sample of giul's sampler (W).",
};

/** The labels of the per-request metrics, as Prometheus and OpenTelemetry name them. */
export const REQUEST_LABELS = {
  hwId: { prometheus: "hw_id", otel: "hw.id" },
  hwType: { prometheus: "hw_type", otel: "hw.type" },
  method: { prometheus: "energy_method", otel: "giul.energy.method" },
  backend: { prometheus: "backend", otel: "giul.energy.backend" },
  node: { prometheus: "node", otel: "giul.node" },
} as const;

/** The card's labels in the order every face writes them, without the unknown ones. */
export function cardLabels(identity: CardIdentity): [string, string][] {
  const out: [string, string][] = [
    ["hw_id", identity.id],
    ["hw_type", "gpu"],
    ["hw_name", identity.name],
    ["hw_vendor", identity.vendor],
  ];
  if (identity.driverVersion !== null) out.push(["hw_driver_version", identity.driverVersion]);
  return out;
}

/** The card's labels as OpenTelemetry attributes (`hw.id`, `hw.type`, …). */
export function cardAttributes(identity: CardIdentity): Record<string, string> {
  return Object.fromEntries(cardLabels(identity).map(([k, v]) => [k.replace("_", "."), v]));
}

/** A label value with \\, " and newline escaped, as the Prometheus text format requires. */
export function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

/** The card's labels as Prometheus text (`hw_id="…",hw_type="gpu",…`). */
export function cardLabelText(identity: CardIdentity): string {
  return cardLabels(identity)
    .map(([k, v]) => `${k}="${escapeLabel(v)}"`)
    .join(",");
}

/**
 * The `hw_id` of a node's request metrics: its card's UUID (the UUIDs of its cards, comma-joined,
 * tensor parallel), `gpu<index>` where no UUID is known, a remote node's name.
 */
export function nodeHwId(node: ResolvedNode): string {
  if (!node.isLocal) return node.name;
  const cards = node.cards;
  return cards.length === 1 ? cardHwId(cards[0] as NodeCard) : cards.map(cardHwId).join(",");
}

function cardHwId(c: NodeCard): string {
  if (c.gpuUuid !== null) return c.gpuUuid;
  return cardInUse(c.gpuIndex)?.identity.id ?? `gpu${c.gpuIndex}`;
}
