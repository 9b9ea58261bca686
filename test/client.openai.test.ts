import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// The real openai SDK (its `fetch` option wrapped by giul/client) against giul-proxy in front of
// the stub upstream, metering the NVML double's card at a constant 300 W: a request alone in flight
// costs exactly (300 − 60) W × its seconds. Streamed and not, asked for usage or not, the energy
// reaches the SDK's `usage` (and the callback) within its bar of that, and every other chunk the SDK
// yields is the upstream's.

const POWER_W = 300;
const IDLE_W = 60;
const sc = scenarioForThisProcess({ devices: [{ power: POWER_W, counterStepMs: 10 }] });
const { startProxy } = await import("../src/proxy/server.js");
const { startStub } = await import("./fakes/openai-stub.mjs");
const { energyFetch, energyOfUsage } = await import("../src/client/index.js");
type AnswerEnergy = import("../src/client/index.js").AnswerEnergy;
type ClientRecord = import("../src/client/index.js").ClientRecord;
type ProxyRecord = import("../src/proxy/record.js").ProxyRecord;

const ready = nativeReady();
const records = new Map<string, ProxyRecord>();
const seen = new Map<string, AnswerEnergy>();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let stub: Awaited<ReturnType<typeof startStub>>;
let plain: Awaited<ReturnType<typeof startProxy>>;
let injecting: Awaited<ReturnType<typeof startProxy>>;

beforeAll(async () => {
  if (!ready) return;
  stub = await startStub({ defaults: { ttft_ms: 60, itl_ms: 6 } });
  const node = { name: "sdk", gpuIndex: 0, idleW: IDLE_W };
  const onRecord = (record: ProxyRecord) => records.set(record.request_id, record);
  plain = await startProxy({ upstream: stub.url, node, port: 0, adminPort: null, onRecord });
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
  await plain?.close();
  await injecting?.close();
  await stub?.close();
  sc.remove();
});

function sdk(url: string): OpenAI {
  const fetch = energyFetch({ onEnergy: (e) => seen.set(e.requestId as string, e) });
  return new OpenAI({ baseURL: `${url}/v1`, apiKey: "test", fetch, maxRetries: 0 });
}

async function recordOf(id: string): Promise<ProxyRecord> {
  for (let i = 0; i < 300 && !records.has(id); i++) await sleep(10);
  return records.get(id) as ProxyRecord;
}

/** The figure is within its bar of the card's exact energy above idle over the window. */
function expectTrue(energy: ClientRecord): void {
  expect(energy.method, energy.reason ?? "").toBe("sampled");
  const exact = (POWER_W - IDLE_W) * energy.seconds;
  expect(Math.abs((energy.joules as number) - exact)).toBeLessThanOrEqual(
    energy.uncertainty_joules as number,
  );
}

/** The chunks the upstream sent for a request, parsed as the SDK parses them. */
function upstreamChunks(id: string): unknown[] {
  return stub
    .bytes(id)
    .toString("utf8")
    .split("\n\n")
    .filter((e) => e.startsWith("data: {"))
    .map((e) => JSON.parse(e.slice(6)));
}

describe.runIf(ready)("the openai SDK through giul-proxy (giul/client)", () => {
  it("a streamed answer that asked for usage: the last chunk's usage has the energy", async () => {
    const id = "sdk-stream-usage";
    const stream = await sdk(plain.url).chat.completions.create(
      {
        model: "m",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 12,
        stream: true,
        stream_options: { include_usage: true },
      },
      { headers: { "x-request-id": id } },
    );
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1) as OpenAI.Chat.Completions.ChatCompletionChunk;
    expect(last.choices).toEqual([]);
    const energy = energyOfUsage(last.usage) as ClientRecord;
    expect(energy.request_id).toBe(id);
    expect(last.usage?.completion_tokens).toBe(12);
    expectTrue(energy);
    // The log's record and the callback say the same; every other chunk is the upstream's.
    const { http_method: _m, ...logged } = await recordOf(id);
    expect(energy.joules).toBe(logged.joules);
    expect(seen.get(id)?.record).toEqual(energy);
    const expected = upstreamChunks(id);
    expect(chunks.slice(0, -1)).toEqual(expected.slice(0, -1));
    const { energy: _e, ...usage } = last.usage as unknown as Record<string, unknown>;
    expect({ ...last, usage }).toEqual(expected.at(-1));
  });

  it("--inject-usage: a stream that did not ask for usage ends with a usage chunk of the energy", async () => {
    const id = "sdk-stream-added";
    const stream = await sdk(injecting.url).chat.completions.create(
      { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 8, stream: true },
      { headers: { "x-request-id": id } },
    );
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1) as OpenAI.Chat.Completions.ChatCompletionChunk;
    expect(last).toMatchObject({ object: "chat.completion.chunk", model: "m", choices: [] });
    expectTrue(energyOfUsage(last.usage) as ClientRecord);
    expect(chunks.slice(0, -1)).toEqual(upstreamChunks(id));
    expect(seen.get(id)?.joules).toBe((energyOfUsage(last.usage) as ClientRecord).joules);
  });

  it("a JSON answer: usage.energy with --inject-usage, the headers' figure to the callback without", async () => {
    const body = { model: "m", messages: [{ role: "user" as const, content: "hi" }], max_tokens: 10 };
    const injected = await sdk(injecting.url).chat.completions.create(body, {
      headers: { "x-request-id": "sdk-json-injected" },
    });
    const energy = energyOfUsage(injected.usage) as ClientRecord;
    expectTrue(energy);
    expect(injected.usage?.completion_tokens).toBe(10);
    const plainAnswer = await sdk(plain.url).chat.completions.create(body, {
      headers: { "x-request-id": "sdk-json-plain" },
    });
    expect(energyOfUsage(plainAnswer.usage)).toBeNull();
    for (let i = 0; i < 100 && !seen.has("sdk-json-plain"); i++) await sleep(10);
    const fromHeaders = seen.get("sdk-json-plain") as AnswerEnergy;
    const logged = await recordOf("sdk-json-plain");
    expect(fromHeaders).toMatchObject({ joules: logged.joules, method: "sampled", record: null });
    expect(fromHeaders.uncertaintyJoules).toBe(logged.uncertainty_joules);
    expect(seen.get("sdk-json-injected")?.record).toEqual(energy);
  });

  it("refuses a missing callback, naming it", () => {
    expect(() => energyFetch({} as never)).toThrow(/onEnergy: expected a function/);
  });
});
