import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeReady, program } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// A real Prometheus (Debian's, installed by .ci/run) scraping giul-proxy, in front of the stub
// upstream, and giul-agent, both metering the NVML double's card at a constant 300 W (idle 60 W).
// PromQL must agree with the proxy's own log on the requests' energy within 0.1 %, and rate() of
// the card's energy counter must be the card's power.

const POWER_W = 300;
const IDLE_W = 60;
const sc = scenarioForThisProcess({ devices: [{ power: POWER_W, counterStepMs: 10 }] });
const { startProxy } = await import("../src/proxy/server.js");
const { startAgent } = await import("../src/agent/server.js");
const { startStub } = await import("./fakes/openai-stub.mjs");
type ProxyRecord = import("../src/proxy/record.js").ProxyRecord;

const PROMETHEUS = nativeReady() ? program(["prometheus"], "GIUL_PROMETHEUS", "Prometheus") : null;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const dir = mkdtempSync(join(tmpdir(), "giul-prometheus-"));
const log: ProxyRecord[] = [];
let stop: () => Promise<void> = async () => {};
let promUrl = "";
const faces: Record<string, string> = {};

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** One instant query's vector: labels → value. */
async function query(q: string): Promise<{ metric: Record<string, string>; value: number }[]> {
  const r = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(q)}`);
  const body = (await r.json()) as {
    status: string;
    data?: { result: { metric: Record<string, string>; value: [number, string] }[] };
  };
  expect(body.status, q).toBe("success");
  return (body.data?.result ?? []).map((x) => ({ metric: x.metric, value: Number(x.value[1]) }));
}

/** Polls a query until `ok` holds for its first value (Prometheus scrapes once a second). */
async function until(q: string, ok: (v: number) => boolean, ms = 20_000): Promise<number> {
  let last = Number.NaN;
  for (const end = Date.now() + ms; Date.now() < end; await sleep(250)) {
    const v = await query(q);
    if (v.length > 0) {
      last = v[0]?.value as number;
      if (ok(last)) return last;
    }
  }
  return last;
}

beforeAll(async () => {
  if (PROMETHEUS === null) return;
  const stub = await startStub({ defaults: { ttft_ms: 60, itl_ms: 4 } });
  const node = { name: "prom", gpuIndex: 0, idleW: IDLE_W };
  const proxy = await startProxy({
    upstream: stub.url,
    node,
    port: 0,
    adminPort: 0,
    onRecord: (record) => log.push(record),
  });
  const agent = await startAgent({ port: 0, gpus: [0], warn: () => {} });
  faces.proxy = `${proxy.adminUrl}/metrics`;
  faces.agent = `${agent.url}/metrics`;
  const port = await freePort();
  const target = (url: string) => new URL(url).host;
  writeFileSync(
    join(dir, "prometheus.yml"),
    [
      "global:",
      "  scrape_interval: 1s",
      "scrape_configs:",
      "  - job_name: proxy",
      `    static_configs: [{ targets: ["${target(proxy.adminUrl as string)}"] }]`,
      "  - job_name: agent",
      `    static_configs: [{ targets: ["${target(agent.url)}"] }]`,
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn(
    PROMETHEUS,
    [
      `--config.file=${join(dir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--log.level=warn",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let err = "";
  child.stderr?.on("data", (d: Buffer) => {
    err += d.toString();
  });
  promUrl = `http://127.0.0.1:${port}`;
  stop = async () => {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    await proxy.close();
    await agent.close();
    await stub.close();
  };
  for (let i = 0; i < 100; i++) {
    const ready = await fetch(`${promUrl}/-/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (child.exitCode !== null) throw new Error(`prometheus exited: ${err}`);
    await sleep(100);
  }
  // Requests through the proxy, one after another, each a window alone on the card.
  for (let i = 0; i < 12; i++) {
    const r = await fetch(`${proxy.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [], max_tokens: 8 + i, stream: i % 2 === 0 }),
    });
    await r.text();
  }
}, 60_000);
afterAll(async () => {
  await stop();
  sc.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe.runIf(PROMETHEUS !== null)("a real Prometheus scraping giul-proxy and giul-agent", () => {
  it("sums the requests' energy as the proxy's log does, within 0.1 %", async () => {
    const logged = log.filter((r) => r.joules !== null);
    expect(logged).toHaveLength(12);
    expect(logged.every((r) => r.method === "sampled")).toBe(true);
    const sum = logged.reduce((s, r) => s + (r.joules as number), 0);
    const close = (v: number) => Math.abs(v - sum) <= sum * 0.001;
    const scraped = await until('sum(giul_request_energy_joules_sum{job="proxy"})', close);
    expect(Math.abs(scraped - sum) / sum).toBeLessThanOrEqual(0.001);
    expect(await until('sum(giul_request_energy_joules_count{job="proxy"})', (v) => v === 12)).toBe(12);
    // And each request is within its bar of the card's exact energy above idle over its window.
    for (const r of logged) {
      const exact = (POWER_W - IDLE_W) * r.seconds;
      expect(Math.abs((r.joules as number) - exact)).toBeLessThanOrEqual(r.uncertainty_joules as number);
    }
  });

  it("reads the card's power as rate() of its energy counter, from the agent and from the proxy", async () => {
    for (const job of ["agent", "proxy"]) {
      const q = `rate(hw_energy_joules_total{job="${job}"}[5s])`;
      const rate = await until(q, (v) => Math.abs(v - POWER_W) <= POWER_W * 0.02);
      expect(Math.abs(rate - POWER_W), `${job}: ${q} = ${rate}`).toBeLessThanOrEqual(POWER_W * 0.02);
    }
    // The card's whole draw: 240 W of it above idle is what the requests share.
    const power = await query("hw_power_watts");
    expect(power.map((p) => p.metric.job).sort()).toEqual(["agent", "proxy"]);
    expect(new Set(power.map((p) => p.metric.hw_id)).size).toBe(1);
  });
});

describe.runIf(PROMETHEUS !== null)("promtool", () => {
  it("finds nothing to say of giul-proxy's and giul-agent's /metrics", async () => {
    const promtool = join(PROMETHEUS as string, "..", "promtool");
    for (const [face, url] of Object.entries(faces)) {
      const text = await (await fetch(url)).text();
      const run = spawnSync(promtool, ["check", "metrics"], { input: text, encoding: "utf8" });
      expect(run.error, `${promtool}: ${String(run.error)}`).toBeUndefined();
      expect(`${run.stdout}${run.stderr}`, face).toBe("");
      expect(run.status, face).toBe(0);
    }
  });
});
