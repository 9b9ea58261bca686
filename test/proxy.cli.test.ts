import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStub } from "./fakes/openai-stub.mjs";
import { ADDON, built, FAKE_NVML, ROOT } from "./fakes/paths.js";
import { chat, raw } from "./fakes/raw-client.js";
import { Scenario, sliceUuid } from "./fakes/scenario.js";

// The giul-proxy binary as installed (dist/cli/proxy.js): bad flags exit 2 naming the flag (the
// node file's fields named as Node's are), loopback by default and a warning on 0.0.0.0, the
// NDJSON log, and SIGTERM letting a stream in flight finish before exiting 0.

const CLI = join(ROOT, "dist", "cli", "proxy.js");
// Built, or skipped with the reason (in CI: failed, never skipped).
const ready = built([CLI, FAKE_NVML, ADDON], "giul-proxy (dist/cli/proxy.js), the addon or the NVML double");
const sc = new Scenario({ devices: [{ power: 250 }] });
const dir = mkdtempSync(join(tmpdir(), "giul-proxy-cli-"));
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
  /** The proxy's URL once it listens (null if it exited first). */
  readonly url: Promise<string | null>;
  readonly exit: Promise<{ code: number | null; out: string; err: string }>;
}

function start(args: string[], scenario: Scenario = sc): Run {
  const proc = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...scenario.env() } });
  let out = "";
  let err = "";
  let found: (url: string | null) => void = () => {};
  const url = new Promise<string | null>((resolve) => {
    found = resolve;
  });
  proc.stdout?.on("data", (c: Buffer) => {
    out += c.toString();
  });
  proc.stderr?.on("data", (c: Buffer) => {
    err += c.toString();
    const m = /listening on (http:\/\/\S+)/.exec(err);
    if (m) found(m[1] as string);
  });
  const exit = new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    proc.on("exit", (code, signal) => {
      if (signal) err += `\n[signal ${signal}]`;
      found(null);
      resolve({ code, out, err });
    });
  });
  return { proc, url, exit };
}

describe.runIf(ready)("giul-proxy CLI", () => {
  it("prints help, and refuses bad arguments with exit 2, naming the flag", async () => {
    const help = await start(["--help"]).exit;
    expect(help.code).toBe(0);
    expect(help.out).toMatch(/Usage: giul-proxy/);
    const file = (name: string, body: unknown) => {
      const path = join(dir, name);
      writeFileSync(path, JSON.stringify(body));
      return path;
    };
    const up = ["--upstream", "http://127.0.0.1:1"];
    const cases: [string[], RegExp][] = [
      [["--idle-w", "60"], /--upstream is required/],
      [["--upstream", "ftp://x", "--idle-w", "60"], /--upstream: expected an http/],
      [["--upstream", "nope", "--idle-w", "60"], /--upstream: not a valid URL/],
      [up, /--idle-w is required/],
      [[...up, "--idle-w", "lots"], /--idle-w needs/],
      [[...up, "--idle-w", "60", "--gpu", "a"], /--gpu needs an integer/],
      [[...up, "--idle-w", "60", "--listen", "here"], /--listen needs HOST:PORT/],
      [[...up, "--idle-w", "60", "--listen", "127.0.0.1:70000"], /--listen must be from 0 to 65535/],
      [[...up, "--idle-w", "60", "--admin", "x"], /--admin needs HOST:PORT/],
      [[...up, "--idle-w", "60", "--max-body-bytes", "0"], /--max-body-bytes must be from 1/],
      [[...up, "--idle-w", "60", "--serving-match", ""], /--serving-match needs a process name/],
      [[...up, "--idle-w", "60", "--period-ms", "5000"], /--period-ms must be from 1 to 1000/],
      [[...up, "--idle-w", "60", "--log", join(dir, "no", "such", "dir.ndjson")], /--log .*cannot append/],
      [[...up, "--idle-w", "60", "--nope"], /unknown option --nope/],
      [[...up, "--node", join(dir, "missing.json")], /--node .*missing\.json/],
      [[...up, "--node", file("bad-idle.json", { idleW: "x" })], /node\.idleW: expected a finite number/],
      [
        [...up, "--node", file("snake.json", { idle_w: 3 })],
        /node\.idle_w: unknown key; did you mean "idleW"/,
      ],
      [[...up, "--node", file("remote.json", { idleW: 3, isLocal: false })], /node\.powerEndpoint: required/],
    ];
    for (const [args, message] of cases) {
      const r = await start(args).exit;
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.err, args.join(" ")).toMatch(message);
      expect(r.err).toMatch(/^giul-proxy: /);
    }
  });

  it("binds loopback by default, logs one NDJSON record per request, and drains a stream on SIGTERM", async () => {
    const log = join(dir, "energy.ndjson");
    const node = join(dir, "node.json");
    writeFileSync(node, JSON.stringify({ name: "iris", idleW: 999, contentionIgnore: ["Xorg"] }));
    const run = start([
      "--upstream",
      stub.url,
      "--node",
      node,
      "--idle-w",
      "60",
      "--listen",
      ":0",
      "--admin",
      "off",
      "--log",
      log,
    ]);
    const url = await run.url;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const plain = await raw(url as string, "/v1/chat/completions", {
      body: chat({ max_tokens: 4, stub: { ttft_ms: 50 } }),
      headers: { "x-request-id": "cli-1" },
    });
    expect(plain.headers["x-energy-method"]).toBe("sampled");
    // A stream of about a second, with SIGTERM sent while it runs: it finishes, then the proxy exits.
    const stream = raw(url as string, "/v1/chat/completions", {
      body: chat({ stream: true, max_tokens: 40, stub: { itl_ms: 25 } }),
      headers: { "x-request-id": "cli-2" },
    });
    await new Promise((r) => setTimeout(r, 300));
    run.proc.kill("SIGTERM");
    const streamed = await stream;
    expect(streamed.complete).toBe(true);
    expect(streamed.body.toString()).toMatch(/: energy \{.*\}\n\ndata: \[DONE\]\n\n$/);
    const exit = await run.exit;
    expect(exit.code).toBe(0);
    expect(exit.err).not.toMatch(/every interface/);
    const lines = readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.request_id)).toEqual(["cli-1", "cli-2"]);
    expect(lines[0]).toMatchObject({
      method: "sampled",
      idle_w: 60,
      status: 200,
      outcome: "complete",
      completion_tokens: 4,
    });
    expect(lines[1]).toMatchObject({ stream: true, model: "stub-model", outcome: "complete" });
    expect(typeof lines[1].started_at).toBe("string");
  }, 30_000);

  it("warns on stderr when bound to 0.0.0.0", async () => {
    const run = start([
      "--upstream",
      stub.url,
      "--idle-w",
      "60",
      "--listen",
      "0.0.0.0:0",
      "--admin",
      "127.0.0.1:0",
    ]);
    expect(await run.url).toMatch(/^http:\/\/0\.0\.0\.0:\d+$/);
    run.proc.kill("SIGTERM");
    const exit = await run.exit;
    expect(exit.err).toMatch(/the proxy listens on every interface \(0\.0\.0\.0\)/);
    expect(exit.err).toMatch(/metrics on http:\/\/127\.0\.0\.1:\d+\/metrics/);
    expect(exit.code, exit.err).toBe(0);
  });
});

describe.runIf(ready)("giul-proxy --gpu MIG-…", () => {
  // A server on a MIG slice, end to end on the NVML double: the card draws a constant 300 W; a
  // request alone in flight is charged the card above idle over its window (its share, weighted 3
  // of 7, is all of it when nothing else is open), and its record says which slice of which card.
  it("charges each answer its slice's share of the card, and the record names the slice", async () => {
    const card = "GPU-00000000-0000-0000-0000-000000000000";
    const slice = sliceUuid(0, 2, 0);
    const mig = new Scenario({
      devices: [
        {
          uuid: card,
          power: 300,
          mig: 1,
          utilSupported: false,
          slices: [{ gi: 2, ci: 0, slices: 3, profile: "3g.40gb" }],
        },
      ],
    });
    try {
      const log = join(dir, "mig.ndjson");
      const run = start(
        ["--upstream", stub.url, "--gpu", slice, "--idle-w", "60", "--listen", ":0", "--log", log],
        mig,
      );
      const url = await run.url;
      expect(url).not.toBeNull();
      const res = await raw(url as string, "/v1/chat/completions", {
        body: chat({ max_tokens: 8, stub: { ttft_ms: 300 } }),
      });
      expect(res.headers["x-energy-method"]).toBe("sampled");
      run.proc.kill("SIGTERM");
      expect((await run.exit).code).toBe(0);
      const record = JSON.parse(readFileSync(log, "utf8").trim().split("\n")[0] as string);
      expect(record.partition).toEqual({
        kind: "mig",
        profile: "3g.40gb",
        slice_uuid: slice,
        card_uuid: card,
        slices: 3,
        card_slices: 7,
      });
      expect(record.reason).toContain(`MIG slice ${slice} (3g.40gb) has no power sensor of its own`);
      const exact = (300 - 60) * record.seconds;
      expect(Math.abs(record.joules - exact)).toBeLessThanOrEqual(record.uncertainty_joules);
    } finally {
      mig.remove();
    }
  });
});
