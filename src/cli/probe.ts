#!/usr/bin/env node
/**
 * giul-probe: what this host supports for GPU energy metering, for a person (default) or as one
 * JSON object (--json). Exits 0 whatever the host lacks; 2 only for bad arguments.
 */
import { type IdleResult, measureIdle } from "../idle.js";
import { Meter } from "../meter/meter.js";
import { type HostDevice, type HostReport, probeHost } from "../select/host.js";
import { forcedBackend } from "../select/index.js";
import { findSlice, isSliceUuid } from "../select/mig.js";
import { descriptorOf } from "../select/registry.js";
import { disableAddonProblem } from "../sources/native/binding.js";
import { simulateCard } from "../testing.js";
import { GiulError } from "../vocabulary/errors.js";
import type { BackendName } from "../vocabulary/measurement.js";
import { type Flag, helpOrVersion, readCommandLine } from "./args.js";
import { BACKEND_MEANING } from "./meaning.js";
import { type SensorSeen, sensorRows, watchSensors } from "./sensor.js";
import { watch } from "./watch.js";

/** How long a plain probe watches each card's sensors (s; --seconds changes it). */
const SENSOR_SECONDS = 2;

const USAGE = `Usage: giul-probe [--json] [--seconds 2]
       giul-probe --idle [--gpu N[,N…]] [--seconds 30] [--json]
       giul-probe --watch [--gpu N]
       giul-probe --demo [--json]

Prints what this host supports for GPU energy metering: whether the giul addon and NVML
loaded (and the driver version, or why not), whether nvidia-smi is on PATH, and for each
NVIDIA card its name, memory, energy-counter and instantaneous-power support, the backend
a local Meter would use, and what its sensors did while watched for --seconds (default 2):
how often the energy counter updates (median and spread), how often the power reading
refreshes, and whether bars place the counter's updates by a lock onto its cadence. A card
in MIG mode lists its slices (UUID, profile, memory, processes): each is metered as its
share of the card.

With --watch, prints a line a second per card (or for --gpu N) until interrupted: its power
and the energy it drew since the watch started, through the backend a Meter would use.

With --demo, meters three overlapping requests on a simulated card (giul/testing; no hardware
is touched or measured) and prints their records: what a server using giul would log.

With --idle, measures a card's idle draw instead: its power sampled for --seconds while no
compute process is on it (refused, exit 2, if one is resident or appears), as the median,
5th and 95th percentiles and the energy counter's average, with a line to paste into the
card's Node (idleW). giul never applies it by itself. A MIG slice (--gpu MIG-…) is refused,
naming its card: a slice has no sensor, and its windows are charged above the card's floor.

Options:
  -j, --json         print one JSON object instead of text
      --idle         measure the idle draw of a card
      --watch        print each card's power and energy since start, every second
      --demo         meter a few requests on a simulated card and print their records
  -g, --gpu N        the card to measure (--idle: a list, default every card; --watch: default
                     every card)
  -s, --seconds S    how long to watch the sensors (default 2) or to measure idle (default
                     30); 1..3600
  -h, --help         print this help
      --version      print giul's version

Environment:
  GIUL_NVML_LIBRARY   load this file instead of libnvidia-ml.so.1
  GIUL_AMDSMI_LIBRARY load this file instead of libamd_smi.so.26 (AMD cards)
  GIUL_AMD_SMI        use this amd-smi instead of searching PATH and /opt/rocm/bin
  GIUL_NVIDIA_SMI     use this nvidia-smi instead of searching PATH
  GIUL_ADDON_PATH     load the addon from this file
  GIUL_DISABLE_ADDON  set to 1 to run without the addon
  GIUL_BACKEND        force a backend (nvml_counter, nvml_sampler, amdsmi_counter,
                      amdsmi_sampler, smi_sampler, none),
                      for diagnosis; an unknown name is refused (exit 2)
  NODE_DEBUG=giul     print giul's decisions as they are made
`;

type Parsed =
  | { readonly kind: "run"; readonly json: boolean; readonly seconds: number }
  | {
      readonly kind: "idle";
      readonly json: boolean;
      /** The cards to measure; null: every card the host has. */
      readonly gpus: readonly number[] | null;
      readonly seconds: number;
    }
  | { readonly kind: "idleSlice"; readonly slice: string }
  | { readonly kind: "watch"; readonly gpu: number | null }
  | { readonly kind: "demo"; readonly json: boolean }
  | { readonly kind: "help" }
  | { readonly kind: "version" }
  | { readonly kind: "bad"; readonly message: string };

const FLAGS: Readonly<Record<string, Flag>> = {
  json: { type: "boolean", short: "j" },
  idle: { type: "boolean" },
  watch: { type: "boolean" },
  demo: { type: "boolean" },
  gpu: { type: "string", short: "g" },
  seconds: { type: "string", short: "s" },
};

export function parseArgs(args: readonly string[]): Parsed {
  const line = readCommandLine(args, FLAGS);
  const bad = (message: string): Parsed => ({ kind: "bad", message: `giul-probe: ${message}` });
  if (line.kind === "bad") return bad(line.message);
  if (line.kind !== "parsed") return line;
  const json = line.on("json");
  const [idle, watch, demo] = [line.on("idle"), line.on("watch"), line.on("demo")];
  const rawGpu = line.text("gpu");
  const rawSeconds = line.text("seconds");
  const number = (v: string) => (v.trim() === "" ? Number.NaN : Number(v));
  // A MIG slice has no sensor: its idle draw is the card's (main() names the card to measure).
  if (idle && rawGpu !== undefined && isSliceUuid(rawGpu)) return { kind: "idleSlice", slice: rawGpu };
  const gpus = rawGpu === undefined ? null : rawGpu.split(",").map(number);
  if (gpus !== null && !gpus.every((v) => Number.isInteger(v) && v >= 0 && v <= 1023)) {
    return bad(
      `--gpu expects a card index from 0 to 1023 (or, with --idle, a comma-separated list), got ${JSON.stringify(rawGpu)}`,
    );
  }
  const seconds = rawSeconds === undefined ? null : number(rawSeconds);
  if (seconds !== null && !(Number.isFinite(seconds) && seconds >= 1 && seconds <= 3600))
    return bad(`--seconds expects a number from 1 to 3600, got ${JSON.stringify(rawSeconds)}`);
  const gpu = gpus === null ? null : (gpus[0] as number);
  if ([idle, watch, demo].filter(Boolean).length > 1)
    return bad("--idle, --watch and --demo are different runs: pick one");
  if (demo) {
    if (gpus !== null || seconds !== null) return bad("--demo takes only --json");
    return { kind: "demo", json };
  }
  if (!idle && gpus !== null && gpus.length > 1)
    return bad("a list of cards goes with --idle (--watch shows every card)");
  if (watch) {
    if (seconds !== null) return bad("--seconds goes with --idle");
    return { kind: "watch", gpu };
  }
  if (!idle && gpus !== null) return bad("--gpu goes with --idle or --watch");
  return idle
    ? { kind: "idle", json, gpus, seconds: seconds ?? 30 }
    : { kind: "run", json, seconds: seconds ?? SENSOR_SECONDS };
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

/** --idle: every card given (or the host's), measured at once; exit 2 when any could not be. */
async function idle(parsed: Extract<Parsed, { kind: "idle" }>): Promise<number> {
  const tty = process.stderr.isTTY === true;
  const host = parsed.gpus === null ? (await probeHost()).devices.map((d) => d.index) : parsed.gpus;
  const cards = host.length === 0 ? [0] : host; // no card: card 0's measurement says why
  const which =
    cards.length === 1 ? `GPU ${cards[0]}'s idle draw` : `the idle draw of GPUs ${cards.join(", ")}`;
  const results = await Promise.all(
    cards.map((gpuIndex, i) =>
      measureIdle({
        gpuIndex,
        seconds: parsed.seconds,
        onProgress:
          tty && i === 0
            ? (done, total) => process.stderr.write(`\rmeasuring ${which}… ${Math.floor(done)}/${total} s`)
            : null,
      }),
    ),
  );
  if (tty) process.stderr.write("\r\x1b[K");
  const fields = results.map((r, i) => {
    if (!r.ok) return { gpuIndex: cards[i], reason: r.reason };
    const { ok: _ok, ...rest } = r;
    return rest;
  });
  if (parsed.json) {
    const out = results.length === 1 ? fields[0] : { cards: fields };
    if (results.length > 1 || results[0]?.ok) process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    else process.stderr.write(formatIdle(results[0] as IdleResult));
  } else {
    for (const r of results) (r.ok ? process.stdout : process.stderr).write(formatIdle(r));
    if (results.length > 1 && results.every((r) => r.ok)) {
      const idles = results.map((r) => (r.ok ? r.medianW.toFixed(1) : "?"));
      process.stdout.write(
        `paste into the tensor-parallel Node:  gpuIndex: [${cards.join(", ")}], idleW: [${idles.join(", ")}]\n`,
      );
    }
  }
  return results.every((r) => r.ok) ? 0 : 2;
}

/**
 * --demo: three overlapping requests with stages on a simulated card (90 W idle, 300 W while
 * "generating"), their records printed. Nothing real is touched: the card is simulateCard()'s.
 */
async function demoRun(json: boolean): Promise<number> {
  const gpuIndex = 1023; // an index no real card has: the demo never shadows one
  const card = simulateCard({ gpuIndex, watts: (s) => (s % 0.6 < 0.4 ? 300 : 90) });
  const node = { name: "demo", gpuIndex, idleW: 90 };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  try {
    const records = await Promise.all(
      [0, 80, 160].map(async (delay, i) => {
        await sleep(delay);
        const m = await Meter.forNode(node, { joulesPer1kHint: 4000 }).open();
        await sleep(60);
        m.mark("prefill");
        await sleep(200 + 40 * i);
        m.mark("decode");
        await m.close();
        return m.result({ tokens: 120 + 40 * i });
      }),
    );
    if (json) process.stdout.write(`${JSON.stringify(records, null, 2)}\n`);
    else {
      process.stdout.write("Three overlapping requests on a simulated card (no hardware measured):\n\n");
      records.forEach((e, i) => {
        process.stdout.write(
          `request ${i + 1}: ${e.joules?.toFixed(2)} J ± ${e.uncertaintyJoules?.toFixed(2)} (${e.method}, ${e.backend}), ` +
            `${e.seconds.toFixed(3)} s, up to ${e.concurrency?.max} windows at once, the card ${e.cardJoules?.toFixed(2)} J\n` +
            `  record: ${JSON.stringify(e)}\n\n`,
        );
      });
    }
    return 0;
  } finally {
    card.close();
  }
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

/** The backend line of a card: what a Meter would use, or what GIUL_BACKEND forces and whether it can. */
function backendLine(device: HostDevice, smiFound: boolean, forced: BackendName | null): string {
  if (forced === null) return `${device.backend}: ${BACKEND_MEANING[device.backend]}`;
  const caps = {
    nvml: device.reason === null,
    energyCounter: device.energyCounter,
    nvmlPower: device.instantPower || device.powerUsage,
    smi: smiFound,
  };
  const card = { isLocal: true, gpuIndex: device.index, powerEndpoint: null, timeoutMs: 0 };
  const serves = forced === "none" || (descriptorOf(forced)?.canServe(card, caps) ?? false);
  return serves
    ? `${forced} (forced by GIUL_BACKEND; without it: ${device.backend}): ${BACKEND_MEANING[forced]}`
    : `${forced} is forced by GIUL_BACKEND but cannot serve this card: a Meter on it refuses to open (BACKEND_UNAVAILABLE); without it: ${device.backend}`;
}

/** The report as text for a person (`forced`: GIUL_BACKEND's backend, or null). */
export function formatHuman(
  report: HostReport,
  forced: BackendName | null = null,
  sensors: ReadonlyMap<string, SensorSeen | string> = new Map(),
): string {
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
      ...amdRow(report),
      [
        "nvidia-smi",
        smi.path === null ? `not found (${smi.reason})` : `${smi.path}${smiPowerText(report.smiPower)}`,
      ],
    ]),
  );
  lines.push("");
  if (devices.length === 0) {
    // Why is said once, in the lines above: this line points to it.
    const reason = nvml.available
      ? "NVML reports no devices"
      : addon.loaded
        ? "NVML is unavailable (see above)"
        : "NVML cannot be reached without the giul addon (see above)";
    const smiCards = report.smiPower?.ok ? report.smiPower.devices : [];
    if (smiCards.length === 0) {
      lines.push(`No NVIDIA GPU found: ${reason}`);
      if (smi.path !== null)
        lines.push(`(nvidia-smi was found at ${smi.path} but lists no card it can read.)`);
      return `${lines.join("\n")}\n`;
    }
    lines.push(`Cards seen only through nvidia-smi (NVML: ${reason}):`, "");
    for (const card of smiCards) {
      lines.push(`GPU ${card.index}`);
      const power =
        card.watts === null
          ? `unreadable (${card.reason ?? "no number"})`
          : `${card.watts.toFixed(1)} W (${card.power === "instant" ? "power.draw.instant" : "power.draw, a 1 s average on recent cards"})`;
      lines.push(
        ...rows(
          [
            ["power now", power],
            ["backend", `smi_sampler: ${BACKEND_MEANING.smi_sampler}`],
          ],
          "  ",
        ),
        "",
      );
    }
    return `${lines.join("\n")}`;
  }
  for (const device of devices) {
    lines.push(`GPU ${device.index}  ${device.name ?? "(name unknown)"}`);
    const pairs: Array<readonly [string, string]> = [
      ["uuid", device.uuid ?? "unknown"],
      ["memory", memory(device)],
      [
        "energy counter",
        device.counterRefused ? `not used: ${device.counterRefused}` : yesNo(device.energyCounter),
      ],
      ["instantaneous power", yesNo(device.instantPower)],
      ["power now", powerNow(device)],
      ["backend", backendLine(device, smi.path !== null, forced)],
    ];
    if (device.reason !== null) pairs.push(["unreadable", device.reason]);
    const seen = sensors.get(deviceKey(device));
    if (seen !== undefined) pairs.push(...sensorRows(seen));
    if (device.mig !== null) pairs.push(...migRows(device.mig, device.backend));
    lines.push(...rows(pairs, "  "), "");
  }
  return `${lines.join("\n")}`;
}

/** A card's key among the report's: its vendor and index (a host may have both vendors' card 0). */
function deviceKey(device: HostDevice): string {
  return `${device.vendor}:${device.index}`;
}

/** The AMD SMI row, where it was looked for. */
function amdRow(report: HostReport): Array<readonly [string, string]> {
  const amd = report.amdsmi;
  if (amd.available) return [["AMD SMI", `${amd.version} from ${amd.library}, ${amd.deviceCount} device(s)`]];
  // Why it is not there matters where no card was found, not beside NVIDIA's cards.
  const nvidia = report.devices.some((d) => d.vendor === "nvidia");
  return amd.reason === null || nvidia ? [] : [["AMD SMI", `unavailable: ${amd.reason}`]];
}

function powerNow(device: HostDevice): string {
  if (device.powerW === null) return "unreadable";
  const averaged =
    device.vendor === "amd"
      ? "average_socket_power, averaged by the card"
      : "nvmlDeviceGetPowerUsage: a 1 s average on recent cards";
  return `${device.powerW.toFixed(1)} W (${device.instantPower ? "instantaneous" : averaged})`;
}

/** --idle --gpu MIG-…: refused, naming the card whose idle draw the slice's windows are charged. */
async function refuseSlice(uuid: string): Promise<number> {
  // The lookup's reads do not keep the event loop alive (a Meter's never do): this wait does.
  const hold = setInterval(() => {}, 1000);
  const found = await findSlice(uuid).finally(() => clearInterval(hold));
  const card =
    found.index === null
      ? `the card it is on (${found.reason})`
      : `GPU ${found.index} (${found.partition.cardUuid ?? "UUID unknown"}): giul-probe --idle --gpu ${found.index}`;
  process.stderr.write(
    `giul-probe: --gpu ${uuid} is a MIG slice, which has no power sensor of its own: its windows are charged above the card's idle floor. Measure ${card}\n`,
  );
  return 2;
}

/** A MIG card's slices: each metered as its share of the card (it has no sensor of its own). */
function migRows(
  mig: NonNullable<HostDevice["mig"]>,
  backend: BackendName,
): Array<readonly [string, string]> {
  const of = mig.cardSlices === null ? "" : ` of ${mig.cardSlices}`;
  const out: Array<readonly [string, string]> = [
    [
      "MIG mode",
      `on, ${mig.slices.length} slice(s): each metered by ${backend} as its share of this card, weighted by its slices${of} (a slice has no power sensor)`,
    ],
  ];
  for (const s of mig.slices) {
    const used = s.memoryUsedMib === null ? "?" : String(Math.round(s.memoryUsedMib));
    const total = s.memoryTotalMib === null ? "?" : String(Math.round(s.memoryTotalMib));
    const procs =
      s.processes.length === 0
        ? "no processes"
        : s.processes.map((p) => `${p.pid} ${p.name ?? "?"}`).join(", ");
    out.push([
      `  ${s.profile ?? "slice"}`,
      `${s.uuid ?? "uuid unknown"}, ${s.slices ?? "?"}${of} slices, ${used} / ${total} MiB used, ${procs}`,
    ]);
  }
  return out;
}

/** The report as the one JSON object `--json` prints (with GIUL_BACKEND's forced backend, or null). */
export function formatJson(
  report: HostReport & {
    readonly forcedBackend?: BackendName | null;
  },
): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}

export async function main(args: readonly string[]): Promise<number> {
  const parsed = parseArgs(args);
  if (parsed.kind === "help" || parsed.kind === "version")
    return helpOrVersion(parsed.kind, "giul-probe", USAGE);
  if (parsed.kind === "bad") {
    process.stderr.write(`${parsed.message}\n\n${USAGE}`);
    return 2;
  }
  let forced: BackendName | null;
  try {
    // GIUL_BACKEND is checked as a Meter checks it: an unknown name is refused, not ignored.
    forced = forcedBackend();
    checkDisableAddon(process.env.GIUL_DISABLE_ADDON);
  } catch (error) {
    process.stderr.write(`giul-probe: ${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
  if (parsed.kind === "idle") return idle(parsed);
  if (parsed.kind === "idleSlice") return refuseSlice(parsed.slice);
  if (parsed.kind === "watch") return watch(parsed.gpu, forced);
  if (parsed.kind === "demo") return demoRun(parsed.json);
  const report = await probeHost();
  const readable = report.devices
    .filter((d) => d.reason === null)
    .map((d) => ({ key: deviceKey(d), index: d.index, uuid: d.uuid }));
  const sensors = await watchSensors(readable, parsed.seconds, forced);
  if (parsed.json) {
    const devices = report.devices.map((d) => {
      const seen = sensors.get(deviceKey(d));
      return { ...d, sensor: seen === undefined ? null : typeof seen === "string" ? { reason: seen } : seen };
    });
    process.stdout.write(formatJson({ ...report, devices, forcedBackend: forced }));
  } else {
    if (forced !== null) {
      process.stdout.write(
        `GIUL_BACKEND=${forced}: a Meter on this host uses ${forced} wherever it can serve the card, and refuses to open where it cannot (BACKEND_UNAVAILABLE).\n\n`,
      );
    }
    process.stdout.write(formatHuman(report, forced, sensors));
  }
  return 0;
}

/** Refuses a GIUL_DISABLE_ADDON that the loader would silently take as not 1 (../binding.ts). */
function checkDisableAddon(value: string | undefined): void {
  const problem = disableAddonProblem(value);
  if (problem !== null) throw new GiulError("INVALID_OPTION", problem, { field: "GIUL_DISABLE_ADDON" });
}

// Piped into `head` and the like: a reader that went away ends the run quietly.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

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
