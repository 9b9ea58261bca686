#!/usr/bin/env node
// Benchmark of giul-agent's GET /power on loopback (issue 6): requests per second and latency
// percentiles under a closed-loop load of N keep-alive connections, errors counted.
//
// Usage: npx tsup && node bench/agent.js [--connections 16] [--seconds 10] [--warmup 2]
//
// The agent is the built CLI (dist/cli/agent.js) in its own process, reading the libnvidia-ml test
// double (set GIUL_NVML_LIBRARY to use another library, e.g. a real driver's). The load generator
// is a second process that speaks HTTP/1.1 over raw sockets (one request in flight per
// connection), so that the client's own cost stays small beside the server's. Prints a Markdown
// section for bench/RESULTS.md.
import { fork, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] !== undefined ? Number(process.argv[i + 1]) : fallback;
};

// ---- the load generator (child) ---------------------------------------------------------------
if (process.argv[2] === "--loadgen") {
  const [, , , port, connections, warmupS, seconds] = process.argv;
  const request = Buffer.from("GET /power HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  const latencies = new Float64Array(4_000_000);
  let n = 0;
  let errors = 0;
  let non200 = 0;
  let recording = false;
  let stopping = false;
  const start = () => {
    recording = true;
    setTimeout(() => {
      stopping = true;
    }, Number(seconds) * 1000);
  };
  setTimeout(start, Number(warmupS) * 1000);
  let recordStart = 0n;
  let recordEnd = 0n;
  let open = Number(connections);
  const done = () => {
    open -= 1;
    if (open > 0) return;
    process.send({
      n,
      errors,
      non200,
      ns: Number(recordEnd - recordStart),
      latencies: [...latencies.subarray(0, n)],
    });
  };
  for (let c = 0; c < Number(connections); c++) {
    const socket = connect(Number(port), "127.0.0.1");
    socket.setNoDelay(true);
    let buf = Buffer.alloc(0);
    let sent = 0n;
    const send = () => {
      if (stopping) {
        socket.end();
        return;
      }
      sent = process.hrtime.bigint();
      socket.write(request);
    };
    socket.on("connect", send);
    socket.on("data", (chunk) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      for (;;) {
        const head = buf.indexOf("\r\n\r\n");
        if (head < 0) return;
        const headers = buf.subarray(0, head).toString("latin1");
        const m = /content-length: *(\d+)/i.exec(headers);
        const length = m ? Number(m[1]) : 0;
        if (buf.length < head + 4 + length) return;
        const now = process.hrtime.bigint();
        buf = buf.subarray(head + 4 + length);
        if (recording && !stopping) {
          if (recordStart === 0n) recordStart = sent;
          recordEnd = now;
          if (!headers.startsWith("HTTP/1.1 200")) non200 += 1;
          if (n < latencies.length) latencies[n++] = Number(now - sent) / 1e6;
        }
        send();
      }
    });
    socket.on("error", () => {
      if (recording && !stopping) errors += 1;
    });
    socket.on("close", done);
  }
} else {
  // ---- the driver ------------------------------------------------------------------------------
  const connections = arg("connections", 16);
  const seconds = arg("seconds", 10);
  const warmup = arg("warmup", 2);

  const dir = mkdtempSync(join(tmpdir(), "giul-bench-agent-"));
  const scenario = join(dir, "scenario.txt");
  writeFileSync(
    scenario,
    `t0_ns ${process.hrtime.bigint()}\n` +
      'device 0 name="NVIDIA H100 80GB HBM3" mem_total_mib=81559 mem_used_mib=20480 util_gpu=63\n' +
      "power 0 0 300 60000 450 120000 300\n" +
      "proc 0 4242 20000 vllm\n",
  );
  const env = {
    ...process.env,
    GIUL_FAKE_NVML_SCENARIO: scenario,
    GIUL_NVML_LIBRARY:
      process.env.GIUL_NVML_LIBRARY ?? join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1"),
  };
  const agent = spawn(process.execPath, [join(root, "dist", "cli", "agent.js"), "--port", "0"], {
    env,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    agent.stdout.on("data", (c) => {
      out += c;
      const m = /listening on (http:\/\/\S+) \((.*)\)/.exec(out);
      if (m) resolve({ url: m[1], cards: m[2] });
    });
    agent.on("exit", (code) => reject(new Error(`giul-agent exited with ${code}`)));
  });
  const port = Number(new URL(url.url).port);

  const gen = fork(fileURLToPath(import.meta.url), ["--loadgen", port, connections, warmup, seconds], {
    stdio: "inherit",
  });
  const result = await new Promise((resolve) => gen.once("message", resolve));
  gen.kill();
  agent.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });

  const sorted = Float64Array.from(result.latencies).sort();
  const pct = (p) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
  const rps = result.n / (result.ns / 1e9);
  const cpu = cpus()[0]?.model ?? "unknown";
  let model = cpu;
  try {
    model = /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpu;
  } catch {}
  const f = (x) => x.toFixed(2);
  console.log(`## giul-agent /power

Machine: ${cpus().length} CPU (\`nproc\`), ${model}; Node ${process.version}; ${process.platform}-${process.arch}.
Agent: \`dist/cli/agent.js --port 0\` (${url.cards}), the libnvidia-ml test double, default period 10 ms.
Load: ${connections} keep-alive connections on loopback, one request in flight each (closed loop),
raw-socket HTTP/1.1 client in a second process; ${warmup} s warm-up, then ${seconds} s measured.
Reproduce: \`npx tsup && node bench/agent.js --connections ${connections} --seconds ${seconds}\`.

| requests | req/s | p50 ms | p90 ms | p99 ms | max ms | errors | non-200 |
|---:|---:|---:|---:|---:|---:|---:|---:|
| ${result.n} | ${Math.round(rps)} | ${f(pct(50))} | ${f(pct(90))} | ${f(pct(99))} | ${f(sorted[sorted.length - 1] ?? Number.NaN)} | ${result.errors} | ${result.non200} |

Targets: ≥ 10,000 req/s, p99 ≤ 5 ms, no errors: ${rps >= 10_000 && pct(99) <= 5 && result.errors === 0 && result.non200 === 0 ? "met" : "NOT met"}.
`);
}
