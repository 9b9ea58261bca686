import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ADDON, haveDoubles, ROOT } from "./fakes/paths.js";
import { Scenario } from "./fakes/scenario.js";

// The giul-agent binary as installed (dist/cli/agent.js): arguments, the warning for an address
// open to every interface, and a clean stop on SIGTERM.

const CLI = join(ROOT, "dist", "cli", "agent.js");
const ready = existsSync(CLI) && haveDoubles() && existsSync(ADDON);
const sc = new Scenario({ devices: [{ power: 123 }] });
afterAll(() => sc.remove());

function run(args: string[], untilListening = false) {
  return new Promise<{ code: number | null; out: string; err: string; url: string | null }>((resolve) => {
    const proc = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...sc.env() } });
    let out = "";
    let err = "";
    let url: string | null = null;
    proc.stdout.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m && untilListening && url === null) {
        url = m[1] as string;
        fetch(`${url}/power`)
          .then((r) => r.json() as Promise<{ watts: number }>)
          .then((p) => {
            out += `\nwatts=${p.watts}\n`;
            proc.kill("SIGTERM");
          });
      }
    });
    proc.stderr.on("data", (c: Buffer) => {
      err += c.toString();
    });
    proc.on("exit", (code) => resolve({ code, out, err, url }));
  });
}

describe.runIf(ready)("giul-agent CLI", () => {
  it("prints help, and refuses bad arguments with exit 2", async () => {
    const help = await run(["--help"]);
    expect(help.code).toBe(0);
    expect(help.out).toMatch(/Usage: giul-agent/);
    for (const bad of [
      ["--port", "x"],
      ["--port", "70000"],
      ["--gpu", "a"],
      ["--period-ms", "0"],
      ["--nope"],
    ]) {
      const r = await run(bad);
      expect(r.code, bad.join(" ")).toBe(2);
      expect(r.err).toMatch(/giul-agent: /);
    }
  });

  it("binds 127.0.0.1 by default, serves the card, and stops on SIGTERM", async () => {
    const r = await run(["--port", "0"], true);
    expect(r.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(r.out).toMatch(/watts=123/);
    expect(r.code).toBe(0);
    expect(r.err).not.toMatch(/every interface/);
  });

  it("warns on stderr when bound to 0.0.0.0", async () => {
    const r = await run(["--port", "0", "--host", "0.0.0.0"], true);
    expect(r.err).toMatch(/listening on every interface \(0\.0\.0\.0\)/);
    expect(r.code).toBe(0);
  });
});

describe.runIf(ready && existsSync(join(ROOT, "build", "test-doubles", "bin", "nvidia-smi")))(
  "giul-agent stops on SIGTERM within 500 ms on every backend",
  () => {
    for (const backend of ["nvml_counter", "smi_sampler"] as const) {
      it(backend, async () => {
        const env = {
          ...process.env,
          ...sc.env(),
          GIUL_DISABLE_ADDON: backend === "smi_sampler" ? "1" : "",
          GIUL_NVIDIA_SMI: join(ROOT, "build", "test-doubles", "bin", "nvidia-smi"),
        };
        const proc = spawn(process.execPath, [CLI, "--port", "0"], { env });
        const listening = await new Promise<string>((resolve) => {
          let out = "";
          proc.stdout.on("data", (c: Buffer) => {
            out += c.toString();
            if (/listening on/.test(out)) resolve(out);
          });
        });
        expect(listening).toContain(`via ${backend}`);
        await new Promise((r) => setTimeout(r, 300)); // its sampler (or nvidia-smi child) running
        const t0 = performance.now();
        proc.kill("SIGTERM");
        const code = await new Promise((r) => proc.once("exit", r));
        const ms = performance.now() - t0;
        expect(code).toBe(0);
        expect(ms).toBeLessThan(500);
      });
    }
  },
);
