import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { amdEnv, amdSpec } from "./fakes/amd-scenario.js";
import { startStub } from "./fakes/openai-stub.mjs";
import { amdReady, built, ROOT } from "./fakes/paths.js";
import { chat, raw } from "./fakes/raw-client.js";
import { Scenario } from "./fakes/scenario.js";

// Every face on an AMD-only host (the libamd_smi double, no NVML): giul-probe (cards, --json,
// --idle), giul-agent (/power, /metrics), giul-proxy --gpu <AMD UUID>. Figures against the scenario.

const PROBE = join(ROOT, "dist", "cli", "probe.js");
const AGENT = join(ROOT, "dist", "cli", "agent.js");
const PROXY = join(ROOT, "dist", "cli", "proxy.js");
const ready = amdReady() && built([PROBE, AGENT, PROXY], "the CLIs (dist/cli)");
const UUID0 = "1fff74a1-0000-1000-80a1-000000000000";

const sc = new Scenario(
  amdSpec({
    devices: [
      { name: "AMD Instinct MI300X", power: 140, procs: [{ pid: 777, usedMib: 1024, name: "vllm" }] },
      { name: "AMD Instinct MI210", power: 90, counterRate: 0, amdPower: "average", memTotalMib: 65520 },
    ],
  }),
);
const dir = mkdtempSync(join(tmpdir(), "giul-amd-cli-"));
afterAll(() => {
  sc.remove();
  rmSync(dir, { recursive: true, force: true });
});

function env(): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith("GIUL_")) base[key] = value;
  return { ...base, ...amdEnv(sc) };
}

function probe(args: readonly string[]) {
  return spawnSync(process.execPath, [PROBE, ...args], { env: env(), encoding: "utf8", timeout: 30_000 });
}

/** Starts a CLI and resolves with its URL once it prints "listening on". */
function serve(cli: string, args: readonly string[]): { proc: ChildProcess; url: Promise<string> } {
  const proc = spawn(process.execPath, [cli, ...args], { env: env() });
  let out = "";
  const url = new Promise<string>((resolve, reject) => {
    const look = (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1] as string);
    };
    proc.stdout?.on("data", look);
    proc.stderr?.on("data", look);
    proc.on("exit", (code) => reject(new Error(`exited ${code} before listening: ${out}`)));
  });
  return { proc, url };
}

describe.runIf(ready)("giul-probe on an AMD host", () => {
  it("--json lists AMD SMI's cards with the backend each would use, and why a counter is not used", () => {
    const ran = probe(["--json", "--seconds", "1"]);
    expect(ran.status, ran.stderr).toBe(0);
    const report = JSON.parse(ran.stdout);
    expect(report.nvml.available).toBe(false);
    expect(report.amdsmi).toMatchObject({ available: true, version: "26.1.0", deviceCount: 2 });
    expect(report.devices[0]).toMatchObject({
      index: 0,
      vendor: "amd",
      name: "AMD Instinct MI300X",
      uuid: UUID0,
      memoryUsedMib: 0,
      memoryTotalMib: 81559,
      energyCounter: true,
      instantPower: true,
      powerW: 140,
      backend: "amdsmi_counter",
    });
    expect(report.devices[0].sensor.counterChangesEveryRead).toBe(true);
    expect(report.devices[1]).toMatchObject({
      index: 1,
      name: "AMD Instinct MI210",
      energyCounter: false,
      instantPower: false,
      powerUsage: true,
      powerW: 90,
      memoryTotalMib: 65520,
      backend: "amdsmi_sampler",
    });
    expect(report.devices[1].counterRefused).toMatch(/disagrees with integrated power \(it counted 0 %/);
  });

  it("prints AMD SMI's line and each card for a person", () => {
    const ran = probe(["--seconds", "1"]);
    expect(ran.status, ran.stderr).toBe(0);
    expect(ran.stdout).toMatch(/^AMD SMI\s+26\.1\.0 from \S+libamd_smi\.so\.26, 2 device\(s\)$/m);
    expect(ran.stdout).toMatch(/^GPU 0 {2}AMD Instinct MI300X$/m);
    expect(ran.stdout).toMatch(/backend\s+amdsmi_counter: /);
    expect(ran.stdout).toMatch(/energy counter\s+not used: the energy counter disagrees/);
    expect(ran.stdout).toMatch(/power now\s+90\.0 W \(average_socket_power/);
  });

  it("--idle measures an idle card's draw, and refuses a card with a process on it", () => {
    // Card 1 has no process on it; card 0 has one (refused, as on NVIDIA).
    const ran = probe(["--idle", "--gpu", "1", "--seconds", "1", "--json"]);
    expect(ran.status, ran.stderr).toBe(0);
    const idle = JSON.parse(ran.stdout);
    expect(idle).toMatchObject({ gpuIndex: 1, medianW: 90, backend: "amdsmi_sampler" });
    const busy = probe(["--idle", "--gpu", "0", "--seconds", "1"]);
    expect(busy.status).toBe(2);
    expect(busy.stderr).toMatch(/vllm|777/);
  });
});

describe.runIf(ready)("giul-agent and giul-proxy on an AMD host", () => {
  let stub: Awaited<ReturnType<typeof startStub>>;
  beforeAll(async () => {
    stub = await startStub();
  });
  afterAll(async () => {
    await stub.close();
  });

  it('giul-agent serves the AMD card\'s power and exports it with hw_vendor="AMD"', async () => {
    const agent = serve(AGENT, ["--port", "0", "--gpu", "0"]);
    try {
      const url = await agent.url;
      const power = (await (await fetch(`${url}/power`)).json()) as { watts: number };
      expect(power.watts).toBe(140);
      const metrics = await (await fetch(`${url}/metrics`)).text();
      expect(metrics).toContain(
        `hw_id="${UUID0}",hw_type="gpu",hw_name="AMD Instinct MI300X",hw_vendor="AMD"`,
      );
    } finally {
      agent.proc.kill("SIGTERM");
    }
  });

  it("giul-proxy --gpu <AMD UUID> charges each answer against the card's energy", async () => {
    const log = join(dir, "amd.ndjson");
    const proxy = serve(PROXY, [
      "--upstream",
      stub.url,
      "--gpu",
      UUID0,
      "--idle-w",
      "60",
      "--listen",
      ":0",
      "--log",
      log,
    ]);
    try {
      const url = await proxy.url;
      const res = await raw(url, "/v1/chat/completions", {
        body: chat({ max_tokens: 8, stub: { ttft_ms: 300 } }),
      });
      expect(res.headers["x-energy-method"]).toBe("sampled");
    } finally {
      proxy.proc.kill("SIGTERM");
      await new Promise((r) => proxy.proc.once("exit", r));
    }
    const record = JSON.parse(readFileSync(log, "utf8").trim().split("\n")[0] as string);
    expect(record.backend).toBe("amdsmi_counter");
    const exact = (140 - 60) * record.seconds;
    expect(Math.abs(record.joules - exact)).toBeLessThanOrEqual(record.uncertainty_joules);
  });
});
