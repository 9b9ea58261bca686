// A stub OpenAI-compatible inference server (node:http only), for giul-proxy's tests and benchmark:
// POST /v1/chat/completions and /v1/completions, streamed (SSE, as vLLM writes it) or not, with the
// token timing each request asks for; GET /v1/models. It records every byte it wrote per request,
// whether the request was aborted, and how often the client (the proxy) made it wait.
//
// A request's JSON body may carry `stub: { … }` (it passes through the proxy unchanged):
//   ttft_ms    delay before the first token (default 0)
//   itl_ms     delay between tokens (default 0)
//   pad        bytes of padding in each token's content (default 0): big chunks, for backpressure
//   split      write each event in random pieces, as TCP may deliver them (seeded, default false)
//   status     answer this status with an OpenAI error body instead
//   fail_after destroy the connection after this many tokens (an upstream dying mid-answer)
//   hang       never answer (an upstream that stalls)
//   chunked    send a non-streamed body without Content-Length
//   crlf       end SSE lines with CRLF, as sse-starlette (vLLM) does
//   encoding   compress a non-streamed body: "gzip", "deflate" or "br" (Content-Encoding set)
// `startStub({ defaults })` sets these for requests that do not. `max_tokens` is the number of tokens (default 16); `stream_options.include_usage` adds the final
// usage chunk. The record key is the request's x-request-id (else a counter).
//
//   node test/fakes/openai-stub.mjs [--port 0]     prints "stub listening on http://…"
import { createServer } from "node:http";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";

/** A body compressed as Content-Encoding `encoding` says (none: as it is). */
function encode(body, encoding) {
  if (encoding === undefined) return body;
  const by = { gzip: gzipSync, deflate: deflateSync, br: brotliCompressSync }[encoding];
  if (by === undefined) throw new Error(`stub: unknown encoding ${encoding}`);
  return by(body);
}

/** A small seeded generator (mulberry32), so splits are reproducible. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms) => (ms > 0 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve());

function chunkOf(id, model, created, delta, finish, chat) {
  const choice = chat
    ? { index: 0, delta, logprobs: null, finish_reason: finish }
    : { index: 0, text: delta.content ?? "", logprobs: null, finish_reason: finish };
  return {
    id,
    object: chat ? "chat.completion.chunk" : "text_completion",
    created,
    model,
    choices: [choice],
  };
}

export async function startStub(options = {}) {
  const requests = new Map();
  const keep = options.record !== false;
  let serial = 0;
  const sockets = new Set();
  const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
    const key = String(req.headers["x-request-id"] ?? `stub-${++serial}`);
    const record = {
      key,
      method: req.method,
      url: req.url,
      rawHeaders: req.rawHeaders,
      body: Buffer.alloc(0),
      written: [],
      aborted: false,
      ended: false,
      blocked: 0,
    };
    requests.set(key, record);
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      record.body = Buffer.concat(chunks);
      serve(req, res, record).catch(() => res.destroy());
    });
    res.on("close", () => {
      if (!res.writableFinished) record.aborted = true;
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });

  /** Writes and records; waits for 'drain' when the reader is behind (as a real server does). */
  async function write(res, record, bytes) {
    if (res.destroyed) throw new Error("gone");
    if (keep) record.written.push(Buffer.from(bytes));
    if (!res.write(bytes)) {
      record.blocked++;
      await new Promise((resolve, reject) => {
        const gone = () => reject(new Error("gone"));
        res.once("close", gone);
        res.once("drain", () => {
          res.off("close", gone);
          resolve();
        });
      });
    }
  }

  async function serve(req, res, record) {
    const path = req.url.split("?")[0];
    if (req.method === "GET" && path === "/v1/models") {
      const body = JSON.stringify({ object: "list", data: [{ id: "stub-model", object: "model" }] });
      record.written.push(Buffer.from(body));
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
      record.ended = true;
      return;
    }
    if (req.method === "HEAD" || (req.method === "GET" && path === "/health")) {
      res.writeHead(200, { "content-type": "application/json", "content-length": "2" });
      res.end(req.method === "HEAD" ? undefined : "{}");
      record.ended = true;
      return;
    }
    const chat = path === "/v1/chat/completions";
    if (req.method !== "POST" || (!chat && path !== "/v1/completions")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "not found", type: "NotFound", code: 404 } }));
      record.ended = true;
      return;
    }
    let body;
    try {
      body = JSON.parse(record.body.toString("utf8"));
    } catch {
      res.writeHead(400, { "content-type": "application/json" });
      res.end('{"error":{"message":"bad json"}}');
      return;
    }
    const stub = { ...(options.defaults ?? {}), ...(body.stub ?? {}) };
    if (stub.hang) return;
    if (stub.status) {
      await sleep(stub.ttft_ms ?? 0);
      const error = JSON.stringify({
        error: { message: "stub failure", type: "InternalServerError", code: stub.status },
      });
      record.written.push(Buffer.from(error));
      res.writeHead(stub.status, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(error),
      });
      res.end(error);
      record.ended = true;
      return;
    }
    const n = body.max_tokens ?? 16;
    const model = body.model ?? "stub-model";
    const id = `cmpl-${record.key}`;
    const created = 1_700_000_000;
    const pad = "x".repeat(stub.pad ?? 0);
    const split = stub.split ? rng(serial * 7919 + n) : null;
    await sleep(stub.ttft_ms ?? 0);
    if (body.stream) {
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-stub": "1",
      });
      const event = async (obj) => {
        const eol = stub.crlf ? "\r\n" : "\n";
        const bytes = Buffer.from(`data: ${typeof obj === "string" ? obj : JSON.stringify(obj)}${eol}${eol}`);
        if (split === null) return write(res, record, bytes);
        let at = 0;
        while (at < bytes.length) {
          const step = 1 + Math.floor(split() * Math.min(24, bytes.length - at));
          await write(res, record, bytes.subarray(at, at + step));
          at += step;
          if (split() < 0.3) await sleep(0);
        }
      };
      if (chat) await event(chunkOf(id, model, created, { role: "assistant", content: "" }, null, true));
      for (let i = 0; i < n; i++) {
        if (i > 0) await sleep(stub.itl_ms ?? 0);
        if (stub.fail_after !== undefined && i >= stub.fail_after) {
          res.destroy();
          return;
        }
        await event(chunkOf(id, model, created, { content: ` tok${i}${pad}` }, null, chat));
      }
      await event(chunkOf(id, model, created, { content: "" }, "length", chat));
      if (body.stream_options?.include_usage) {
        await event({
          id,
          object: chat ? "chat.completion.chunk" : "text_completion",
          created,
          model,
          choices: [],
          usage: { prompt_tokens: 7, total_tokens: 7 + n, completion_tokens: n },
        });
      }
      await event("[DONE]");
      res.end();
      record.ended = true;
      return;
    }
    for (let i = 1; i < n; i++) await sleep(stub.itl_ms ?? 0);
    const text = Array.from({ length: n }, (_, i) => ` tok${i}${pad}`).join("");
    const answer = JSON.stringify({
      id,
      object: chat ? "chat.completion" : "text_completion",
      created,
      model,
      choices: [
        chat
          ? {
              index: 0,
              message: { role: "assistant", content: text },
              logprobs: null,
              finish_reason: "length",
            }
          : { index: 0, text, logprobs: null, finish_reason: "length" },
      ],
      usage: { prompt_tokens: 7, total_tokens: 7 + n, completion_tokens: n },
    });
    const headers = { "content-type": "application/json", "x-stub": "1" };
    const encoded = encode(Buffer.from(answer), stub.encoding);
    if (stub.encoding) headers["content-encoding"] = stub.encoding;
    record.written.push(encoded);
    if (!stub.chunked) headers["content-length"] = encoded.length;
    res.writeHead(200, headers);
    res.end(encoded);
    record.ended = true;
  }

  await new Promise((resolve) => server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    server,
    port,
    url: `http://127.0.0.1:${port}`,
    requests,
    /** Every byte written for one request, in order. */
    bytes: (key) => Buffer.concat(requests.get(key)?.written ?? []),
    close() {
      return new Promise((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const i = process.argv.indexOf("--port");
  const stub = await startStub({ port: i > 0 ? Number(process.argv[i + 1]) : 0, record: false });
  process.stdout.write(`stub listening on ${stub.url}\n`);
  // The benchmark only needs the server: drop the records as they come.
  setInterval(() => stub.requests.clear(), 1_000).unref();
  process.on("SIGTERM", () => stub.close().then(() => process.exit(0)));
}
