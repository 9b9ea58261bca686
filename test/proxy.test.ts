import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { injectEnergy } from "../src/proxy/record.js";
import { fairShare, type TruthWindow } from "./fakes/fair-share.js";
import { nativeReady } from "./fakes/paths.js";
import { chat, raw } from "./fakes/raw-client.js";
import { type PowerPoint, scenarioForThisProcess } from "./fakes/scenario.js";

// giul-proxy end to end on loopback: a stub OpenAI-compatible upstream (node:http, streamed and
// not, with the token timing each request asks for), the proxy in this process metering the NVML
// double's card (nvml_counter), and raw HTTP clients. Every byte of every answer must be the
// upstream's except the one injected comment; the shares must add up to the card and each must be
// within its bar of the exact weighted fair share of the trace.

const IDLE_W = 60;

/** 120 → 420 → 120 W ramps of 180 ms, for the whole run. */
function wave(seconds: number): PowerPoint[] {
  return Array.from(
    { length: Math.ceil((seconds * 1000) / 180) },
    (_, i) => [i * 180, i % 2 ? 420 : 120] as const,
  );
}

const sc = scenarioForThisProcess({ devices: [{ power: wave(900), counterStepMs: 10 }] });
const { startProxy } = await import("../src/proxy/server.js");
const { startStub } = await import("./fakes/openai-stub.mjs");
const { select } = await import("../src/select/index.js");
const { ledgerFor } = await import("../src/ledger/ledger.js");
const { resolveNode } = await import("../src/rules/node.js");
type ProxyRecord = import("../src/proxy/record.js").ProxyRecord;
type MeterT = import("../src/meter/meter.js").Meter;

const ready = nativeReady();
const node = { name: "stub-host", gpuIndex: 0, idleW: IDLE_W };
const records = new Map<string, { record: ProxyRecord; meter: MeterT | null }>();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let stub: Awaited<ReturnType<typeof startStub>>;
let proxy: Awaited<ReturnType<typeof startProxy>>;
let injecting: Awaited<ReturnType<typeof startProxy>>;

beforeAll(async () => {
  if (!ready) return;
  stub = await startStub();
  const onRecord = (record: ProxyRecord, meter: MeterT | null) =>
    records.set(record.request_id, { record, meter });
  proxy = await startProxy({ upstream: stub.url, node, port: 0, adminPort: 0, onRecord });
  injecting = await startProxy({
    upstream: stub.url,
    node,
    port: 0,
    adminPort: null,
    injectUsage: true,
    onRecord,
  });
});
afterAll(async () => {
  await proxy?.close();
  await injecting?.close();
  await stub?.close();
  sc.remove();
});

/** The record of a request, once the proxy has made it. */
async function recordOf(id: string): Promise<{ record: ProxyRecord; meter: MeterT | null }> {
  for (let i = 0; i < 500 && !records.has(id); i++) await sleep(10);
  const r = records.get(id);
  if (r === undefined) throw new Error(`no record for ${id}`);
  return r;
}

/** The bars of the windows that open and close each stretch of the union of the windows. */
function unionEdgeBars(windows: readonly TruthWindow[], bars: readonly number[]): number {
  const order = windows
    .map((w, i) => ({ ...w, bar: bars[i] as number }))
    .sort((a, b) => (a.open < b.open ? -1 : 1));
  let total = 0;
  let end = -1n;
  let closer = 0;
  for (const w of order) {
    if (w.open > end) {
      total += closer + w.bar;
      end = w.close;
      closer = w.bar;
    } else if (w.close > end) {
      end = w.close;
      closer = w.bar;
    }
  }
  return total + closer;
}

const COMMENT = /: energy (\{[^\n]*\})\n\n/;

describe.runIf(ready)("giul-proxy end to end", () => {
  it("50 concurrent streams: every byte is the upstream's but the comment; shares add up and meet the truth", async () => {
    const ledger = ledgerFor((await select(resolveNode(node), null)).track as never);
    const cardBefore = ledger.cardAboveJoules;
    const plans = Array.from({ length: 50 }, (_, i) => ({
      id: `stream-${i}`,
      startMs: (i * 37) % 600,
      tokens: 20 + ((i * 13) % 40),
      usage: i % 2 === 0,
      stub: { ttft_ms: 40 + ((i * 29) % 160), itl_ms: 8 + (i % 5) * 4, split: i % 3 === 0 },
    }));
    const answers = await Promise.all(
      plans.map(async (p) => {
        await sleep(p.startMs);
        const body = chat({
          stream: true,
          max_tokens: p.tokens,
          ...(p.usage ? { stream_options: { include_usage: true } } : {}),
          stub: p.stub,
        });
        return raw(proxy.url, "/v1/chat/completions", { body, headers: { "x-request-id": p.id } });
      }),
    );
    const windows: TruthWindow[] = [];
    const shares: { joules: number; bar: number; measured: number }[] = [];
    for (const [i, p] of plans.entries()) {
      const answer = answers[i] as Awaited<ReturnType<typeof raw>>;
      const { record, meter } = await recordOf(p.id);
      expect(answer.status).toBe(200);
      expect(answer.complete).toBe(true);
      // The upstream's bytes, with one comment just before its final `data: [DONE]`.
      const upstream = stub.bytes(p.id);
      const got = answer.body.toString("utf8");
      const comment = COMMENT.exec(got);
      expect(comment, p.id).not.toBeNull();
      const at = upstream.lastIndexOf("data: [DONE]");
      expect(at).toBeGreaterThan(0);
      const shown = JSON.parse((comment as RegExpExecArray)[1] as string);
      // Asked for usage: the final usage chunk's usage gains `energy` (the same record), nothing else.
      let before = upstream.subarray(0, at);
      if (p.usage) {
        const u = upstream.lastIndexOf("data: {", at);
        const eol = upstream.indexOf("\n", u);
        const json = upstream.subarray(u + 6, eol);
        expect(JSON.parse(json.toString()).choices).toEqual([]);
        const injected = injectEnergy(json, shown) as Buffer;
        before = Buffer.concat([upstream.subarray(0, u + 6), injected, upstream.subarray(eol, at)]);
        const sent = JSON.parse(got.slice(got.lastIndexOf("data: {") + 6).split("\n")[0] as string);
        expect(sent.usage.energy).toEqual(shown);
        expect(sent.usage.completion_tokens).toBe(p.tokens);
      }
      const expected = Buffer.concat([
        before,
        Buffer.from((comment as RegExpExecArray)[0]),
        upstream.subarray(at),
      ]);
      expect(answer.body.equals(expected), `${p.id}: bytes differ from the upstream's`).toBe(true);
      // The comment, the trailers and the log say the same.
      expect(shown.request_id).toBe(p.id);
      expect(shown.joules).toBe(record.joules);
      expect(answer.trailers["x-energy-joules"]).toBe(String(record.joules));
      expect(answer.trailers["x-energy-method"]).toBe("sampled");
      expect(answer.trailers["x-energy-backend"]).toBe("nvml_counter");
      expect(Number(answer.trailers["x-energy-uncertainty-joules"])).toBe(record.uncertainty_joules);
      expect(answer.headers["x-energy-request-id"]).toBe(p.id);
      expect(answer.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
      expect(record).toMatchObject({
        method: "sampled",
        backend: "nvml_counter",
        attribution: "shared",
        outcome: "complete",
        status: 200,
        stream: true,
        model: "stub-model",
        http_method: "POST",
        path: "/v1/chat/completions",
        completion_tokens: p.usage ? p.tokens : null,
        tokens: p.usage ? p.tokens : null,
        prompt_tokens: p.usage ? 7 : null,
      });
      expect(Object.keys(record.stages)).toEqual(["prefill", "decode"]);
      expect(record.ttfb_ms as number).toBeGreaterThanOrEqual(p.stub.ttft_ms - 1);
      expect(record.concurrency_max as number).toBeGreaterThan(1);
      const t = (meter as MeterT).edgeTimes();
      windows.push({ open: t.open as bigint, close: t.close as bigint, weights: [[t.open as bigint, 1]] });
      shares.push({
        joules: record.joules as number,
        bar: record.uncertainty_joules as number,
        measured: record.measured_joules as number,
      });
    }
    const truth = fairShare(windows, (a, b) => sc.energyJ(0, a, b), IDLE_W);
    let worst = 0;
    shares.forEach((s, i) => {
      const share = truth.shares[i] as number;
      const err = Math.abs(s.joules - share);
      expect(err, `stream-${i}: ${s.joules} J against ${share} J, bar ${s.bar} J`).toBeLessThanOrEqual(s.bar);
      worst = Math.max(worst, err / s.bar);
    });
    const sum = shares.reduce((a, s) => a + s.measured, 0);
    const card = ledger.cardAboveJoules - cardBefore;
    // Conservation: the shares add up to the card's energy above idle over the union of the windows.
    expect(Math.abs(sum - card)).toBeLessThanOrEqual(card * 0.001);
    // Against the truth, the card itself is measured within the bars of the windows at the union's
    // outer edges (where one window alone holds the card's edge error).
    const edgeBars = unionEdgeBars(
      windows,
      shares.map((s) => s.bar),
    );
    expect(Math.abs(sum - truth.unionAbove)).toBeLessThanOrEqual(truth.unionAbove * 0.001 + edgeBars);
    console.log(
      `50 streams: Σ shares ${sum.toFixed(3)} J, measured card ${card.toFixed(3)} J, exact card over the union ` +
        `${truth.unionAbove.toFixed(3)} J (edge bars ${edgeBars.toFixed(3)} J); worst error/bar ${worst.toFixed(3)}`,
    );
  }, 60_000);

  it("a non-streamed answer: the upstream's body as it was, the energy in its headers", async () => {
    const r = await raw(proxy.url, "/v1/chat/completions", {
      body: chat({ max_tokens: 12, stub: { ttft_ms: 80, itl_ms: 5 } }),
      headers: { "x-request-id": "plain-1", authorization: "Bearer k" },
    });
    const { record } = await recordOf("plain-1");
    expect(r.status).toBe(200);
    expect(r.body.equals(stub.bytes("plain-1"))).toBe(true);
    expect(r.headers["content-length"]).toBe(String(r.body.length));
    expect(r.headers["x-stub"]).toBe("1");
    expect(r.headers["x-energy-joules"]).toBe(String(record.joules));
    expect(r.headers["x-energy-method"]).toBe("sampled");
    expect(r.headers["x-energy-backend"]).toBe("nvml_counter");
    expect(r.headers["x-energy-uncertainty-joules"]).toBe(String(record.uncertainty_joules));
    expect(record).toMatchObject({
      stream: false,
      status: 200,
      completion_tokens: 12,
      prompt_tokens: 7,
      tokens: 12,
    });
    expect(record.stages).toEqual({});
    // The request reached the upstream as it was sent, Host aside.
    const seen = stub.requests.get("plain-1");
    expect(seen?.body.toString()).toBe(chat({ max_tokens: 12, stub: { ttft_ms: 80, itl_ms: 5 } }));
    expect(seen?.rawHeaders).toContain("Bearer k");
  });

  it("--inject-usage: usage.energy in the JSON body, every other byte as the upstream sent it", async () => {
    const r = await raw(injecting.url, "/v1/completions", {
      body: JSON.stringify({ model: "m", prompt: "x", max_tokens: 5 }),
      headers: { "x-request-id": "inject-1" },
    });
    const { record } = await recordOf("inject-1");
    const parsed = JSON.parse(r.body.toString());
    expect(parsed.usage.energy.request_id).toBe("inject-1");
    expect(parsed.usage.energy.joules).toBe(record.joules);
    expect(parsed.usage.completion_tokens).toBe(5);
    const original = stub.bytes("inject-1").toString();
    const injected = `,"energy":${JSON.stringify(parsed.usage.energy)}`;
    expect(r.body.toString().replace(injected, "")).toBe(original);
    expect(r.headers["content-length"]).toBe(String(r.body.length));
  });

  it("other answers pass as they are: GET, HEAD", async () => {
    const models = await raw(proxy.url, "/v1/models", { headers: { "x-request-id": "models-1" } });
    expect(models.status).toBe(200);
    expect(models.body.equals(stub.bytes("models-1"))).toBe(true);
    expect(models.headers["x-energy-method"]).toBeDefined();
    const head = await raw(proxy.url, "/health", { method: "HEAD", headers: { "x-request-id": "head-1" } });
    expect(head.status).toBe(200);
    expect(head.headers["content-length"]).toBe("2");
    expect(head.body.length).toBe(0);
    // A request that names no model, measured: counted, but in no model's series (none is "").
    const nameless = await raw(proxy.url, "/v1/chat/completions", {
      body: JSON.stringify({ messages: [], max_tokens: 3, stub: { ttft_ms: 60 } }),
      headers: { "x-request-id": "nameless-1" },
    });
    expect(nameless.status).toBe(200);
    const { record } = await recordOf("nameless-1");
    expect(record).toMatchObject({ model: null, method: "sampled" });
  });

  it("a JSON answer framed any way (chunked, gzip, deflate, br): energy in its headers and usage", async () => {
    for (const stubbed of [
      { chunked: true },
      { encoding: "gzip" },
      { encoding: "deflate" },
      { encoding: "br", chunked: true },
    ]) {
      const what = JSON.stringify(stubbed);
      const id = `framed-${Object.values(stubbed).join("-")}`;
      // Without --inject-usage: the upstream's bytes as they came, with the energy headers.
      const r = await raw(proxy.url, "/v1/chat/completions", {
        body: chat({ max_tokens: 3, stub: { ...stubbed, ttft_ms: 60 } }),
        headers: { "x-request-id": id },
      });
      const { record } = await recordOf(id);
      expect(r.body.equals(stub.bytes(id)), what).toBe(true);
      expect(r.headers["content-length"], what).toBe(String(r.body.length));
      expect(r.headers["content-encoding"], what).toBe(stubbed.encoding);
      expect(r.headers["x-energy-joules"], what).toBe(String(record.joules));
      expect(record.completion_tokens, what).toBe(3);
      // With it: decoded, usage.energy added, sent identity with its length.
      const i = await raw(injecting.url, "/v1/chat/completions", {
        body: chat({ max_tokens: 4, stub: { ...stubbed, ttft_ms: 60 } }),
        headers: { "x-request-id": `${id}-injected` },
      });
      const injected = (await recordOf(`${id}-injected`)).record;
      expect(i.headers["content-encoding"], what).toBeUndefined();
      expect(i.headers["content-length"], what).toBe(String(i.body.length));
      const parsed = JSON.parse(i.body.toString());
      expect(parsed.usage.completion_tokens, what).toBe(4);
      expect(parsed.usage.energy.joules, what).toBe(injected.joules);
      expect(parsed.usage.energy.method, parsed.usage.energy.reason).toBe("sampled");
    }
  });

  it("a chunked JSON answer over --max-body-bytes streams through, its energy in trailers", async () => {
    const bigRecords: ProxyRecord[] = [];
    const small = await startProxy({
      upstream: stub.url,
      node,
      port: 0,
      adminPort: null,
      maxBodyBytes: 300,
      onRecord: (record) => bigRecords.push(record),
    });
    try {
      const big = await raw(small.url, "/v1/chat/completions", {
        body: chat({ max_tokens: 100, stub: { chunked: true, ttft_ms: 60 } }),
        headers: { "x-request-id": "chunked-big" },
      });
      expect(big.body.toString()).toBe(stub.bytes("chunked-big").toString());
      expect(big.headers.trailer).toMatch(/x-energy-joules/);
      expect(big.trailers["x-energy-method"]).toBe("sampled");
      for (let i = 0; i < 100 && bigRecords.length === 0; i++) await sleep(10);
      expect(bigRecords[0]).toMatchObject({ stream: false, method: "sampled", outcome: "complete" });
    } finally {
      await small.close();
    }
  });

  it("/metrics on the admin port: the per-request histogram and the card's gauges", async () => {
    const text = (await raw(proxy.adminUrl as string, "/metrics")).body.toString();
    const count = [...text.matchAll(/^giul_request_energy_joules_count\{[^}]*\} (\d+)$/gm)].reduce(
      (a, m) => a + Number(m[1]),
      0,
    );
    // Every request this proxy metered with a figure: the 50 streams and the answers since (not
    // those of the injecting proxy).
    const measured = [...records.values()].filter(
      (r) =>
        r.record.joules !== null &&
        r.record.request_id !== "inject-1" &&
        !r.record.request_id.endsWith("-injected"),
    );
    expect(count).toBe(measured.length);
    expect(text).toMatch(
      /^giul_request_energy_joules_bucket\{hw_id="GPU-[0-9a-f-]+",hw_type="gpu",energy_method="sampled",backend="nvml_counter",node="stub-host",le="\+Inf"\} \d+$/m,
    );
    expect(text).toMatch(/^# TYPE giul_request_energy_joules histogram$/m);
    const watts = Number(
      /^hw_power_watts\{hw_id="GPU-[0-9a-f-]+",hw_type="gpu",hw_name="[^"]+"[^}]*\} (\S+)$/m.exec(text)?.[1],
    );
    const now = process.hrtime.bigint();
    expect(watts).toBeGreaterThanOrEqual(110);
    expect(watts).toBeLessThanOrEqual(430);
    expect(Math.abs(watts - sc.powerW(0, now))).toBeLessThan(60);
    expect(text).toMatch(/^hw_energy_joules_total\{hw_id="GPU-[0-9a-f-]+",hw_type="gpu"[^}]*\} \d/m);
    // By model: the stub's model only (GET /v1/models named none, and is in no model's series).
    expect(text).toMatch(
      /^giul_proxy_model_energy_joules_total\{hw_id="GPU-[0-9a-f-]+",hw_type="gpu",model="stub-model"\} \S+$/m,
    );
    expect(text).not.toMatch(/model=""/);
    expect(text).toMatch(
      /^giul_proxy_requests_total\{hw_id="GPU-[0-9a-f-]+",hw_type="gpu",outcome="complete",energy_method="sampled"\} \d+$/m,
    );
    expect((await raw(proxy.adminUrl as string, "/healthz")).body.toString()).toBe("ok\n");
    expect((await raw(proxy.adminUrl as string, "/v1/models")).status).toBe(404);
  });
});
