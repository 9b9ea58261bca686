#!/usr/bin/env node
/**
 * giul-agent: exposes this node's GPU power, cumulative energy and state over HTTP, read-only, so
 * that a Meter on another machine can meter it (backend remote_agent) and Prometheus can scrape it.
 * Exits 2 for bad arguments, 1 when it cannot listen.
 */
import { startAgent } from "../agent/server.js";
import { forcedBackend } from "../select/index.js";
import { type Flag, helpOrVersion, integerArg, readCommandLine, UsageError } from "./args.js";

const USAGE = `Usage: giul-agent [--port 9402] [--host 127.0.0.1] [--gpu 0] [--period-ms 10]

Serves, read-only:
  GET /power     watts, name, memory_used_mib, memory_total_mib, memory_free_mib,
                 utilization_pct, compute_apps (the Python giul agent's fields), plus
                 energy_j and monotonic_ns (this agent's cumulative energy reading)
  GET /energy    the cumulative energy at the request's arrival (for a remote Meter)
  GET /metrics   Prometheus text: power, energy, memory, utilization per GPU

Options:
  -p, --port N        TCP port (default 9402; 0 picks a free one)
      --host ADDR     address to bind (default 127.0.0.1). Bind the mesh address, not 0.0.0.0,
                      unless the node is otherwise firewalled
  -g, --gpu N[,M…]    card index(es) to serve (default 0); /power?gpu=M (an index or UUID) picks another
      --period-ms N   sampling period, 1..1000 ms (default 10)
  -h, --help          print this help
      --version       print giul's version

Environment:
  GIUL_NVML_LIBRARY, GIUL_NVIDIA_SMI, GIUL_BACKEND   as for giul-probe and the Meter
`;

type Parsed =
  | {
      readonly kind: "run";
      readonly port: number;
      readonly host: string;
      readonly gpus: number[];
      readonly periodMs: number;
    }
  | { readonly kind: "help" }
  | { readonly kind: "version" }
  | { readonly kind: "bad"; readonly message: string };

const FLAGS: Readonly<Record<string, Flag>> = {
  port: { type: "string", short: "p" },
  host: { type: "string" },
  gpu: { type: "string", short: "g" },
  "period-ms": { type: "string" },
};

export function parseArgs(args: readonly string[]): Parsed {
  const line = readCommandLine(args, FLAGS);
  if (line.kind !== "parsed") return line;
  try {
    const port = line.text("port");
    const host = line.text("host");
    if (host === "") throw new UsageError("--host needs an address");
    const gpu = line.text("gpu");
    const period = line.text("period-ms");
    return {
      kind: "run",
      port: port === undefined ? 9402 : integerArg("--port", port, 0, 65535),
      host: host ?? "127.0.0.1",
      gpus: gpu === undefined ? [0] : gpu.split(",").map((part) => integerArg("--gpu", part.trim(), 0, 1023)),
      periodMs: period === undefined ? 10 : integerArg("--period-ms", period, 1, 1000),
    };
  } catch (error) {
    if (error instanceof UsageError) return { kind: "bad", message: error.message };
    throw error;
  }
}

export async function main(args: readonly string[]): Promise<number> {
  const parsed = parseArgs(args);
  if (parsed.kind === "help" || parsed.kind === "version")
    return helpOrVersion(parsed.kind, "giul-agent", USAGE);
  if (parsed.kind === "bad") {
    process.stderr.write(`giul-agent: ${parsed.message}\n\n${USAGE}`);
    return 2;
  }
  try {
    // GIUL_BACKEND is checked as a Meter checks it: an unknown name is refused, not ignored.
    forcedBackend();
  } catch (error) {
    process.stderr.write(`giul-agent: ${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
  let agent: Awaited<ReturnType<typeof startAgent>>;
  try {
    agent = await startAgent({
      port: parsed.port,
      host: parsed.host,
      gpus: parsed.gpus,
      periodMs: parsed.periodMs,
    });
  } catch (error) {
    process.stderr.write(`giul-agent: cannot listen on ${parsed.host}:${parsed.port}: ${String(error)}\n`);
    return 1;
  }
  const cards = agent.monitors.map((m) => `GPU ${m.gpu} via ${m.backend}`).join(", ");
  process.stdout.write(`giul-agent: listening on ${agent.url} (${cards})\n`);
  const stop = () => {
    agent.close().then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(
      `giul-agent: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
