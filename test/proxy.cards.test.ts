import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStub } from "./fakes/openai-stub.mjs";
import { ADDON, built, FAKE_NVML, ROOT } from "./fakes/paths.js";
import { chat, raw } from "./fakes/raw-client.js";
import { Scenario } from "./fakes/scenario.js";

// giul-proxy in front of a tensor-parallel server on 4 cards of the NVML double (`--gpu all`):
// each answer is charged every card it ran on. Each card draws a constant power of its own, so a
// request alone in flight costs exactly Σ (P_i − idle_i) × its seconds, and each card its part.

const CLI = join(ROOT, "dist", "cli", "proxy.js");
const ready = built([CLI, FAKE_NVML, ADDON], "giul-proxy (dist/cli/proxy.js), the addon or the NVML double");
const POWER = [200, 250, 300, 350];
const IDLE = [40, 42, 44, 46];
const sc = new Scenario({ devices: POWER.map((power) => ({ power })) });
const uuid = (i: number) => `GPU-00000000-0000-0000-0000-${String(i).padStart(12, "0")}`;
const dir = mkdtempSync(join(tmpdir(), "giul-proxy-cards-"));
let stub: Awaited<ReturnType<typeof startStub>>;

beforeAll(async () => {
  stub = await startStub();
});
afterAll(async () => {
  await stub.close();
  sc.remove();
  rmSync(dir, { recursive: true, force: true });
});

interface Run {
  readonly proc: ChildProcess;
  readonly url: Promise<string | null>;
  readonly err: () => string;
  readonly exit: Promise<{ code: number | null; err: string }>;
}

function start(args: string[]): Run {
  const proc = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...sc.env() } });
  let err = "";
  let found: (url: string | null) => void = () => {};
  const url = new Promise<string | null>((resolve) => {
    found = resolve;
  });
  proc.stderr?.on("data", (c: Buffer) => {
    err += c.toString();
    const m = /listening on (http:\/\/\S+)/.exec(err);
    if (m) found(m[1] as string);
  });
  const exit = new Promise<{ code: number | null; err: string }>((resolve) => {
    proc.on("exit", (code) => {
      found(null);
      resolve({ code, err });
    });
  });
  return { proc, url, err: () => err, exit };
}

describe.runIf(ready)("giul-proxy over several cards", () => {
  it("charges each answer every card (--gpu all), in its record, headers, log and /metrics", async () => {
    const log = join(dir, "energy.ndjson");
    const run = start([
      "--upstream",
      stub.url,
      "--gpu",
      "all",
      "--idle-w",
      IDLE.join(","),
      "--listen",
      ":0",
      "--admin",
      ":0",
      "--log",
      log,
    ]);
    const url = (await run.url) as string;
    expect(url).not.toBeNull();
    const res = await raw(url, "/v1/chat/completions", {
      body: chat({ max_tokens: 8, stub: { ttft_ms: 300 } }),
    });
    expect(res.headers["x-energy-method"]).toBe("sampled");
    const cardsHeader = String(res.headers["x-energy-cards"]);
    expect(cardsHeader.split(", ").map((p) => p.split(":")[0])).toEqual(["0", "1", "2", "3"]);
    // A stream: the comment before [DONE] carries the record with every card, the trailers announce them.
    const streamed = await raw(url, "/v1/chat/completions", {
      body: chat({ stream: true, max_tokens: 6, stub: { itl_ms: 20 } }),
    });
    const comment = /: energy (\{.*\})\n\ndata: \[DONE\]/.exec(streamed.body.toString());
    expect(JSON.parse(comment?.[1] as string).cards).toHaveLength(4);
    expect(String(streamed.headers.trailer)).toMatch(/x-energy-cards/);
    run.proc.kill("SIGTERM");
    const exit = await run.exit;
    expect(exit.code).toBe(0);
    expect(exit.err).toMatch(/GPUs 0, 1, 2, 3 via nvml_counter/);
    const record = JSON.parse(readFileSync(log, "utf8").trim().split("\n")[0] as string);
    expect(record.cards.map((c: { index: number }) => c.index)).toEqual([0, 1, 2, 3]);
    // Ground truth: alone in flight, each card's part is the card above its idle over the window.
    let truth = 0;
    record.cards.forEach((c: { joules: number; uncertainty_joules: number; idle_w: number }, i: number) => {
      const exact = ((POWER[i] as number) - (IDLE[i] as number)) * record.seconds;
      truth += exact;
      expect(c.idle_w).toBe(IDLE[i]);
      expect(Math.abs(c.joules - exact)).toBeLessThanOrEqual(c.uncertainty_joules);
    });
    expect(Math.abs(record.joules - truth)).toBeLessThanOrEqual(record.uncertainty_joules);
    expect(record.idle_w).toBe(IDLE.reduce((a, b) => a + b, 0));
    // The header carries the same parts as the record.
    expect(Number(cardsHeader.split(", ")[3]?.split(":")[1]?.split("±")[0])).toBeCloseTo(
      record.cards[3].joules,
      6,
    );
  });

  it("serves every card's gauges and parts on /metrics (cards named by UUID)", async () => {
    const run = start([
      "--upstream",
      stub.url,
      "--gpu",
      `${uuid(0)},${uuid(2)}`,
      "--idle-w",
      "40,44",
      "--listen",
      ":0",
      "--admin",
      ":0",
    ]);
    const url = (await run.url) as string;
    const res = await raw(url, "/v1/chat/completions", {
      body: chat({ max_tokens: 4, stub: { ttft_ms: 100 } }),
    });
    const admin = /metrics on (http:\/\/\S+)\/metrics/.exec(run.err()) as RegExpExecArray;
    const text = (await raw(admin[1] as string, "/metrics", { method: "GET" })).body.toString();
    run.proc.kill("SIGTERM");
    await run.exit;
    const parts = String(res.headers["x-energy-cards"]).split(", ");
    for (const [i, id] of [
      [0, uuid(0)],
      [1, uuid(2)],
    ] as const) {
      expect(text).toMatch(
        new RegExp(`hw_power_watts\\{hw_id="${id}",hw_type="gpu"[^}]*\\} ${POWER[i === 0 ? 0 : 2]}`),
      );
      const m = new RegExp(
        `giul_card_request_energy_joules_total\\{hw_id="${id}",hw_type="gpu"[^}]*\\} (\\S+)`,
      ).exec(text);
      expect(Number(m?.[1])).toBeCloseTo(Number(parts[i]?.split(":")[1]?.split("±")[0]), 6);
    }
    expect(text).toMatch(new RegExp(`giul_request_energy_joules_count\\{hw_id="${uuid(0)},${uuid(2)}"`));
  });

  it("refuses bad card flags, naming the flag", async () => {
    const up = ["--upstream", "http://127.0.0.1:1"];
    const cases: [string[], RegExp][] = [
      [[...up, "--idle-w", "40", "--gpu", "0,x"], /--gpu needs an integer/],
      [[...up, "--idle-w", "40", "--gpu", "0,0"], /--gpu: node\.gpuIndex\[1\]: card 0 is listed twice/],
      [
        [...up, "--idle-w", "40", "--gpu", `${uuid(1)},${uuid(1)}`],
        /--gpu: node\.gpuUuid\[1\]: card GPU-\S+ is listed twice/,
      ],
      [
        [...up, "--idle-w", "40,41", "--gpu", "0,1,2"],
        /--idle-w: node\.idleW: expected one idle draw per card of gpuIndex \(3\)/,
      ],
      [
        [...up, "--idle-w", "40,41", "--gpu", "all"],
        /--idle-w: node\.idleW: expected one idle draw per card of gpuIndex \(4\)/,
      ],
    ];
    for (const [args, message] of cases) {
      const r = await start(args).exit;
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.err, args.join(" ")).toMatch(message);
    }
  });
});
