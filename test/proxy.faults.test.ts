import type { ClientRequest } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeReady } from "./fakes/paths.js";
import { chat, raw } from "./fakes/raw-client.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// giul-proxy when something goes wrong, each case handled and labelled: a client that hangs up
// mid-stream (the upstream request is aborted, the window closed), an upstream that answers 500,
// one that is down, one that dies mid-answer or sends nothing, a slow client (backpressure reaches
// the upstream; nothing is buffered), one that stops reading, and requests over the limits.

const sc = scenarioForThisProcess({
  devices: [
    { power: 300, counterStepMs: 10 },
    {
      power: 300,
      procs: [
        { pid: 4242, usedMib: 20_000, name: "vllm" },
        { pid: 777, usedMib: 4_000, name: "trainer" },
      ],
    },
  ],
});
const { startProxy } = await import("../src/proxy/server.js");
const { startStub } = await import("./fakes/openai-stub.mjs");
type ProxyRecord = import("../src/proxy/record.js").ProxyRecord;

const ready = nativeReady();
const node = { name: "stub-host", gpuIndex: 0, idleW: 60 };
const records = new Map<string, ProxyRecord>();
const onRecord = (r: ProxyRecord) => records.set(r.request_id, r);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let stub: Awaited<ReturnType<typeof startStub>>;
let proxy: Awaited<ReturnType<typeof startProxy>>;

beforeAll(async () => {
  if (!ready) return;
  stub = await startStub();
  proxy = await startProxy({
    upstream: stub.url,
    node,
    port: 0,
    adminPort: null,
    onRecord,
    upstreamTimeoutMs: 1_000,
    clientStallTimeoutMs: 1_500,
    maxBodyBytes: 64 * 1024,
    maxHeaderBytes: 4096,
  });
});
afterAll(async () => {
  await proxy?.close();
  await stub?.close();
  sc.remove();
});

async function recordOf(id: string): Promise<ProxyRecord> {
  for (let i = 0; i < 1000 && !records.has(id); i++) await sleep(10);
  const r = records.get(id);
  if (r === undefined) throw new Error(`no record for ${id}`);
  return r;
}

/** A port nothing listens on. */
/**
 * A port that refuses connections and that no server of this run can be handed: not an ephemeral
 * one just closed (another test file's server listening on port 0 may get it, as one did in CI),
 * but a low one (tcpmux, discard) seen to refuse now.
 */
async function closedPort(): Promise<number> {
  for (const port of [1, 9]) {
    const refused = await new Promise<boolean>((resolve) => {
      const s = connect(port, "127.0.0.1");
      s.once("connect", () => {
        s.destroy();
        resolve(false);
      });
      s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code === "ECONNREFUSED"));
    });
    if (refused) return port;
  }
  throw new Error("ports 1 and 9 of 127.0.0.1 do not refuse connections here");
}

describe.runIf(ready)("giul-proxy faults", () => {
  it("a client that hangs up mid-stream aborts the upstream request; its window is closed and labelled", async () => {
    const r = await raw(proxy.url, "/v1/chat/completions", {
      body: chat({ stream: true, max_tokens: 200, stub: { itl_ms: 10 } }),
      headers: { "x-request-id": "gone-1" },
      abortAfterBytes: 1500,
    });
    expect(r.complete).toBe(false);
    const record = await recordOf("gone-1");
    expect(record).toMatchObject({ outcome: "client_closed", status: 200, stream: true, method: "sampled" });
    expect(record.error).toMatch(/client closed/);
    expect(Object.keys(record.stages)).toEqual(["prefill", "decode"]);
    expect(record.seconds).toBeGreaterThan(0);
    await sleep(100);
    const upstream = stub.requests.get("gone-1");
    expect(upstream?.aborted).toBe(true);
    expect(upstream?.ended).toBe(false);
    expect(proxy.inFlight()).toBe(0);
  });

  it("an upstream 500 passes through unchanged, with its energy", async () => {
    const r = await raw(proxy.url, "/v1/chat/completions", {
      body: chat({ stub: { status: 500, ttft_ms: 30 } }),
      headers: { "x-request-id": "err-500" },
    });
    expect(r.status).toBe(500);
    expect(r.body.equals(stub.bytes("err-500"))).toBe(true);
    expect(r.headers["x-energy-method"]).toBe("sampled");
    expect(await recordOf("err-500")).toMatchObject({
      status: 500,
      outcome: "complete",
    });
  });

  it("an upstream that is down: 502 in the OpenAI error shape, labelled upstream_unreachable", async () => {
    const down = await startProxy({
      upstream: `http://127.0.0.1:${await closedPort()}`,
      node,
      port: 0,
      adminPort: null,
      onRecord,
    });
    try {
      const r = await raw(down.url, "/v1/chat/completions", {
        body: chat(),
        headers: { "x-request-id": "down-1" },
      });
      expect(r.status).toBe(502);
      expect(JSON.parse(r.body.toString()).error).toMatchObject({ type: "upstream_unreachable", code: 502 });
      expect(r.headers["x-energy-method"]).toBeDefined();
      expect(await recordOf("down-1")).toMatchObject({ status: 502, outcome: "upstream_unreachable" });
    } finally {
      await down.close();
    }
  });

  it("an upstream that dies mid-stream: the client's answer is cut off, labelled upstream_failed", async () => {
    const r = await raw(proxy.url, "/v1/chat/completions", {
      body: chat({ stream: true, max_tokens: 50, stub: { itl_ms: 5, fail_after: 10 } }),
      headers: { "x-request-id": "died-1" },
    });
    expect(r.status).toBe(200);
    expect(r.complete).toBe(false);
    expect(r.body.toString()).not.toMatch(/: energy/);
    expect(await recordOf("died-1")).toMatchObject({ outcome: "upstream_failed", status: 200 });
  });

  it("an upstream that sends nothing for upstreamTimeoutMs: 504, labelled upstream_timeout", async () => {
    const r = await raw(proxy.url, "/v1/chat/completions", {
      body: chat({ stub: { hang: true } }),
      headers: { "x-request-id": "hang-1" },
    });
    expect(r.status).toBe(504);
    const record = await recordOf("hang-1");
    expect(record).toMatchObject({ outcome: "upstream_timeout", status: 504 });
    expect(record.duration_ms).toBeGreaterThanOrEqual(990);
    await sleep(50);
    expect(stub.requests.get("hang-1")?.aborted).toBe(true);
  });

  it("a slow client: the upstream waits for it (backpressure), every byte arrives, the pause is labelled", async () => {
    // 32 MiB, more than loopback's socket buffers hold, read after a 1.2 s pause.
    const r = await raw(proxy.url, "/v1/chat/completions", {
      body: chat({ stream: true, max_tokens: 512, stub: { pad: 65536 } }),
      headers: { "x-request-id": "slow-1" },
      pauseMs: 1200,
    });
    expect(r.complete).toBe(true);
    const upstream = stub.bytes("slow-1");
    const comment = /: energy \{[^\n]*\}\n\n/.exec(r.body.toString("latin1"))?.[0] ?? "";
    const at = upstream.lastIndexOf("data: [DONE]");
    expect(
      r.body.equals(Buffer.concat([upstream.subarray(0, at), Buffer.from(comment), upstream.subarray(at)])),
    ).toBe(true);
    expect(stub.requests.get("slow-1")?.blocked).toBeGreaterThan(0);
    const record = await recordOf("slow-1");
    expect(record.outcome).toBe("complete");
    expect(record.client_paused_ms).toBeGreaterThan(500);
  }, 30_000);

  it("a client that stops reading is given up after clientStallTimeoutMs, labelled client_stalled", async () => {
    let client: ClientRequest | null = null;
    void raw(proxy.url, "/v1/chat/completions", {
      body: chat({ stream: true, max_tokens: 512, stub: { pad: 65536 } }),
      headers: { "x-request-id": "stalled-1" },
      neverRead: true,
      onRequest: (req) => {
        client = req;
      },
    }).catch(() => {});
    try {
      const record = await recordOf("stalled-1");
      expect(record.outcome).toBe("client_stalled");
      expect(record.error).toMatch(/read nothing for 1500 ms/);
      expect(record.client_paused_ms).toBeGreaterThanOrEqual(1400);
      await sleep(50);
      expect(stub.requests.get("stalled-1")?.aborted).toBe(true);
    } finally {
      (client as ClientRequest | null)?.destroy();
    }
  }, 30_000);

  it("a tenant on the card (the node's servingMatch): the answer is labelled contended, not sampled", async () => {
    const shared = await startProxy({
      upstream: stub.url,
      node: { name: "shared", gpuIndex: 1, idleW: 60, servingMatch: "vllm" },
      port: 0,
      adminPort: null,
      onRecord,
    });
    try {
      const r = await raw(shared.url, "/v1/chat/completions", {
        body: chat({ stub: { ttft_ms: 50 } }),
        headers: { "x-request-id": "tenant-1" },
      });
      expect(r.headers["x-energy-method"]).toBe("unknown");
      expect(r.headers["x-energy-joules"]).toBeUndefined();
      const record = await recordOf("tenant-1");
      expect(record).toMatchObject({ contended: true, contention_checked: true, joules: null });
      expect(record.contended_by.map((p) => p.pid)).toEqual([777]);
      expect(record.measured_joules as number).toBeGreaterThan(0);
    } finally {
      await shared.close();
    }
  });

  it("limits: a body over maxBodyBytes is 413, a head over maxHeaderBytes 431, an upgrade 501; none reach the upstream", async () => {
    const before = stub.requests.size;
    const big = await raw(proxy.url, "/v1/chat/completions", { body: chat({ pad: "x".repeat(70_000) }) });
    expect(big.status).toBe(413);
    const head = await raw(proxy.url, "/v1/models", { headers: { "x-big": "y".repeat(5000) } });
    expect(head.status).toBe(431);
    const upgrade = await raw(proxy.url, "/v1/realtime", {
      headers: { connection: "upgrade", upgrade: "websocket" },
    });
    expect(upgrade.status).toBe(501);
    expect(stub.requests.size).toBe(before);
  });
});
