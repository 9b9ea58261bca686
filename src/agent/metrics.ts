/**
 * GET /metrics: the Prometheus text exposition format (version 0.0.4), one series per served GPU.
 * A value that cannot be read is left out (Prometheus has no null), never written as 0.
 *
 * The card's figures carry OpenTelemetry's hardware names, as giul/prometheus and giul/otel report
 * them (`hw_energy_joules_total`, `hw_power_watts`, `hw_gpu_memory_usage_bytes`,
 * `hw_gpu_memory_limit_bytes`, `hw_gpu_utilization_ratio`, labelled `hw_id`, `hw_type`, `hw_name`,
 * `hw_vendor`, `hw_driver_version`: ../exporters/names.ts). The names of giul 0.1 (`giul_power_watts`,
 * `giul_energy_joules_total`, `giul_memory_used_bytes`, `giul_memory_total_bytes`,
 * `giul_utilization_ratio`, labelled `gpu` and `name`) are kept for this release as deprecated
 * aliases; `giul_memory_free_bytes`, `giul_compute_processes` and `giul_agent_info`, which have no
 * hardware name, stay.
 */
import { CARD_ENERGY, CARD_POWER, cardLabelText, escapeLabel } from "../exporters/names.js";
import type { CardIdentity } from "../select/in-use.js";
import type { DeviceState } from "./monitor.js";

export interface GpuMetrics {
  readonly gpu: number;
  readonly backend: string;
  readonly state: DeviceState;
  readonly watts: number | null;
  /** The sampler's cumulative column now (J): the deprecated giul_energy_joules_total. */
  readonly energyJ: number | null;
  /** Energy since the first scrape, never decreasing (J): hw_energy_joules_total. */
  readonly energyTotalJ: number | null;
  /** Who the card is (hw_* labels). */
  readonly identity: CardIdentity;
}

function num(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(value);
}

interface Family {
  readonly name: string;
  readonly type: "gauge" | "counter";
  readonly help: string;
  /** `hw`: the hardware conventions' labels; `giul`: gpu and name (giul 0.1's). */
  readonly labels: "hw" | "giul";
  readonly value: (g: GpuMetrics) => number | null;
}

const memoryUsed = (g: GpuMetrics) => mib(g.state.memoryUsedMib);
const memoryTotal = (g: GpuMetrics) => mib(g.state.memoryTotalMib);
const utilization = (g: GpuMetrics) =>
  g.state.utilizationPct === null ? null : g.state.utilizationPct / 100;
const deprecated = (instead: string) => ` Deprecated: use ${instead}; removed in the next release.`;

const FAMILIES: readonly Family[] = [
  {
    name: CARD_ENERGY.prometheus,
    type: "counter",
    help: CARD_ENERGY.help,
    labels: "hw",
    value: (g) => g.energyTotalJ,
  },
  {
    name: CARD_POWER.prometheus,
    type: "gauge",
    help: CARD_POWER.help,
    labels: "hw",
    value: (g) => g.watts,
  },
  {
    name: "hw_gpu_memory_usage_bytes",
    type: "gauge",
    help: "GPU memory in use (bytes).",
    labels: "hw",
    value: memoryUsed,
  },
  {
    name: "hw_gpu_memory_limit_bytes",
    type: "gauge",
    help: "Size of the GPU memory (bytes).",
    labels: "hw",
    value: memoryTotal,
  },
  {
    name: "hw_gpu_utilization_ratio",
    type: "gauge",
    help: "GPU utilization over the driver's last sample period (0 to 1).",
    labels: "hw",
    value: utilization,
  },
  {
    name: "giul_memory_free_bytes",
    type: "gauge",
    help: "Device memory free (bytes).",
    labels: "giul",
    value: (g) => mib(g.state.memoryFreeMib),
  },
  {
    name: "giul_compute_processes",
    type: "gauge",
    help: "Compute processes resident on the card.",
    labels: "giul",
    value: (g) => (g.state.computeApps === null ? null : g.state.computeApps.length),
  },
  {
    name: "giul_power_watts",
    type: "gauge",
    help: `Board power draw (W).${deprecated("hw_power_watts")}`,
    labels: "giul",
    value: (g) => g.watts,
  },
  {
    name: "giul_energy_joules_total",
    type: "counter",
    help:
      "Cumulative energy read by the agent's sampler (J): the card's energy counter, or the integral of power " +
      `since the sampler started.${deprecated("hw_energy_joules_total")}`,
    labels: "giul",
    value: (g) => g.energyJ,
  },
  {
    name: "giul_memory_used_bytes",
    type: "gauge",
    help: `Device memory in use (bytes).${deprecated("hw_gpu_memory_usage_bytes")}`,
    labels: "giul",
    value: memoryUsed,
  },
  {
    name: "giul_memory_total_bytes",
    type: "gauge",
    help: `Device memory in total (bytes).${deprecated("hw_gpu_memory_limit_bytes")}`,
    labels: "giul",
    value: memoryTotal,
  },
  {
    name: "giul_utilization_ratio",
    type: "gauge",
    help: `GPU utilization over the driver's last sample period (0 to 1).${deprecated("hw_gpu_utilization_ratio")}`,
    labels: "giul",
    value: utilization,
  },
];

function mib(value: number | null): number | null {
  return value === null ? null : Math.round(value * 1048576);
}

/** The exposition text for the given GPUs and agent version. */
export function formatMetrics(gpus: readonly GpuMetrics[], version: string): string {
  const out: string[] = [];
  const labels = {
    giul: (g: GpuMetrics) => `gpu="${g.gpu}",name="${escapeLabel(g.state.name ?? "")}"`,
    hw: hwLabels,
  };
  for (const family of FAMILIES) {
    out.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`);
    for (const g of gpus) {
      const v = family.value(g);
      if (v !== null && Number.isFinite(v)) out.push(`${family.name}{${labels[family.labels](g)}} ${num(v)}`);
    }
  }
  out.push(
    "# HELP giul_agent_info The agent and the backend reading each card.",
    "# TYPE giul_agent_info gauge",
  );
  for (const g of gpus) {
    out.push(
      `giul_agent_info{gpu="${g.gpu}",backend="${escapeLabel(g.backend)}",version="${escapeLabel(version)}"} 1`,
    );
  }
  return `${out.join("\n")}\n`;
}

/** The card's labels (./names.ts); its model name from the state where the probe had none. */
function hwLabels(g: GpuMetrics): string {
  const id = g.identity;
  const named = id.name === `gpu${g.gpu}` && g.state.name !== null ? { ...id, name: g.state.name } : id;
  return cardLabelText(named);
}
