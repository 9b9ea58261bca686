/**
 * GET /metrics: the Prometheus text exposition format (version 0.0.4), one series per served GPU,
 * labelled `gpu` (index) and `name`. A value that cannot be read is left out (Prometheus has no
 * null), never written as 0.
 */
import type { DeviceState } from "./monitor.js";

export interface GpuMetrics {
  readonly gpu: number;
  readonly backend: string;
  readonly state: DeviceState;
  readonly watts: number | null;
  readonly energyJ: number | null;
}

/** A label value with \\, " and newline escaped, as the format requires. */
export function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function num(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(value);
}

const FAMILIES: readonly {
  name: string;
  type: "gauge" | "counter";
  help: string;
  value: (g: GpuMetrics) => number | null;
}[] = [
  { name: "giul_power_watts", type: "gauge", help: "Board power draw (W).", value: (g) => g.watts },
  {
    name: "giul_energy_joules_total",
    type: "counter",
    help: "Cumulative energy read by the agent's sampler (J): the card's energy counter, or the integral of power since the sampler started.",
    value: (g) => g.energyJ,
  },
  {
    name: "giul_memory_used_bytes",
    type: "gauge",
    help: "Device memory in use (bytes).",
    value: (g) => mib(g.state.memoryUsedMib),
  },
  {
    name: "giul_memory_total_bytes",
    type: "gauge",
    help: "Device memory in total (bytes).",
    value: (g) => mib(g.state.memoryTotalMib),
  },
  {
    name: "giul_memory_free_bytes",
    type: "gauge",
    help: "Device memory free (bytes).",
    value: (g) => mib(g.state.memoryFreeMib),
  },
  {
    name: "giul_utilization_ratio",
    type: "gauge",
    help: "GPU utilization over the driver's last sample period (0 to 1).",
    value: (g) => (g.state.utilizationPct === null ? null : g.state.utilizationPct / 100),
  },
  {
    name: "giul_compute_processes",
    type: "gauge",
    help: "Compute processes resident on the card.",
    value: (g) => (g.state.computeApps === null ? null : g.state.computeApps.length),
  },
];

function mib(value: number | null): number | null {
  return value === null ? null : Math.round(value * 1048576);
}

/** The exposition text for the given GPUs and agent version. */
export function formatMetrics(gpus: readonly GpuMetrics[], version: string): string {
  const out: string[] = [];
  const labels = (g: GpuMetrics) => `gpu="${g.gpu}",name="${escapeLabel(g.state.name ?? "")}"`;
  for (const family of FAMILIES) {
    out.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`);
    for (const g of gpus) {
      const v = family.value(g);
      if (v !== null && Number.isFinite(v)) out.push(`${family.name}{${labels(g)}} ${num(v)}`);
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
