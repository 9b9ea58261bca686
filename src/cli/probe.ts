#!/usr/bin/env node
/**
 * giul-probe: what this host supports for GPU energy metering, for a person (default) or as one
 * JSON object (--json). Exits 0 whatever the host lacks; 2 only for bad arguments.
 */
import { type IdleResult, measureIdle } from "../idle.js";
import type { BackendName } from "../measurement.js";
import { type HostDevice, type HostReport, probeHost } from "../select/host.js";

const USAGE = `Usage: giul-probe [--json]
       giul-probe --idle [--gpu N] [--seconds 30] [--json]

Prints what this host supports for GPU energy metering: whether the giul addon and NVML
loaded (and the driver version, or why not), whether nvidia-smi is on PATH, and for each
NVIDIA card its name, memory, energy-counter and instantaneous-power support, and the
backend a local Meter would use.

With --idle, measures a card's idle draw instead: its power sampled for --seconds while no
compute process is on it (refused, exit 2, if one is resident or appears), as the median,
5th and 95th percentiles and the energy counter's average, with a line to paste into the
card's Node (idleW). giul never applies it by itself.

Options:
  --json         print one JSON object instead of text
  --idle         measure the idle draw of a card
  --gpu N        the card to measure (default 0)
  --seconds S    how long to measure (1..3600, default 30)
  -h, --help     print this help

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
  | { readonly kind: "idle"; readonly json: boolean; readonly gpu: number; readonly seconds: number }
  | { readonly kind: "help" }
  | { readonly kind: "bad"; readonly message: string };

export function parseArgs(args: readonly string[]): Parsed {
  let json = false;
  let idle = false;
  let gpu: number | null = null;
  let seconds: number | null = null;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "--json") json = true;
    else if (arg === "--idle") idle = true;
    else if (arg === "-h" || arg === "--help") return { kind: "help" };
    else if (arg === "--gpu" || arg === "--seconds") {
      const raw = args[++i];
      const value = raw === undefined || raw.trim() === "" ? Number.NaN : Number(raw);
      if (arg === "--gpu" && !(Number.isInteger(value) && value >= 0 && value <= 1023)) {
        return {
          kind: "bad",
          message: `giul-probe: --gpu expects a card index from 0 to 1023, got ${JSON.stringify(raw ?? "")}`,
        };
      }
      if (arg === "--seconds" && !(Number.isFinite(value) && value >= 1 && value <= 3600)) {
        return {
          kind: "bad",
          message: `giul-probe: --seconds expects a number from 1 to 3600, got ${JSON.stringify(raw ?? "")}`,
        };
      }
      if (arg === "--gpu") gpu = value;
      else seconds = value;
    } else return { kind: "bad", message: `giul-probe: unknown argument ${JSON.stringify(arg)}` };
  }
  if (!idle && (gpu !== null || seconds !== null)) {
    return { kind: "bad", message: "giul-probe: --gpu and --seconds go with --idle" };
  }
  return idle ? { kind: "idle", json, gpu: gpu ?? 0, seconds: seconds ?? 30 } : { kind: "run", json };
}

/** The idle measurement for a person: the figures and the line to paste. */
export function formatIdle(result: IdleResult): string {
  if (!result.ok) return `giul-probe: ${result.reason}\n`;
  const w = (x: number) => `${x.toFixed(1)} W`;
  const counter =
    result.counterAvgW === null
      ? "no energy counter"
      : `the energy counter's average ${w(result.counterAvgW)}`;
  return [
    `GPU ${result.gpuIndex} idle over ${result.seconds} s (${result.backend}, ${result.samples} power samples):`,
    `  median ${w(result.medianW)}, p5 ${w(result.p5W)}, p95 ${w(result.p95W)}; ${counter}`,
    `  paste into this card's Node:  idleW: ${result.medianW.toFixed(1)}`,
    "",
  ].join("\n");
}

async function idle(parsed: Extract<Parsed, { kind: "idle" }>): Promise<number> {
  const tty = process.stderr.isTTY === true;
  const result = await measureIdle({
    gpuIndex: parsed.gpu,
    seconds: parsed.seconds,
    onProgress: tty
      ? (done, total) =>
          process.stderr.write(`\rmeasuring GPU ${parsed.gpu}'s idle draw… ${Math.floor(done)}/${total} s`)
      : null,
  });
  if (tty) process.stderr.write("\r\x1b[K");
  if (!result.ok) {
    process.stderr.write(formatIdle(result));
    return 2;
  }
  const { ok: _ok, ...fields } = result;
  process.stdout.write(parsed.json ? `${JSON.stringify(fields, null, 2)}\n` : formatIdle(result));
  return 0;
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
  if (parsed.kind === "idle") return idle(parsed);
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
