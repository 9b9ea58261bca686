#!/usr/bin/env node
/**
 * giul-agent: exposes this node's GPU power, cumulative energy and state over HTTP, read-only, so
 * that a Meter on another machine can meter it (backend remote_agent) and Prometheus can scrape it.
 * Exits 2 for bad arguments, 1 when it cannot listen.
 */
import { startAgent } from "../agent/server.js";
import { forcedBackend } from "../select/index.js";

const USAGE = `Usage: giul-agent [--port 9402] [--host 127.0.0.1] [--gpu 0] [--period-ms 10]

Serves, read-only:
  GET /power     watts, name, memory_used_mib, memory_total_mib, memory_free_mib,
                 utilization_pct, compute_apps (the Python giul agent's fields), plus
                 energy_j and monotonic_ns (this agent's cumulative energy reading)
  GET /energy    the cumulative energy at the request's arrival (for a remote Meter)
  GET /metrics   Prometheus text: power, energy, memory, utilization per GPU

Options:
  --port N        TCP port (default 9402; 0 picks a free one)
  --host ADDR     address to bind (default 127.0.0.1). Bind the mesh address, not 0.0.0.0,
                  unless the node is otherwise firewalled
  --gpu N[,M…]    card index(es) to serve (default 0); /power?gpu=M (an index or UUID) picks another
  --period-ms N   sampling period, 1..1000 ms (default 10)
  -h, --help      print this help

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
  | { readonly kind: "bad"; readonly message: string };

function intArg(name: string, raw: string | undefined, min: number, max: number): number | string {
  if (raw === undefined || !/^\d+$/.test(raw)) return `${name} needs an integer, got ${JSON.stringify(raw)}`;
  const n = Number(raw);
  if (n < min || n > max) return `${name} must be from ${min} to ${max}, got ${n}`;
  return n;
}

export function parseArgs(args: readonly string[]): Parsed {
  let port = 9402;
  let host = "127.0.0.1";
  let gpus = [0];
  let periodMs = 10;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const eq = arg.indexOf("=");
    const flag = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
    const inline = arg.startsWith("--") && eq > 0 ? arg.slice(eq + 1) : undefined;
    const value = () => (inline !== undefined ? inline : args[++i]);
    if (flag === "-h" || flag === "--help") return { kind: "help" };
    if (flag === "--port") {
      const n = intArg("--port", value(), 0, 65535);
      if (typeof n === "string") return { kind: "bad", message: n };
      port = n;
    } else if (flag === "--host") {
      const v = value();
      if (v === undefined || v === "") return { kind: "bad", message: "--host needs an address" };
      host = v;
    } else if (flag === "--gpu") {
      const v = value() ?? "";
      const list: number[] = [];
      for (const part of v.split(",")) {
        const n = intArg("--gpu", part.trim(), 0, 1023);
        if (typeof n === "string") return { kind: "bad", message: n };
        list.push(n);
      }
      gpus = list;
    } else if (flag === "--period-ms") {
      const n = intArg("--period-ms", value(), 1, 1000);
      if (typeof n === "string") return { kind: "bad", message: n };
      periodMs = n;
    } else {
      return { kind: "bad", message: `unknown argument ${JSON.stringify(arg)}` };
    }
  }
  return { kind: "run", port, host, gpus, periodMs };
}

export async function main(args: readonly string[]): Promise<number> {
  const parsed = parseArgs(args);
  if (parsed.kind === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
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
