#!/usr/bin/env node
/**
 * giul-proxy: a transparent reverse proxy in front of an OpenAI-compatible inference server on
 * this host, giving every answer its measured energy. Exits 2 for bad arguments (naming the flag),
 * 1 when it cannot start. Messages go to stderr; stdout is left to `--log -`.
 */
import { closeSync, openSync, readFileSync } from "node:fs";
import { DEFAULT_PERIOD_MS } from "../meter/options.js";
import { NdjsonLog } from "../proxy/log.js";
import type { ProxyOptions } from "../proxy/options.js";
import { upstreamUrl } from "../proxy/options.js";
import { type MeteringProxy, startProxy } from "../proxy/server.js";
import { type Node, resolveNode } from "../rules/node.js";
import { probeHost } from "../select/host.js";
import { isGiulError } from "../vocabulary/errors.js";
import { type Flag, helpOrVersion, integerArg, readCommandLine, UsageError } from "./args.js";

const USAGE = `Usage: giul-proxy --upstream URL --idle-w W [--gpu N] [options]

Forwards every request to an OpenAI-compatible server on this host (vLLM, SGLang, TGI,
llama.cpp) and meters each as a window on the card: the card's energy above idle is shared
among the requests in flight. Clients get each answer's energy with the answer:
  non-streamed JSON  headers x-energy-joules, x-energy-method, x-energy-backend,
                     x-energy-uncertainty-joules (and usage.energy with --inject-usage)
  streams (SSE)      one comment line ": energy {…}" before the final "data: [DONE]",
                     and the same fields as HTTP trailers

Required:
  -u, --upstream URL      the inference server, e.g. http://127.0.0.1:8000
      --idle-w W          the card's idle draw in watts, measured by you (or idleW in --node);
                          one per card, comma-separated, with several cards (or one for all)
Card:
  -g, --gpu N             card index or UUID (default 0, or gpuIndex in --node); a tensor-
                          parallel server: every card it runs on, --gpu 0,1,2,3, or --gpu all
                          (every card NVML sees). Each answer is charged its share on every
                          card, summed; the header x-energy-cards and the record's cards list
                          each card
      --node FILE         a JSON file of Node fields (name, gpuIndex, idleW, isLocal,
                          powerEndpoint, servingMatch, contentionIgnore, contentionFloorMib, …);
                          flags override it
      --serving-match S   the server's process name (substring): other compute processes on
                          the card make a window contended
      --hint J            joules per 1,000 completion tokens, to estimate what cannot be measured
      --period-ms N       sampling period, 1..1000 ms (default ${DEFAULT_PERIOD_MS})
Listening:
  -l, --listen HOST:PORT  default 127.0.0.1:9410. Bind a private address, not 0.0.0.0, unless
                          the host is otherwise firewalled
      --admin HOST:PORT|off  GET /metrics and /healthz (default 127.0.0.1:9411)
Output:
      --log FILE|-        one NDJSON record per request, appended (SIGHUP reopens the file)
      --inject-usage      also add usage.energy to non-streamed JSON answers
Limits (defaults):
      --max-body-bytes N           request bodies (413 above) and JSON answers buffered (16777216)
      --max-header-bytes N         request heads (431 above) (16384)
      --max-connections N          client connections (1024)
      --upstream-timeout-ms N      the upstream may send nothing this long (600000)
      --connect-timeout-ms N       connecting to the upstream (5000)
      --client-stall-timeout-ms N  a client may stop reading this long (60000)
      --headers-timeout-ms N       a request's head must arrive within (10000)
      --request-timeout-ms N       a request's body must arrive within (60000)
      --keep-alive-timeout-ms N    idle client connections are closed after (5000)
  -h, --help                       print this help
      --version                    print giul's version

Environment: GIUL_NVML_LIBRARY, GIUL_NVIDIA_SMI, GIUL_BACKEND as for giul-probe and the Meter.
`;

type Parsed =
  | {
      readonly kind: "run";
      readonly options: ProxyOptions;
      readonly log: string | null;
      readonly nodeFile: string | null;
      readonly flags: Record<string, unknown>;
    }
  | { readonly kind: "help" }
  | { readonly kind: "version" }
  | { readonly kind: "bad"; readonly message: string };

function number(flag: string, raw: string | undefined, what: string): number {
  const n = raw === undefined || raw.trim() === "" ? Number.NaN : Number(raw);
  if (!Number.isFinite(n) || n < 0)
    throw new UsageError(`${flag} needs ${what} (a number ≥ 0), got ${JSON.stringify(raw)}`);
  return n;
}

/** HOST:PORT, [V6]:PORT, :PORT or PORT. */
function address(flag: string, raw: string, host: string): { host: string; port: number } {
  const m = /^(?:(\[[0-9a-fA-F:.]+\]|[^:[\]]*):)?(\d+)$/.exec(raw);
  if (m === null) throw new UsageError(`${flag} needs HOST:PORT, got ${JSON.stringify(raw)}`);
  const given = (m[1] ?? "").replace(/^\[(.*)\]$/, "$1");
  return { host: given === "" ? host : given, port: integerArg(flag, m[2] ?? "", 0, 65535) };
}

const NODE_FLAGS: Record<string, string> = {
  "node.idleW": "--idle-w",
  "node.gpuIndex": "--gpu",
  "node.gpuUuid": "--gpu",
  "node.servingMatch": "--serving-match",
};

function readNode(file: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new UsageError(`--node ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw new UsageError(`--node ${file}: expected a JSON object of Node fields`);
  return parsed as Record<string, unknown>;
}

/** The limits, each a whole number in a range: flag name → the option it sets. */
const LIMITS: Readonly<Record<string, { option: string; min: number; max: number }>> = {
  "max-body-bytes": { option: "maxBodyBytes", min: 1, max: 1 << 30 },
  "max-header-bytes": { option: "maxHeaderBytes", min: 1024, max: 1 << 20 },
  "max-connections": { option: "maxConnections", min: 1, max: 1_000_000 },
  "upstream-timeout-ms": { option: "upstreamTimeoutMs", min: 1, max: 86_400_000 },
  "connect-timeout-ms": { option: "connectTimeoutMs", min: 1, max: 3_600_000 },
  "client-stall-timeout-ms": { option: "clientStallTimeoutMs", min: 1, max: 86_400_000 },
  "headers-timeout-ms": { option: "headersTimeoutMs", min: 1, max: 3_600_000 },
  "request-timeout-ms": { option: "requestTimeoutMs", min: 1, max: 86_400_000 },
  "keep-alive-timeout-ms": { option: "keepAliveTimeoutMs", min: 1, max: 3_600_000 },
};

/** `--gpu all`: every card NVML sees, listed when the proxy starts. */
const ALL = "all";

/** Names the node and checks it, each error naming the flag (or the --node file) it came from. */
function checkNode(
  node: Record<string, unknown>,
  flags: Record<string, unknown>,
  nodeFile: string | null,
): void {
  const named = node.gpuUuid ?? node.gpuIndex ?? 0;
  const gpus = Array.isArray(named) ? named.join("-") : String(named);
  node.name ??= `giul-proxy-gpu${gpus}`;
  try {
    resolveNode(node as unknown as Node);
  } catch (error) {
    if (!isGiulError(error)) throw error;
    const field = (error.field ?? "").replace(/\[\d+\]$/, "");
    const flag = NODE_FLAGS[field];
    const fromFlag = flag !== undefined && field.slice(5) in flags;
    throw new UsageError(
      fromFlag ? `${flag}: ${error.message}` : `--node ${nodeFile ?? "(flags)"}: ${error.message}`,
    );
  }
}

/** `--gpu all`: the node's cards are every card NVML sees (none: a clear error). */
async function everyCard(parsed: Extract<Parsed, { kind: "run" }>): Promise<Parsed> {
  const node = parsed.options.node as unknown as Record<string, unknown>;
  if (node.gpuIndex !== ALL) return parsed;
  const host = await probeHost();
  if (host.devices.length === 0) {
    const why = host.nvml.reason ?? "NVML reports no device";
    return { kind: "bad", message: `--gpu all: no card to meter (${why})` };
  }
  node.gpuIndex = host.devices.map((d) => d.index);
  try {
    checkNode(node, parsed.flags, parsed.nodeFile);
  } catch (error) {
    if (error instanceof UsageError) return { kind: "bad", message: error.message };
    throw error;
  }
  return parsed;
}

const STRING_FLAGS = [
  "upstream",
  "idle-w",
  "gpu",
  "node",
  "serving-match",
  "hint",
  "period-ms",
  "listen",
  "admin",
  "log",
  ...Object.keys(LIMITS),
] as const;

const SHORT: Readonly<Record<string, string>> = { upstream: "u", gpu: "g", listen: "l" };

const FLAGS: Readonly<Record<string, Flag>> = {
  ...Object.fromEntries(
    STRING_FLAGS.map((name) => [
      name,
      SHORT[name] === undefined ? { type: "string" } : { type: "string", short: SHORT[name] },
    ]),
  ),
  "inject-usage": { type: "boolean" },
};

export function parseArgs(args: readonly string[]): Parsed {
  const line = readCommandLine(args, FLAGS);
  if (line.kind !== "parsed") return line;
  const o: Record<string, unknown> = {};
  const flags: Record<string, unknown> = {};
  let nodeFile: string | null = null;
  let log: string | null = null;
  try {
    for (const name of new Set(line.order)) {
      const flag = `--${name}`;
      const raw = line.text(name) ?? "";
      const text = (what: string) => {
        if (raw === "") throw new UsageError(`${flag} needs ${what}`);
        return raw;
      };
      const limit = LIMITS[name];
      if (limit !== undefined) {
        o[limit.option] = integerArg(flag, raw, limit.min, limit.max);
        continue;
      }
      switch (name) {
        case "upstream": {
          const v = text("a URL");
          try {
            upstreamUrl(v);
          } catch (error) {
            throw new UsageError(`--upstream: ${(error as Error).message.replace(/^upstream: /, "")}`);
          }
          o.upstream = v;
          break;
        }
        case "idle-w": {
          const list = text("the card's idle draw in watts (or one per card, comma-separated)").split(",");
          const idles = list.map((v) => number("--idle-w", v.trim(), "the card's idle draw in watts"));
          flags.idleW = idles.length === 1 ? idles[0] : idles;
          break;
        }
        case "gpu": {
          const v = text("a card index or UUID, a comma-separated list of them, or all");
          if (v === "all") {
            flags.gpuIndex = ALL;
            break;
          }
          const names = v.split(",").map((x) => x.trim());
          // UUIDs (NVIDIA's GPU-…, MIG-…; AMD's hex with dashes), else indices.
          if (names.every((x) => /^GPU-|^MIG-|^[0-9a-f]{8}-[0-9a-f]{4}-/i.test(x))) {
            flags.gpuUuid = names.length === 1 ? names[0] : names;
            break;
          }
          const indices = names.map((x) => integerArg("--gpu", x, 0, 1023));
          flags.gpuIndex = indices.length === 1 ? indices[0] : indices;
          break;
        }
        case "node":
          nodeFile = text("a JSON file");
          break;
        case "serving-match":
          flags.servingMatch = text("a process name");
          break;
        case "hint":
          o.joulesPer1kHint = number("--hint", raw, "joules per 1,000 tokens");
          break;
        case "period-ms":
          o.periodMs = integerArg("--period-ms", raw, 1, 1000);
          break;
        case "listen": {
          const a = address("--listen", raw, "127.0.0.1");
          o.host = a.host;
          o.port = a.port;
          break;
        }
        case "admin": {
          if (raw === "off") o.adminPort = null;
          else {
            const a = address("--admin", raw, "127.0.0.1");
            o.adminHost = a.host;
            o.adminPort = a.port;
          }
          break;
        }
        case "log":
          log = text("a file (or - for stdout)");
          break;
        case "inject-usage":
          o.injectUsage = true;
          break;
      }
    }
    if (o.upstream === undefined) throw new UsageError("--upstream is required: the inference server's URL");
    const base = nodeFile === null ? {} : readNode(nodeFile);
    const node = { ...base, ...flags } as Record<string, unknown>;
    // --gpu names the cards, by index or UUID, over whichever the --node file used.
    if ("gpuUuid" in flags) delete node.gpuIndex;
    if ("gpuIndex" in flags) delete node.gpuUuid;
    if (node.idleW === undefined && nodeFile === null)
      throw new UsageError(
        "--idle-w is required: the card's idle draw in watts, measured by you (or idleW in --node)",
      );
    // --gpu all is known once NVML has been asked (main()); the node is checked then.
    if (node.gpuIndex !== ALL) checkNode(node, flags, nodeFile);
    if (
      typeof o.requestTimeoutMs === "number" &&
      o.requestTimeoutMs < ((o.headersTimeoutMs as number | undefined) ?? 10_000)
    )
      throw new UsageError("--request-timeout-ms must be ≥ --headers-timeout-ms");
    return { kind: "run", options: { ...o, node } as unknown as ProxyOptions, log, nodeFile, flags };
  } catch (error) {
    if (error instanceof UsageError) return { kind: "bad", message: error.message };
    throw error;
  }
}

export async function main(args: readonly string[]): Promise<number> {
  let parsed = parseArgs(args);
  if (parsed.kind === "run") parsed = await everyCard(parsed);
  const say = (m: string) => process.stderr.write(`${m}\n`);
  if (parsed.kind === "help" || parsed.kind === "version")
    return helpOrVersion(parsed.kind, "giul-proxy", USAGE);
  if (parsed.kind === "bad") {
    process.stderr.write(`giul-proxy: ${parsed.message}\n\n${USAGE}`);
    return 2;
  }
  let log: NdjsonLog | null = null;
  if (parsed.log !== null) {
    if (parsed.log !== "-") {
      try {
        closeSync(openSync(parsed.log, "a"));
      } catch (error) {
        say(`giul-proxy: --log ${parsed.log}: cannot append to it: ${String(error)}`);
        return 2;
      }
    }
    log = new NdjsonLog(parsed.log, say);
  }
  const sink = log;
  let proxy: MeteringProxy;
  try {
    proxy = await startProxy({
      ...parsed.options,
      warn: say,
      ...(sink === null ? {} : { onRecord: (r) => sink.write(r) }),
    });
  } catch (error) {
    if (isGiulError(error)) {
      say(`giul-proxy: ${error.field === "GIUL_BACKEND" ? "GIUL_BACKEND: " : ""}${error.message}`);
      return 2;
    }
    const where = `${parsed.options.host ?? "127.0.0.1"}:${parsed.options.port ?? 9410}`;
    say(`giul-proxy: cannot listen on ${where} (or the admin address): ${String(error)}`);
    return 1;
  }
  if (sink !== null) proxy.metrics.logDropped = () => sink.dropped;
  const running = proxy;
  const stop = () => {
    running
      .close()
      .then(() => sink?.close())
      .then(
        () => process.exit(0),
        () => process.exit(0),
      );
  };
  // Before the banner: whoever waits for it may signal at once.
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  process.on("SIGHUP", () => sink?.reopen());
  const gpu = parsed.options.node.gpuUuid ?? parsed.options.node.gpuIndex ?? 0;
  const gpus = Array.isArray(gpu) ? `GPUs ${gpu.join(", ")}` : `GPU ${gpu}`;
  const card = parsed.options.node.isLocal === false ? parsed.options.node.powerEndpoint : gpus;
  if (proxy.reason !== null)
    say(
      `giul-proxy: ${card}: energy cannot be measured (${proxy.reason}); answers are labelled estimated or unknown`,
    );
  say(
    `giul-proxy: listening on ${proxy.url} → ${proxy.upstream} (${card} via ${proxy.backend})` +
      (proxy.adminUrl === null ? "" : `; metrics on ${proxy.adminUrl}/metrics`),
  );
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(
      `giul-proxy: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
