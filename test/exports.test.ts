import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { built, DIST, FAKE_NVML, ROOT } from "./fakes/paths.js";
import { Scenario } from "./fakes/scenario.js";

// The package's entries as a user loads them (dist/, through the package's own name): the main
// entry never loads an exporter's dependency; giul/otel (as ESM) and giul/prometheus (as
// CommonJS) see the cards and windows of the main entry's Meter (they are separate bundles).

const ready = built([DIST, FAKE_NVML], "dist/ or the NVML double");
const sc = new Scenario({ devices: [{ power: 250, uuid: "GPU-0e0e0000-0000-4000-8000-000000000001" }] });
const work = mkdtempSync(join(tmpdir(), "giul-exports-"));
afterAll(() => {
  sc.remove();
  rmSync(work, { recursive: true, force: true });
});

const OPTIONAL = /@opentelemetry|prom-client/;

function node(args: string[], extraEnv: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, args, {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 60_000,
    env: {
      ...process.env,
      GIUL_FAKE_NVML_SCENARIO: sc.path,
      GIUL_NVML_LIBRARY: FAKE_NVML,
      GIUL_BACKEND: "",
      ...extraEnv,
    },
  });
  return { status: r.status, stdout: String(r.stdout), stderr: String(r.stderr) };
}

describe.runIf(ready)("the package's entries", () => {
  it('importing "giul" loads no @opentelemetry or prom-client module (ESM and CommonJS)', () => {
    for (const file of ["index.js", "index.cjs"]) {
      expect(readFileSync(join(ROOT, "dist", file), "utf8")).not.toMatch(OPTIONAL);
    }
    // ESM: a resolve hook (on the loader's thread) writes down every module resolved.
    const log = join(work, "resolved.txt");
    writeFileSync(log, "");
    const hook = join(work, "hook.mjs");
    writeFileSync(
      hook,
      `import { appendFileSync } from "node:fs";\nexport async function resolve(s, c, next) {\n  const r = await next(s, c);\n  appendFileSync(${JSON.stringify(log)}, r.url + "\\n");\n  return r;\n}\n`,
    );
    const esm = node([
      "--input-type=module",
      "-e",
      `import { register } from "node:module"; import { pathToFileURL } from "node:url";
       register(pathToFileURL(${JSON.stringify(hook)}));
       const giul = await import("giul");
       const m = await giul.Meter.forNode({ name: "n", idleW: 10 }).open();
       await new Promise((r) => setTimeout(r, 50));
       await m.close();
       console.log(m.result().method);`,
    ]);
    expect(esm.stderr).toBe("");
    expect(esm.stdout.trim()).toBe("sampled");
    const resolved = readFileSync(log, "utf8").trim().split("\n");
    expect(resolved.some((u) => u.endsWith("/dist/index.js"))).toBe(true);
    expect(resolved.filter((u) => OPTIONAL.test(u))).toEqual([]);
    // CommonJS: nothing of them in require's cache.
    const cjs = node([
      "-e",
      `const giul = require("giul");
       giul.Meter.forNode({ name: "n", idleW: 10 }).open().then(async (m) => {
         await new Promise((r) => setTimeout(r, 50));
         await m.close();
         const loaded = Object.keys(require.cache).filter((k) => ${OPTIONAL}.test(k));
         console.log(JSON.stringify({ method: m.result().method, loaded }));
       });`,
    ]);
    expect(cjs.stderr).toBe("");
    expect(JSON.parse(cjs.stdout)).toEqual({ method: "sampled", loaded: [] });
  });

  it("giul/otel (ESM) reports the main entry's windows and cards", () => {
    const r = node([
      "--input-type=module",
      "-e",
      `import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
       import { Meter } from "giul";
       import { instrumentOpenTelemetry } from "giul/otel";
       class Reader extends MetricReader { async onShutdown() {} async onForceFlush() {} }
       const reader = new Reader();
       instrumentOpenTelemetry({ meterProvider: new MeterProvider({ readers: [reader] }) });
       const m = await Meter.forNode({ name: "n", idleW: 10 }).open();
       await new Promise((r) => setTimeout(r, 50));
       await m.close();
       const joules = m.result().joules;
       const { resourceMetrics } = await reader.collect();
       const metrics = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
       const get = (n) => metrics.find((x) => x.descriptor.name === n)?.dataPoints[0];
       console.log(JSON.stringify({ joules, sum: get("giul.request.energy").value.sum,
         id: get("hw.energy").attributes["hw.id"], power: get("hw.power").value }));`,
    ]);
    expect(r.stderr).toBe("");
    const out = JSON.parse(r.stdout);
    expect(out.sum).toBe(out.joules);
    expect(out.id).toBe("GPU-0e0e0000-0000-4000-8000-000000000001");
    expect(out.power).toBeCloseTo(250, 6);
  });

  it("giul/prometheus (CommonJS) reports the main entry's windows and cards", () => {
    const r = node([
      "-e",
      `const { Registry } = require("prom-client");
       const { Meter } = require("giul");
       const { collectGiulMetrics } = require("giul/prometheus");
       const registry = new Registry();
       collectGiulMetrics(registry);
       (async () => {
         const m = await Meter.forNode({ name: "n", idleW: 10 }).open();
         await new Promise((r) => setTimeout(r, 50));
         await m.close();
         m.result();
         process.stdout.write(await registry.metrics());
       })();`,
    ]);
    expect(r.stderr).toBe("");
    expect(r.stdout).toMatch(
      /^giul_request_energy_joules_count\{hw_id="GPU-0e0e0000-0000-4000-8000-000000000001",hw_type="gpu",energy_method="sampled",backend="nvml_counter",node="n"\} 1$/m,
    );
    expect(r.stdout).toMatch(
      /^hw_power_watts\{hw_id="GPU-0e0e0000-0000-4000-8000-000000000001",[^}]*\} 250$/m,
    );
    expect(r.stdout).toMatch(/^hw_energy_joules_total\{hw_id="GPU-0e0e0000-0000-4000-8000-000000000001",/m);
  });
});
