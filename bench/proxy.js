#!/usr/bin/env node
// Benchmark of giul-proxy's cost: the same load against the stub OpenAI-compatible upstream
// directly and through the proxy, on loopback.
//
//   1. Non-streamed chat completions at a fixed rate (open loop, default 1,000 requests/s): latency
//      from each request's scheduled time to its last byte (queueing included, so a proxy that
//      falls behind shows), p50/p99, and the throughput achieved.
//   2. 256 concurrent streams (closed loop: each connection streams an answer to its end, then
//      asks again): time to the first byte and to the last, p50/p99, and streams and tokens per
//      second delivered.
//
// Usage: npx tsup && node bench/proxy.js [--rate 1000] [--seconds 10] [--streams 256]
//        [--tokens 64] [--itl-ms 10] [--warmup 2]
//
// Three processes: the stub (test/fakes/openai-stub.mjs), the proxy (dist/cli/proxy.js, reading
// the libnvidia-ml test double, or the library GIUL_NVML_LIBRARY names), and the load generator,
// which speaks HTTP/1.1 over raw sockets so that its own cost stays small. Prints a Markdown
// section for bench/RESULTS.md.
import { fork, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] !== undefined ? Number(process.argv[i + 1]) : fallback;
};

/**
 * Reads HTTP/1.1 responses off one socket (Content-Length or chunked, trailers skipped) and calls
 * back at the first body byte and at the end of each.
 */
function responses(socket, onFirst, onEnd) {
  let buf = Buffer.alloc(0);
  let state = "head";
  let remaining = 0;
  let status = 0;
  let first = false;
  socket.on("data", (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    for (;;) {
      if (state === "head") {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buf.subarray(0, end).toString("latin1");
        buf = buf.subarray(end + 4);
        status = Number(head.slice(9, 12));
        first = false;
        const length = /\r\ncontent-length: *(\d+)/i.exec(head);
        if (length) {
          state = "length";
          remaining = Number(length[1]);
        } else state = "size";
      } else if (state === "length") {
        const take = Math.min(remaining, buf.length);
        if (take > 0 && !first) {
          first = true;
          onFirst();
        }
        remaining -= take;
        buf = buf.subarray(take);
        if (remaining > 0) return;
        state = "head";
        onEnd(status);
      } else if (state === "size") {
        const eol = buf.indexOf("\r\n");
        if (eol < 0) return;
        const size = Number.parseInt(buf.subarray(0, eol).toString("latin1"), 16);
        buf = buf.subarray(eol + 2);
        if (size === 0) state = "trailers";
        else {
          state = "chunk";
          remaining = size + 2;
          if (!first) {
            first = true;
            onFirst();
          }
        }
      } else if (state === "chunk") {
        const take = Math.min(remaining, buf.length);
        remaining -= take;
        buf = buf.subarray(take);
        if (remaining > 0) return;
        state = "size";
      } else {
        const eol = buf.indexOf("\r\n");
        if (eol < 0) return;
        buf = buf.subarray(eol + 2);
        if (eol === 0) {
          state = "head";
          onEnd(status);
        }
      }
    }
  });
}

function request(body) {
  return Buffer.from(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

// ---- the load generator (child) ---------------------------------------------------------------
if (process.argv[2] === "--loadgen") {
  const [, , , mode, port, a, b, warmupS, seconds] = process.argv;
  const out = { total: [], first: [], errors: 0, non200: 0, tokens: 0, done: 0, ns: 0 };
  let recording = false;
  let stopping = false;
  let startNs = 0n;
  setTimeout(() => {
    recording = true;
    startNs = process.hrtime.bigint();
    setTimeout(() => {
      stopping = true;
      out.ns = Number(process.hrtime.bigint() - startNs);
      setTimeout(() => process.send(out), 3000);
    }, Number(seconds) * 1000);
  }, Number(warmupS) * 1000);
  const open = (onReady) => {
    const socket = connect(Number(port), "127.0.0.1");
    socket.setNoDelay(true);
    socket.on("error", () => {
      if (recording && !stopping) out.errors++;
    });
    socket.on("connect", () => onReady(socket));
    return socket;
  };
  if (mode === "rate") {
    // Open loop: `a` requests per second, each on an idle connection (queued when none is).
    const rate = Number(a);
    const body = request(
      JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 8 }),
    );
    const idle = [];
    const queue = [];
    const dispatch = () => {
      while (idle.length > 0 && queue.length > 0) {
        const socket = idle.pop();
        socket.scheduled = queue.shift();
        socket.write(body);
      }
    };
    for (let c = 0; c < Number(b); c++) {
      open((socket) => {
        responses(
          socket,
          () => {},
          (status) => {
            const now = process.hrtime.bigint();
            if (recording && !stopping && socket.scheduled >= startNs) {
              out.total.push(Number(now - socket.scheduled) / 1e6);
              out.done++;
              if (status !== 200) out.non200++;
            }
            idle.push(socket);
            dispatch();
          },
        );
        idle.push(socket);
      });
    }
    const t0 = process.hrtime.bigint();
    let sent = 0;
    const tick = setInterval(() => {
      if (stopping) {
        clearInterval(tick);
        return;
      }
      const due = Math.floor((Number(process.hrtime.bigint() - t0) / 1e9) * rate);
      for (; sent < due; sent++) queue.push(t0 + BigInt(Math.round((sent / rate) * 1e9)));
      dispatch();
    }, 2);
  } else {
    // Closed loop: `a` connections each streaming answers of `b` tokens, one after another.
    const [tokens, itl] = String(b).split(":").map(Number);
    const body = request(
      JSON.stringify({
        model: "m",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: tokens,
        stream: true,
        stub: { ttft_ms: 20, itl_ms: itl },
      }),
    );
    for (let c = 0; c < Number(a); c++) {
      open((socket) => {
        let sent = 0n;
        const send = () => {
          if (stopping) return socket.end();
          sent = process.hrtime.bigint();
          socket.write(body);
        };
        responses(
          socket,
          () => {
            if (recording && !stopping && sent >= startNs)
              out.first.push(Number(process.hrtime.bigint() - sent) / 1e6);
          },
          (status) => {
            if (recording && !stopping && sent >= startNs) {
              out.total.push(Number(process.hrtime.bigint() - sent) / 1e6);
              out.done++;
              out.tokens += tokens;
              if (status !== 200) out.non200++;
            }
            send();
          },
        );
        send();
      });
    }
  }
} else {
  // ---- the driver ------------------------------------------------------------------------------
  const rate = arg("rate", 1000);
  const seconds = arg("seconds", 10);
  const warmup = arg("warmup", 2);
  const streams = arg("streams", 256);
  const tokens = arg("tokens", 64);
  const itl = arg("itl-ms", 10);

  const dir = mkdtempSync(join(tmpdir(), "giul-bench-proxy-"));
  const scenario = join(dir, "scenario.txt");
  writeFileSync(scenario, `t0_ns ${process.hrtime.bigint()}\ndevice 0\npower 0 0 300 60000 450 120000 300\n`);
  const env = {
    ...process.env,
    GIUL_FAKE_NVML_SCENARIO: scenario,
    GIUL_NVML_LIBRARY:
      process.env.GIUL_NVML_LIBRARY ?? join(root, "build", "test-doubles", "current", "libnvidia-ml.so.1"),
  };
  const started = (proc, pattern, stream) =>
    new Promise((resolve, reject) => {
      let text = "";
      proc[stream].on("data", (c) => {
        text += c;
        const m = pattern.exec(text);
        if (m) resolve(m);
      });
      proc.on("exit", (code) => reject(new Error(`exited with ${code}: ${text}`)));
    });
  const stub = spawn(process.execPath, [join(root, "test", "fakes", "openai-stub.mjs"), "--port", "0"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const stubUrl = (await started(stub, /listening on (http:\/\/\S+)/, "stdout"))[1];
  const proxies = [];
  const startProxy = async (extra) => {
    const proc = spawn(
      process.execPath,
      [
        join(root, "dist", "cli", "proxy.js"),
        "--upstream",
        stubUrl,
        "--idle-w",
        "60",
        "--listen",
        ":0",
        "--admin",
        "off",
        ...extra,
      ],
      { env, stdio: ["ignore", "inherit", "pipe"] },
    );
    proxies.push(proc);
    const m = await started(proc, /listening on (http:\/\/\S+) → \S+ \((.*)\)/, "stderr");
    return { url: m[1], card: m[2], pid: proc.pid };
  };
  const proxy = await startProxy([]);
  const fast = await startProxy(["--period-ms", "1"]);

  /** CPU seconds a process has used so far (user + system; Linux), or NaN. */
  const cpuOf = (pid) => {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
      return (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      return Number.NaN;
    }
  };
  const load = (url, mode, x, y, pid) =>
    new Promise((resolve) => {
      const cpu0 = cpuOf(pid);
      const gen = fork(
        fileURLToPath(import.meta.url),
        ["--loadgen", mode, new URL(url).port, x, y, warmup, seconds],
        { stdio: "inherit" },
      );
      gen.once("message", (m) => {
        gen.kill();
        // The proxy's CPU over warm-up, measurement and drain, per second of that time.
        resolve({ ...m, cpu: (cpuOf(pid) - cpu0) / (warmup + seconds + 3) });
      });
    });
  const pct = (xs, p) => {
    const s = Float64Array.from(xs).sort();
    return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))] ?? Number.NaN;
  };
  const f = (x) => x.toFixed(2);
  const rows = [];
  const loads = [];
  for (const [name, url, pid] of [
    ["direct", stubUrl, stub.pid],
    ["proxy", proxy.url, proxy.pid],
    ["proxy --period-ms 1", fast.url, fast.pid],
  ]) {
    const r = await load(url, "rate", rate, 128, pid);
    const s = await load(url, "streams", streams, `${tokens}:${itl}`, pid);
    loads.push(loadavg()[0].toFixed(1));
    rows.push({ name, r, s });
  }
  for (const p of proxies) p.kill("SIGTERM");
  stub.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });

  let model = cpus()[0]?.model ?? "unknown";
  try {
    model = /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? model;
  } catch {}
  const base = rows[0];
  const signed = (x) => (x < 0 ? f(x) : `+${f(x)}`);
  const added = (row, key, p) =>
    row === base ? "" : ` (${signed(pct(row[key].total, p) - pct(base[key].total, p))})`;
  const addedFirst = (row, p) =>
    row === base ? "" : ` (${signed(pct(row.s.first, p) - pct(base.s.first, p))})`;
  console.log(`## giul-proxy: cost against talking to the upstream directly

Machine: ${cpus().length} CPU (\`nproc\`), ${model}; Node ${process.version}; ${process.platform}-${process.arch}; load average (1 min) after each row: ${loads.join(", ")}.
Upstream: the stub OpenAI-compatible server (\`test/fakes/openai-stub.mjs\`), its own process. Proxy: \`dist/cli/proxy.js\` (${proxy.card}, the libnvidia-ml test double), its own process, default options unless shown. Load generator: a third process, HTTP/1.1 over raw sockets on loopback; ${warmup} s warm-up, then ${seconds} s measured per row.
Reproduce: \`npx tsup && node bench/proxy.js --rate ${rate} --seconds ${seconds} --streams ${streams} --tokens ${tokens} --itl-ms ${itl}\`.

"CPU of the server": one core = 100 %, the stub's for the direct row, the proxy's (alone) for the others.

**Non-streamed, open loop at ${rate} requests/s** (128 keep-alive connections; latency from each request's scheduled time to its last byte, queueing included; in brackets: added to direct):

| path | requests | achieved req/s | p50 ms | p99 ms | errors | non-200 | CPU of the server |
|---|---:|---:|---:|---:|---:|---:|---:|
${rows.map((row) => `| ${row.name} | ${row.r.done} | ${Math.round(row.r.done / (row.r.ns / 1e9))} | ${f(pct(row.r.total, 50))}${added(row, "r", 50)} | ${f(pct(row.r.total, 99))}${added(row, "r", 99)} | ${row.r.errors} | ${row.r.non200} | ${Math.round(row.r.cpu * 100)} % |`).join("\n")}

**${streams} concurrent streams** (closed loop; each answer ${tokens} tokens, first after 20 ms, then one every ${itl} ms, so ${f(20 + (tokens - 1) * itl)} ms at the upstream):

| path | streams | streams/s | tokens/s | first byte p50 ms | first byte p99 ms | last byte p50 ms | last byte p99 ms | errors | non-200 | CPU of the server |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${rows.map((row) => `| ${row.name} | ${row.s.done} | ${f(row.s.done / (row.s.ns / 1e9))} | ${Math.round(row.s.tokens / (row.s.ns / 1e9))} | ${f(pct(row.s.first, 50))}${addedFirst(row, 50)} | ${f(pct(row.s.first, 99))}${addedFirst(row, 99)} | ${f(pct(row.s.total, 50))}${added(row, "s", 50)} | ${f(pct(row.s.total, 99))}${added(row, "s", 99)} | ${row.s.errors} | ${row.s.non200} | ${Math.round(row.s.cpu * 100)} % |`).join("\n")}
`);
}
