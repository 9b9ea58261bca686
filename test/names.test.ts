import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeReady, ROOT } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// One card, one set of names: giul-proxy's and giul-agent's /metrics, giul/prometheus, giul/otel
// (its instruments, and as @opentelemetry/exporter-prometheus renders them), all from this one
// process, metering the NVML double's card. Every face names each figure, its labels and its HELP
// the same way, and as the README's table says.

const UUID = "GPU-0a3e0000-0000-4000-8000-0000000000cc";
const MODEL = "NVIDIA H200";
const sc = scenarioForThisProcess({
  driverVersion: "575.51.03",
  devices: [{ name: MODEL, uuid: UUID, power: 300, counterStepMs: 10 }],
});
const { Meter } = await import("../src/index.js");
const { startProxy } = await import("../src/proxy/server.js");
const { startAgent } = await import("../src/agent/server.js");
const { startStub } = await import("./fakes/openai-stub.mjs");
const { collectGiulMetrics } = await import("../src/exporters/prometheus.js");
const { instrumentOpenTelemetry } = await import("../src/exporters/otel.js");
const { Registry } = await import("prom-client");
const { MeterProvider } = await import("@opentelemetry/sdk-metrics");
const { PrometheusExporter, PrometheusSerializer } = await import("@opentelemetry/exporter-prometheus");

interface Family {
  type: string;
  help: string;
  /** Label names of its samples (le and otel_scope_name aside). */
  labels: Set<string>;
  /** hw_id and hw_name values seen. */
  ids: Set<string>;
  names: Set<string>;
}

/** The families of a Prometheus text exposition. */
function families(text: string): Map<string, Family> {
  const out = new Map<string, Family>();
  const get = (name: string) => {
    let f = out.get(name);
    if (f === undefined) {
      f = { type: "", help: "", labels: new Set(), ids: new Set(), names: new Set() };
      out.set(name, f);
    }
    return f;
  };
  for (const line of text.split("\n")) {
    const meta = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
    if (meta) {
      const f = get(meta[2] as string);
      if (meta[1] === "HELP") f.help = meta[3] as string;
      else f.type = meta[3] as string;
      continue;
    }
    const sample = /^([a-zA-Z_:][\w:]*)\{(.*)\} \S+$/.exec(line);
    if (!sample) continue;
    let name = sample[1] as string;
    if (!out.has(name)) name = name.replace(/_(bucket|sum|count)$/, "");
    const f = get(name);
    for (const m of (sample[2] as string).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      if (m[1] === "le" || m[1] === "otel_scope_name") continue;
      f.labels.add(m[1] as string);
      if (m[1] === "hw_id") f.ids.add(m[2] as string);
      if (m[1] === "hw_name") f.names.add(m[2] as string);
    }
  }
  return out;
}

/** The README's table of names: figure → [prometheus faces, otel, otel via the exporter]. */
function readmeTable(): string[][] {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const at = readme.indexOf("<!-- names-table -->");
  expect(at).toBeGreaterThan(0);
  const rows = readme.slice(at).split("\n").slice(1);
  const table: string[][] = [];
  for (const row of rows) {
    if (!row.startsWith("|")) break;
    const cells = row
      .split("|")
      .slice(1, -1)
      .map((c) => c.trim());
    if (cells[0] === "figure" || cells[0]?.startsWith("---")) continue;
    table.push(cells.map((c) => [...c.matchAll(/`([^`]+)`/g)].map((m) => m[1]).join(",")));
  }
  return table;
}

const ready = nativeReady();
const texts: Record<string, string> = {};
let instruments: string[] = [];

beforeAll(async () => {
  if (!ready) return;
  const stub = await startStub({ defaults: { ttft_ms: 40 } });
  const node = { name: "names", gpuIndex: 0, idleW: 60 };
  const proxy = await startProxy({ upstream: stub.url, node, port: 0, adminPort: 0 });
  const agent = await startAgent({ port: 0, gpus: [0], warn: () => {} });
  const registry = new Registry();
  const prom = collectGiulMetrics(registry);
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const provider = new MeterProvider({ readers: [exporter] });
  const otel = instrumentOpenTelemetry({ meterProvider: provider });
  try {
    const r = await fetch(`${proxy.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [], max_tokens: 4 }),
    });
    await r.text();
    const held = await Meter.forNode(node).open(); // keeps the sampler running for the scrapes
    await Meter.forNode(node).measure(() => new Promise((done) => setTimeout(done, 60)));
    await new Promise((done) => setTimeout(done, 200));
    texts.proxy = await (await fetch(`${proxy.adminUrl}/metrics`)).text();
    texts.agent = await (await fetch(`${agent.url}/metrics`)).text();
    texts.prometheus = await registry.metrics();
    const { resourceMetrics } = await exporter.collect();
    texts.otelExporter = new PrometheusSerializer().serialize(resourceMetrics);
    instruments = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics.map((m) => m.descriptor.name));
    await held.close();
  } finally {
    otel.disable();
    prom.disable();
    await proxy.close();
    await agent.close();
    await stub.close();
  }
}, 30_000);
afterAll(() => sc.remove());

describe.runIf(ready)("one set of names on every face", () => {
  it("names each figure, its labels and its HELP alike in the proxy, the agent and giul/prometheus", () => {
    const rows = readmeTable().map((row) => row[1]?.split(",") ?? []);
    expect(rows).toHaveLength(6);
    const [requestEnergy, requests, requestLabels, cardEnergy, cardPower, cardLabels] = rows as [
      string[],
      string[],
      string[],
      string[],
      string[],
      string[],
    ];
    const faces = {
      proxy: families(texts.proxy as string),
      agent: families(texts.agent as string),
      prometheus: families(texts.prometheus as string),
    };
    for (const [figure, labels, on] of [
      [requestEnergy, requestLabels, ["proxy", "prometheus"]],
      [requests, requestLabels, ["proxy", "prometheus"]],
      [cardEnergy, cardLabels, ["proxy", "agent", "prometheus"]],
      [cardPower, cardLabels, ["proxy", "agent", "prometheus"]],
    ] as const) {
      const name = figure?.[0] as string;
      const seen = on.map((face) => faces[face].get(name));
      for (const [i, f] of seen.entries()) {
        expect(f, `${name} on ${on[i]}`).toBeDefined();
        expect([...(f as Family).labels].sort(), `${name} labels on ${on[i]}`).toEqual([...labels].sort());
        // The card is its UUID, and its model name, everywhere.
        expect([...(f as Family).ids], `${name} hw_id on ${on[i]}`).toEqual([UUID]);
        if (labels.includes("hw_name")) expect([...(f as Family).names]).toEqual([MODEL]);
      }
      // One HELP text and one type for one metric.
      expect(new Set(seen.map((f) => f?.help)).size, `${name}: HELP differs between faces`).toBe(1);
      expect(new Set(seen.map((f) => f?.type)).size, `${name}: TYPE differs between faces`).toBe(1);
    }
    // No face labels a request by `method` (an HTTP method's name) or leaves an empty model.
    expect(texts.proxy).not.toMatch(/[{,]method="/);
    expect(texts.proxy).not.toMatch(/model=""/);
  });

  it("giul/otel's instruments, and their Prometheus rendering, are the table's", () => {
    const table = readmeTable();
    const [requestEnergy, requests, requestLabels, cardEnergy, cardPower, cardLabels] = table;
    for (const row of [requestEnergy, requests, cardEnergy, cardPower])
      expect(instruments, `instrument ${row?.[2]}`).toContain(row?.[2]);
    const rendered = families(texts.otelExporter as string);
    const prometheus = families(texts.prometheus as string);
    for (const [row, labels, like] of [
      [requestEnergy, requestLabels, "giul_request_energy_joules"],
      [requests, requestLabels, "giul_requests_total"],
      [cardEnergy, cardLabels, "hw_energy_joules_total"],
      [cardPower, cardLabels, "hw_power_watts"],
    ] as const) {
      const name = row?.[3] as string;
      const f = rendered.get(name);
      expect(f, `${name} from the OTel Prometheus exporter`).toBeDefined();
      expect([...(f as Family).labels].sort()).toEqual((labels?.[3] ?? "").split(",").sort());
      expect([...(f as Family).ids]).toEqual([UUID]);
      // The same HELP as the other faces give it.
      expect((f as Family).help).toBe(prometheus.get(like)?.help);
    }
  });

  it("examples/grafana-dashboard.json queries only metrics and labels that giul emits", () => {
    const dashboard = JSON.parse(readFileSync(join(ROOT, "examples", "grafana-dashboard.json"), "utf8"));
    const exprs: string[] = dashboard.panels.flatMap((p: { targets: { expr: string }[] }) =>
      p.targets.map((t) => t.expr),
    );
    exprs.push(...dashboard.templating.list.map((v: { definition: string }) => v.definition));
    expect(exprs.length).toBeGreaterThanOrEqual(8);
    const emitted = new Map<string, Family>();
    for (const text of [texts.proxy, texts.agent, texts.prometheus])
      for (const [name, f] of families(text as string)) if (!emitted.has(name)) emitted.set(name, f);
    for (const expr of exprs) {
      const used = [...expr.matchAll(/([a-zA-Z_:][\w:]*)\s*(\{[^}]*\}|\[)/g)];
      const bare = /label_values\((\w+),\s*(\w+)\)/.exec(expr);
      const metrics = bare
        ? [[bare[1] as string, `{${bare[2]}=""}`]]
        : used.map((m) => [m[1] as string, m[2] as string]);
      expect(metrics.length, expr).toBeGreaterThan(0);
      for (const [metric, selector] of metrics) {
        const base = (metric as string).replace(/_(bucket|sum|count)$/, "");
        const f =
          emitted.get(metric as string) ??
          (emitted.get(base)?.type === "histogram" ? emitted.get(base) : undefined);
        expect(f, `${metric} (in ${expr}) is not a metric giul emits`).toBeDefined();
        const labels = [...(selector ?? "").matchAll(/(\w+)\s*(?:=~|!=|=)/g)].map((m) => m[1] as string);
        const by =
          /by \(([^)]*)\)/
            .exec(expr)?.[1]
            ?.split(",")
            .map((l) => l.trim()) ?? [];
        for (const label of [...labels, ...by]) {
          if (label === "le" || label === "job") continue;
          expect((f as Family).labels.has(label), `${metric} has no label ${label} (in ${expr})`).toBe(true);
        }
      }
    }
  });
});
