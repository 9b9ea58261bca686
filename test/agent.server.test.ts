import { request } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess, sliceUuid } from "./fakes/scenario.js";

// giul-agent in this process, reading the libnvidia-ml double: its wire format against the
// scenario, its Prometheus text, and its behaviour under bad input.

const sc = scenarioForThisProcess({
  devices: [
    {
      name: "NVIDIA H100 80GB HBM3",
      // a slow ramp, so that power at a known instant is known to a fraction of a watt
      power: [
        [0, 120],
        [60_000, 420],
        [600_000, 420],
      ],
      memTotalMib: 81559,
      memUsedMib: 2048,
      utilGpu: 37,
      procs: [
        { pid: 4242, usedMib: 1024, name: "/usr/bin/python3 -m vllm" },
        { pid: 777, usedMib: "na", name: "Xorg" },
      ],
    },
    // unified memory, no utilization (MIG parent): those fields are null, never 0
    // … and in MIG mode: a slice of it is served the card's readings.
    {
      name: "GB10",
      power: 40,
      memSupported: false,
      utilSupported: false,
      mig: 1,
      slices: [{ gi: 1, ci: 0, slices: 1 }],
    },
  ],
});

const { startAgent } = await import("../src/agent/server.js");
const { DeviceMonitor } = await import("../src/agent/monitor.js");
type Agent = Awaited<ReturnType<typeof startAgent>>;

const ready = nativeReady();
if (!ready) console.warn("skipping: the addon or the test doubles are not built (npm run build:native)");

let agent: Agent;
const warnings: string[] = [];

afterAll(async () => {
  await agent?.close();
  sc.remove();
});

interface Got {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

function get(
  path: string,
  method = "GET",
  headers: Record<string, string> = {},
  body?: string,
): Promise<Got> {
  return new Promise((resolve, reject) => {
    const req = request(`${agent.url}${path}`, { method, headers, agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        text += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on("error", reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** Writes raw bytes on a fresh connection; resolves with all it got back once the server closes. */
function raw(bytes: string | Buffer, opts: { keepOpenMs?: number } = {}): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(agent.port, "127.0.0.1");
    let got = "";
    socket.on("data", (c) => {
      got += c.toString("latin1");
    });
    socket.on("error", () => resolve(got));
    socket.on("close", () => resolve(got));
    socket.on("connect", () => {
      socket.write(bytes);
      if (opts.keepOpenMs === undefined) socket.end();
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.runIf(ready)("giul-agent", () => {
  beforeAll(async () => {
    agent = await startAgent({
      port: 0,
      gpus: [0, 1],
      headersTimeoutMs: 1_000,
      requestTimeoutMs: 2_000,
      keepAliveTimeoutMs: 1_000,
      maxConnections: 32,
      warn: (m) => warnings.push(m),
    });
  });

  it("serves the Python agent's /power fields, in its units, for the scenario's card", async () => {
    await sleep(100);
    const r = await get("/power");
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^application\/json/);
    const p = JSON.parse(r.text);
    // Every field of the Python agent, then the extras (and nothing else).
    expect(Object.keys(p)).toEqual([
      "watts",
      "name",
      "memory_used_mib",
      "memory_total_mib",
      "memory_free_mib",
      "utilization_pct",
      "compute_apps",
      "agent",
      "gpu",
      "backend",
      "energy_source",
      "energy_series",
      "energy_j",
      "monotonic_ns",
    ]);
    expect(p.name).toBe("NVIDIA H100 80GB HBM3");
    expect(p.memory_total_mib).toBe(81559);
    expect(p.memory_used_mib).toBe(2048);
    expect(p.memory_free_mib).toBe(81559 - 2048);
    expect(p.utilization_pct).toBe(37);
    expect(p.compute_apps).toEqual([
      { pid: 4242, used_mib: 1024, name: "/usr/bin/python3 -m vllm" },
      { pid: 777, used_mib: null, name: "Xorg" },
    ]);
    expect(p.agent).toMatch(/^giul-node\/\d+\.\d+\.\d+/);
    expect(p.backend).toBe("nvml_counter");
    expect(p.energy_source).toBe("counter");
    // watts and energy are the sample stamped monotonic_ns: compare with the scenario there.
    const t = BigInt(p.monotonic_ns);
    expect(p.watts).toBeCloseTo(sc.powerW(0, t), 0);
    const counterJ = Number(sc.counterMj(0, t)) / 1000;
    // the counter moves in 10 ms steps: one step at 420 W is 4.2 J
    expect(Math.abs(p.energy_j - counterJ)).toBeLessThanOrEqual(4.2);
  });

  it("says null, never 0, for what the card cannot read", async () => {
    const p = JSON.parse((await get("/power?gpu=1")).text);
    expect(p.name).toBe("GB10");
    expect(p.memory_used_mib).toBeNull();
    expect(p.memory_total_mib).toBeNull();
    expect(p.memory_free_mib).toBeNull();
    expect(p.utilization_pct).toBeNull();
    expect(p.watts).toBeCloseTo(40, 1);
    expect(p.gpu).toBe(1);
    expect((await get("/power?gpu=5")).status).toBe(404);
    // A malformed parameter is a bad request that names it, not "no such card".
    const bad = await get("/power?gpu=a%20b");
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text).error).toMatch(
      /^gpu: expected a card index \(0\.\.1023\) or UUID, got "a b"$/,
    );
    // A well-formed UUID that no served card has: no such card, with the cards it does serve.
    const absent = await get("/power?gpu=GPU-00000000-dead");
    expect(absent.status).toBe(404);
    expect(JSON.parse(absent.text).error).toMatch(/^this agent serves gpu /);
    // A card named by its UUID (what a remote Node's gpuUuid asks for).
    const named = await get("/power?gpu=GPU-00000000-0000-0000-0000-000000000001");
    expect(named.status).toBe(200);
    expect(JSON.parse(named.text).gpu).toBe(1);
    // A MIG slice named by its UUID (a remote Node on a slice): its card's readings.
    const slice = await get(`/power?gpu=${sliceUuid(1, 1, 0)}`);
    expect(slice.status).toBe(200);
    expect(JSON.parse(slice.text).gpu).toBe(1);
    expect((await get("/power?gpu=MIG-99999999-0000-4000-8000-000000000001")).status).toBe(404);
    const unknown = await get("/energy?card=1");
    expect(unknown.status).toBe(400);
    expect(JSON.parse(unknown.text).error).toMatch(/"card": unknown parameter/);
  });

  it("hands out cumulative readings whose difference is the card's energy between them", async () => {
    const a = JSON.parse((await get("/energy")).text);
    await sleep(1_000);
    const b = JSON.parse((await get("/energy")).text);
    expect(b.energy_series).toBe(a.energy_series);
    const truth = sc.energyJ(0, BigInt(a.monotonic_ns), BigInt(b.monotonic_ns));
    const got = b.energy_j - a.energy_j;
    expect(Math.abs(got - truth)).toBeLessThanOrEqual(truth * 0.01 + 4.2);
    expect(b.sample_index - a.sample_index).toBeGreaterThan(50);
    expect(a.power_w).toBeCloseTo(sc.powerW(0, BigInt(a.monotonic_ns)), 0);
    expect(b.wait_ns).toBeGreaterThanOrEqual(0);
    expect(b.edge_age_ns).toBeNull(); // no x-giul-edge-age-ns: read at the arrival
  });

  it("reads a client's edge in the past when asked (x-giul-edge-age-ns), and refuses a bad age naming the header", async () => {
    // Two readings 1 s apart, the second asked for the instant 0.4 s before it arrived: their
    // difference is the card's energy between the first and that instant (the scenario's truth).
    const a = JSON.parse((await get("/energy")).text);
    await sleep(1_000);
    const sent = process.hrtime.bigint();
    const r = await get("/energy", "GET", { "x-giul-edge-age-ns": "400000000" });
    expect(r.status).toBe(200);
    const b = JSON.parse(r.text);
    expect(b.edge_age_ns).toBe(400_000_000);
    // The instant read is 0.4 s before the arrival, so before this request was even sent.
    expect(BigInt(b.monotonic_ns)).toBeLessThan(sent);
    expect(BigInt(b.monotonic_ns)).toBeGreaterThan(sent - 500_000_000n);
    const truth = sc.energyJ(0, BigInt(a.monotonic_ns), BigInt(b.monotonic_ns));
    expect(Math.abs(b.energy_j - a.energy_j - truth)).toBeLessThanOrEqual(truth * 0.01 + 4.2);
    for (const bad of ["abc", "-5", "1.5", "10000000001"]) {
      const refused = await get("/energy", "GET", { "x-giul-edge-age-ns": bad });
      expect(refused.status).toBe(400);
      expect(JSON.parse(refused.text).error).toMatch(
        /^x-giul-edge-age-ns: expected a whole number of ns from 0 to 10000000000/,
      );
    }
  });

  it("serves Prometheus text for every card, leaving out what cannot be read", async () => {
    const r = await get("/metrics");
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
    const samples = new Map<string, number>();
    const types = new Map<string, string>();
    for (const line of r.text.split("\n")) {
      if (line === "") continue;
      const typed = /^# TYPE ([a-z_]+) (gauge|counter)$/.exec(line);
      if (typed) {
        types.set(typed[1] as string, typed[2] as string);
        continue;
      }
      if (line.startsWith("# HELP ")) continue;
      const m = /^([a-z_]+)\{((?:[a-z_]+="(?:[^"\\]|\\.)*",?)*)\} (\S+)$/.exec(line);
      expect(m, `unparseable line: ${line}`).not.toBeNull();
      const [, name, labels, value] = m as RegExpExecArray;
      expect(types.has(name as string), `${name} has no TYPE before it`).toBe(true);
      const gpu = /gpu="(\d+)"/.exec(labels as string)?.[1];
      samples.set(`${name}/${gpu}`, Number(value));
    }
    expect(types.get("giul_energy_joules_total")).toBe("counter");
    expect(samples.get("giul_power_watts/0")).toBeGreaterThan(100);
    expect(samples.get("giul_power_watts/1")).toBeCloseTo(40, 1);
    expect(samples.get("giul_energy_joules_total/0")).toBeGreaterThan(1000);
    expect(samples.get("giul_memory_total_bytes/0")).toBe(81559 * 1048576);
    expect(samples.get("giul_memory_used_bytes/0")).toBe(2048 * 1048576);
    expect(samples.get("giul_utilization_ratio/0")).toBeCloseTo(0.37, 9);
    expect(samples.get("giul_compute_processes/0")).toBe(2);
    expect(samples.has("giul_memory_used_bytes/1")).toBe(false);
    expect(samples.has("giul_utilization_ratio/1")).toBe(false);
  });

  it("names the cards' figures as OpenTelemetry's hardware conventions do, keeping giul 0.1's names as deprecated aliases", async () => {
    const scrape = async () => {
      const at = process.hrtime.bigint();
      const text = (await get("/metrics")).text;
      const samples = new Map<string, number>();
      const types = new Map<string, string>();
      const help = new Map<string, string>();
      const labels = new Map<string, string>();
      for (const line of text.split("\n")) {
        const typed = /^# TYPE ([a-z_]+) (gauge|counter)$/.exec(line);
        if (typed) types.set(typed[1] as string, typed[2] as string);
        const helped = /^# HELP ([a-z_]+) (.*)$/.exec(line);
        if (helped) help.set(helped[1] as string, helped[2] as string);
        const m = /^([a-z_]+)\{(.*)\} (\S+)$/.exec(line);
        if (m === null) continue;
        const card = /hw_id="([^"]+)"/.exec(m[2] as string)?.[1] ?? /gpu="(\d+)"/.exec(m[2] as string)?.[1];
        samples.set(`${m[1]}/${card}`, Number(m[3]));
        if ((m[1] as string).startsWith("hw_")) labels.set(card as string, m[2] as string);
      }
      return { at, samples, types, help, labels };
    };
    const uuid0 = "GPU-00000000-0000-0000-0000-000000000000";
    const uuid1 = "GPU-00000000-0000-0000-0000-000000000001";
    const a = await scrape();
    await new Promise((r) => setTimeout(r, 500));
    const b = await scrape();
    expect(b.labels.get(uuid0)).toBe(
      `hw_id="${uuid0}",hw_type="gpu",hw_name="NVIDIA H100 80GB HBM3",hw_vendor="NVIDIA",hw_driver_version="590.48.01"`,
    );
    expect(b.types.get("hw_energy_joules_total")).toBe("counter");
    for (const name of [
      "hw_power_watts",
      "hw_gpu_memory_usage_bytes",
      "hw_gpu_memory_limit_bytes",
      "hw_gpu_utilization_ratio",
    ]) {
      expect(b.types.get(name)).toBe("gauge");
    }
    expect(b.samples.get(`hw_power_watts/${uuid0}`)).toBe(b.samples.get("giul_power_watts/0"));
    expect(b.samples.get(`hw_power_watts/${uuid1}`)).toBeCloseTo(40, 1);
    expect(b.samples.get(`hw_gpu_memory_limit_bytes/${uuid0}`)).toBe(81559 * 1048576);
    expect(b.samples.get(`hw_gpu_memory_usage_bytes/${uuid0}`)).toBe(2048 * 1048576);
    expect(b.samples.get(`hw_gpu_utilization_ratio/${uuid0}`)).toBeCloseTo(0.37, 9);
    expect(b.samples.has(`hw_gpu_memory_usage_bytes/${uuid1}`)).toBe(false);
    // hw_energy_joules_total advances as the card's counter does, by the scenario's energy.
    const advanced =
      (b.samples.get(`hw_energy_joules_total/${uuid0}`) as number) -
      (a.samples.get(`hw_energy_joules_total/${uuid0}`) as number);
    const raw =
      (b.samples.get("giul_energy_joules_total/0") as number) -
      (a.samples.get("giul_energy_joules_total/0") as number);
    expect(advanced).toBeCloseTo(raw, 6);
    const truth = sc.energyJ(0, a.at, b.at);
    expect(Math.abs(advanced - truth)).toBeLessThanOrEqual(420 * 2 * 0.05 + 1);
    // giul 0.1's names, one more release, saying what replaces them.
    for (const [old, instead] of [
      ["giul_power_watts", "hw_power_watts"],
      ["giul_energy_joules_total", "hw_energy_joules_total"],
      ["giul_memory_used_bytes", "hw_gpu_memory_usage_bytes"],
      ["giul_memory_total_bytes", "hw_gpu_memory_limit_bytes"],
      ["giul_utilization_ratio", "hw_gpu_utilization_ratio"],
    ] as const) {
      expect(b.help.get(old)).toMatch(
        new RegExp(`Deprecated: use ${instead}; removed in the next release\\.$`),
      );
    }
  });

  it("is read-only: 405 for other methods, 404 for other paths, 413 for a body; HEAD has no body", async () => {
    for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
      const r = await get("/power", method);
      expect(r.status).toBe(405);
      expect(r.headers.allow).toBe("GET, HEAD");
    }
    expect((await get("/")).status).toBe(404);
    expect((await get("/power/../etc/passwd")).status).toBe(404);
    expect((await get("/POWER")).status).toBe(404);
    const withBody = await get("/power", "GET", { "content-length": "5" }, "hello");
    expect(withBody.status).toBe(413);
    const chunked = await get("/power", "GET", { "transfer-encoding": "chunked" }, "hello");
    expect(chunked.status).toBe(413);
    const head = await get("/power", "HEAD");
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
  });

  it("never crashes on bad input: garbage, oversized headers, slow and half-open clients, too many connections", async () => {
    expect(await raw("GARBAGE\r\n\r\n")).toMatch(/^HTTP\/1\.1 400/);
    expect(await raw(Buffer.from([0, 1, 2, 255, 254, 13, 10, 13, 10]))).toMatch(/^HTTP\/1\.1 400/);
    expect(await raw("GET /power HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")).toMatch(
      /^HTTP\/1\.1 400/,
    );
    expect(await raw(`GET /power HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`)).toMatch(
      /^HTTP\/1\.1 431/,
    );
    expect(await raw(`GET /${"p".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`)).toMatch(/^HTTP\/1\.1 431/);
    // A slow client (headers never finished) and a half-open one (nothing sent): both are cut off.
    const slow = raw("GET /power HTTP/1.1\r\nHost: x\r\n", { keepOpenMs: 0 });
    const silent = raw("", { keepOpenMs: 0 });
    const [slowGot, silentGot] = await Promise.all([slow, silent]);
    expect(slowGot).toMatch(/^HTTP\/1\.1 408|^$/);
    expect(silentGot).toMatch(/^HTTP\/1\.1 408|^$/);
    // More connections than the cap: the extra ones are refused, the server lives on.
    const sockets: Socket[] = [];
    for (let i = 0; i < 64; i++) {
      const s = connect(agent.port, "127.0.0.1");
      s.on("error", () => {});
      sockets.push(s);
    }
    await sleep(200);
    for (const s of sockets) s.destroy();
    await sleep(100);
    // Still answering, correctly.
    const r = await get("/power");
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).name).toBe("NVIDIA H100 80GB HBM3");
  });

  it("warns when bound to every interface", async () => {
    const open = await startAgent({ port: 0, host: "0.0.0.0", warn: (m) => warnings.push(m) });
    await open.close();
    expect(warnings.some((w) => /every interface \(0\.0\.0\.0\)/.test(w))).toBe(true);
  });

  it("gives its samplers back when it cannot listen (the port is taken)", async () => {
    const stop = vi.spyOn(DeviceMonitor.prototype, "stop");
    try {
      await expect(startAgent({ port: agent.port, gpus: [1], warn: () => {} })).rejects.toThrow(/EADDRINUSE/);
      expect(stop).toHaveBeenCalledTimes(1);
    } finally {
      stop.mockRestore();
    }
    // the running agent is untouched
    expect((await get("/power?gpu=1")).status).toBe(200);
  });
});
