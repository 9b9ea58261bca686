#!/usr/bin/env node
/**
 * giul-probe: what this host supports for GPU energy metering, for a person (default) or as one
 * JSON object (--json). Exits 0 whatever the host lacks; 2 only for bad arguments.
 */
import type { BackendName } from "../measurement.js";
import { type HostDevice, type HostReport, probeHost } from "../select/host.js";

const USAGE = `Usage: giul-probe [--json]

Prints what this host supports for GPU energy metering: whether the giul addon and NVML
loaded (and the driver version, or why not), whether nvidia-smi is on PATH, and for each
NVIDIA card its name, memory, energy-counter and instantaneous-power support, and the
backend a local Meter would use.

Options:
  --json      print one JSON object instead of text
  -h, --help  print this help

Environment:
  GIUL_NVML_LIBRARY   load this file instead of libnvidia-ml.so.1
  GIUL_NVIDIA_SMI     use this nvidia-smi instead of searching PATH
  GIUL_ADDON_PATH     load the addon from this file
  GIUL_DISABLE_ADDON  set to 1 to run without the addon
`;

/** One line on what a backend means for a person reading the probe. */
export const BACKEND_MEANING: Readonly<Record<BackendName, string>> = {
  nvml_counter: "reads the card's own energy counter at each window's edges (the most accurate)",
  nvml_sampler: "no energy counter: integrates NVML power readings taken on a native sampling thread",
  smi_sampler: "no NVML: integrates power read from a long-lived nvidia-smi (coarser)",
  remote_agent: "asks a giul-agent on the GPU's host over HTTP",
  none: "cannot measure this card: figures will be estimated (with a hint) or unknown",
};

type Parsed =
  | { readonly kind: "run"; readonly json: boolean }
  | { readonly kind: "help" }
  | { readonly kind: "bad"; readonly message: string };

export function parseArgs(args: readonly string[]): Parsed {
  let json = false;
  for (const arg of args) {
    if (arg === "--json") json = true;
    else if (arg === "-h" || arg === "--help") return { kind: "help" };
    else return { kind: "bad", message: `giul-probe: unknown argument ${JSON.stringify(arg)}` };
  }
  return { kind: "run", json };
}

const yesNo = (value: boolean): string => (value ? "yes" : "no");

function rows(pairs: ReadonlyArray<readonly [string, string]>, indent = ""): string[] {
  const width = Math.max(...pairs.map(([label]) => label.length));
  return pairs.map(([label, value]) => `${indent}${label.padEnd(width)}  ${value}`);
}

function memory(device: HostDevice): string {
  if (device.memoryTotalMib === null) return "unknown";
  const used = device.memoryUsedMib === null ? "?" : String(device.memoryUsedMib);
  return `${used} / ${device.memoryTotalMib} MiB used`;
}

/** What the smi_sampler would read per card (instantaneous or averaged power), after its path. */
function smiPowerText(probe: HostReport["smiPower"]): string {
  if (probe === null) return "";
  if (!probe.ok) return ` (cannot read power: ${probe.reason})`;
  const cards = probe.devices.map((d) => {
    if (d.power === "instant") return `GPU ${d.index} power.draw.instant`;
    if (d.power === "averaged") return `GPU ${d.index} power.draw only (a 1 s average on recent cards)`;
    return `GPU ${d.index} unreadable (${d.reason})`;
  });
  return ` (${cards.join("; ")})`;
}

/** The report as text for a person. */
export function formatHuman(report: HostReport): string {
  const { addon, nvml, smi, devices } = report;
  const lines: string[] = [];
  lines.push(
    ...rows([
      ["addon", addon.loaded ? `loaded (${addon.path})` : `not loaded: ${addon.reason}`],
      [
        "NVML",
        nvml.available
          ? `loaded from ${nvml.library}, driver ${nvml.driverVersion ?? "unknown"}, ${nvml.deviceCount} device(s)`
          : `unavailable: ${addon.loaded ? nvml.reason : "the giul addon, through which NVML is read, is not loaded"}`,
      ],
      [
        "nvidia-smi",
        smi.path === null ? `not found (${smi.reason})` : `${smi.path}${smiPowerText(report.smiPower)}`,
      ],
    ]),
  );
  lines.push("");
  if (devices.length === 0) {
    const reason = nvml.available
      ? "NVML reports no devices"
      : addon.loaded
        ? (nvml.reason ?? "NVML is unavailable")
        : "NVML cannot be reached without the giul addon (see above)";
    lines.push(`No NVIDIA GPU found: ${reason}`);
    if (smi.path !== null) lines.push(`(nvidia-smi was found at ${smi.path}; a Meter may use it.)`);
    return `${lines.join("\n")}\n`;
  }
  for (const device of devices) {
    lines.push(`GPU ${device.index}  ${device.name ?? "(name unknown)"}`);
    const pairs: Array<readonly [string, string]> = [
      ["uuid", device.uuid ?? "unknown"],
      ["memory", memory(device)],
      ["energy counter", yesNo(device.energyCounter)],
      ["instantaneous power", yesNo(device.instantPower)],
      ["backend", `${device.backend}: ${BACKEND_MEANING[device.backend]}`],
    ];
    if (device.reason !== null) pairs.push(["unreadable", device.reason]);
    lines.push(...rows(pairs, "  "), "");
  }
  return `${lines.join("\n")}`;
}

/** The report as the one JSON object `--json` prints. */
export function formatJson(report: HostReport): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}

export async function main(args: readonly string[]): Promise<number> {
  const parsed = parseArgs(args);
  if (parsed.kind === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  if (parsed.kind === "bad") {
    process.stderr.write(`${parsed.message}\n\n${USAGE}`);
    return 2;
  }
  const report = await probeHost();
  process.stdout.write(parsed.json ? formatJson(report) : formatHuman(report));
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(
      `giul-probe: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
