import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startStub } from "./fakes/openai-stub.mjs";
import { ADDON, built, FAKE_NVML, ROOT, readmeAndDocs } from "./fakes/paths.js";
import { Scenario } from "./fakes/scenario.js";

// README's "Energy on every response" shows examples/proxy-client.mjs as it is, and it runs as it
// is: against giul-proxy (the built CLI) in front of the stub upstream, on the NVML double.

const CLI = join(ROOT, "dist", "cli", "proxy.js");
const EXAMPLE = join(ROOT, "examples", "proxy-client.mjs");
// Built, or skipped with the reason (in CI: failed, never skipped).
const ready = built([CLI, FAKE_NVML, ADDON], "giul-proxy (dist/cli/proxy.js), the addon or the NVML double");
const sc = new Scenario({ devices: [{ power: 260, counterStepMs: 10 }] });
afterAll(() => sc.remove());

describe.runIf(ready)("giul-proxy example", () => {
  for (const crlf of [false, true]) {
    it(`examples/proxy-client.mjs shows the energy of a plain and of a streamed answer (${crlf ? "CRLF" : "LF"} events)`, async () => {
      // A real server takes its time: a window shorter than the counter's step is not measured.
      // sse-starlette (vLLM) ends its lines with CRLF.
      const stub = await startStub({ defaults: { ttft_ms: 40, itl_ms: 5, crlf } });
      const proxy = spawn(
        process.execPath,
        [CLI, "--upstream", stub.url, "--idle-w", "60", "--listen", ":0", "--admin", "off"],
        {
          env: { ...process.env, ...sc.env() },
        },
      );
      try {
        const url = await new Promise<string>((resolve, reject) => {
          let err = "";
          proxy.stderr.on("data", (c: Buffer) => {
            err += c.toString();
            const m = /listening on (http:\/\/\S+)/.exec(err);
            if (m) resolve(m[1] as string);
          });
          proxy.on("exit", () => reject(new Error(err)));
        });
        // Run asynchronously: the stub answers from this process.
        const r = await new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
          const child = spawn(process.execPath, [EXAMPLE, url, "stub-model"]);
          let out = "";
          let err = "";
          child.stdout.on("data", (c: Buffer) => {
            out += c.toString();
          });
          child.stderr.on("data", (c: Buffer) => {
            err += c.toString();
          });
          child.on("exit", (code) => resolve({ code, out, err }));
        });
        expect(r.code, r.err).toBe(0);
        const lines = r.out.trim().split("\n");
        expect(lines.filter((l) => /^answer: +tok0 tok1/.test(l))).toHaveLength(1);
        // The callback: once for the plain answer, once for the streamed one.
        const called = lines.filter((l) =>
          /^energy of \S+: \d+(\.\d+)?(e-\d+)? J ± \d\S* \(sampled via nvml_counter\)$/.test(l),
        );
        expect(called, r.out).toHaveLength(2);
        expect(lines.filter((l) => /^streamed: +tok0 tok1/.test(l))).toHaveLength(1);
        expect(lines.at(-1)).toMatch(
          /^energy: \S+ J ± \S+ \(sampled via nvml_counter\); prefill \S+ J, decode \S+ J; 32 tokens, \S+ J per 1,000$/,
        );
      } finally {
        proxy.kill("SIGTERM");
        await stub.close();
      }
    });
  }

  it("the README or its docs/ pages show it exactly as it is in examples/", () => {
    const readme = readmeAndDocs();
    const source = readFileSync(EXAMPLE, "utf8");
    expect(
      readme.includes(`\`\`\`js\n${source}\`\`\``),
      "README.md or docs/ shows examples/proxy-client.mjs verbatim",
    ).toBe(true);
    // And it parses as a module.
    expect(spawnSync(process.execPath, ["--check", EXAMPLE]).status).toBe(0);
  });
});
