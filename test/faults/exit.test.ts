import { spawn } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { ADDON, built, DIST, FAKE_NVML, FAKE_SMI } from "../fakes/paths.js";
import { Scenario } from "../fakes/scenario.js";
import { EXIT_BOUND_MS, report } from "./bounds.js";

// Fault matrix, item 3: a process exits within 200 ms whatever NVML or nvidia-smi is doing. Each
// case is a child process that meters with 20 s driver calls in flight and then exits, by
// process.exit() or by running out of work; its exit time is from the instant it decides to exit
// (CLOCK_MONOTONIC, printed by the child) to the parent seeing it gone. Before, process.exit()
// joined the sampler thread (39 s with 20 s calls) and libuv joined its pool, where nvmlInit ran.

const SLOW_US = 20_000_000;
const ready = built([FAKE_NVML, ADDON, DIST, FAKE_SMI]);
const scenarios: Scenario[] = [];
afterAll(() => {
  for (const s of scenarios) s.remove();
});

/** Slack on the exit bound: the parent's event loop and a busy machine. */
const EXIT_SLACK_MS = 150;

interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly out: string;
  readonly err: string;
  /** From the child's "exiting" stamp to the parent seeing it exit (ms). */
  readonly exitMs: number;
}

function runChild(body: string, env: Record<string, string>): Promise<Exit> {
  const script = `
import { Meter } from ${JSON.stringify(DIST)};
import { readFileSync, renameSync, writeFileSync } from "node:fs";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const node = { name: "exit", idleW: 10 };
function exiting(how) {
  console.log("exiting", String(process.hrtime.bigint()));
  if (how === "exit") process.exit(0);
}
${body}
`;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
    });
    const kill = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("exit", (code, signal) => {
      const at = process.hrtime.bigint();
      clearTimeout(kill);
      const stamp = /exiting (\d+)/.exec(out)?.[1];
      const exitMs = stamp === undefined ? Number.NaN : Number(at - BigInt(stamp)) / 1e6;
      resolve({ code, signal, out, err, exitMs });
    });
  });
}

function expectPromptExit(r: Exit, what: string): void {
  report(`exit with ${what}: ${r.exitMs.toFixed(0)} ms`);
  expect(r.signal).toBeNull();
  expect(r.err).toBe("");
  expect(r.code).toBe(0);
  expect(r.exitMs).toBeLessThan(EXIT_BOUND_MS + EXIT_SLACK_MS);
}

describe.runIf(ready)("a process exits within 200 ms whatever the driver is doing", () => {
  for (const how of ["exit", "end"] as const) {
    const by = how === "exit" ? "process.exit()" : "the end of its work";
    it(`by ${by}, with the card's probe stuck in a 20 s nvmlInit`, async () => {
      const sc = new Scenario({ latencyUs: SLOW_US });
      scenarios.push(sc);
      const r = await runChild(
        `
const m = await Meter.forNode(node, { joulesPer1kHint: 1000 }).open();
await m.close();
const e = m.result({ tokens: 1 });
console.log("window", e.method, e.reason);
exiting(${JSON.stringify(how)});
`,
        sc.env(),
      );
      expect(r.out).toMatch(/window estimated the card's probe did not answer within the node's timeoutMs/);
      expectPromptExit(r, `a 20 s nvmlInit in flight (${by})`);
    });

    it(`by ${by}, with the sampling thread stuck in a 20 s read`, async () => {
      const sc = new Scenario({ devices: [{ power: 200 }] });
      scenarios.push(sc);
      // Measured first; then the child slows the driver itself (the scenario file is re-read) and
      // waits until the thread is inside a slow call.
      const r = await runChild(
        `
const m = await Meter.forNode(node).open();
await sleep(30);
await m.close();
console.log("window", m.result().method);
const path = process.env.GIUL_FAKE_NVML_SCENARIO;
const text = readFileSync(path, "utf8") + "latency_us ${SLOW_US}\\n";
writeFileSync(path + ".tmp", text);
renameSync(path + ".tmp", path);
const held = await Meter.forNode(node).open(); // the sampler keeps running under an open window
await sleep(150);
exiting(${JSON.stringify(how)});
`,
        sc.env(),
      );
      expect(r.out).toMatch(/window sampled/);
      expectPromptExit(r, `the sampler in a 20 s read (${by})`);
    });
  }

  it("a pending NVML call keeps the event loop alive only when asked to (keepAlive)", async () => {
    const sc = new Scenario({ latency: [{ us: SLOW_US, fn: "nvmlInit" }] });
    scenarios.push(sc);
    const addon = JSON.stringify(ADDON);
    const background = await runChild(
      `
const b = (await import("node:module")).createRequire(import.meta.url)(${addon});
b.nvmlInit({ keepAlive: false }).then(() => console.log("answered"));
exiting("end");
`,
      sc.env(),
    );
    expect(background.out).not.toMatch(/answered/);
    expectPromptExit(background, "a 20 s nvmlInit({ keepAlive: false }) pending (the end of its work)");

    sc.update({ latency: [{ us: 200_000, fn: "nvmlInit" }] });
    const awaited = await runChild(
      `
const b = (await import("node:module")).createRequire(import.meta.url)(${addon});
b.nvmlInit().then((r) => console.log("answered", r.ok));
`,
      sc.env(),
    );
    expect(awaited.code).toBe(0);
    expect(awaited.out).toMatch(/answered true/);
    const bad = await runChild(
      `
const b = (await import("node:module")).createRequire(import.meta.url)(${addon});
for (const options of [1, { keepAlive: "no" }]) {
  try { b.nvmlInit(options); } catch (e) { console.log(e.constructor.name, e.message); }
}
`,
      sc.env(),
    );
    expect(bad.out).toMatch(/TypeError nvmlInit: options must be an object/);
    expect(bad.out).toMatch(/TypeError nvmlInit: options.keepAlive must be a boolean/);
  });

  it("by process.exit(), with nvidia-smi hung in the driver", async () => {
    const sc = new Scenario({ latencyUs: SLOW_US });
    scenarios.push(sc);
    const r = await runChild(
      `
const m = await Meter.forNode(node).open();
await m.close();
console.log("window", m.result().backend, m.result().reason);
exiting("exit");
`,
      sc.env({ GIUL_DISABLE_ADDON: "1", GIUL_NVIDIA_SMI: FAKE_SMI }),
    );
    expect(r.out).toMatch(/window smi_sampler .*sampler stalled/);
    expectPromptExit(r, "nvidia-smi hung (process.exit())");
  });
});
