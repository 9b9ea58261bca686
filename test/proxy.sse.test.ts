import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { injectEnergy, requestInfo, streamEnd } from "../src/proxy/record.js";
import { type SseEnd, SseTap } from "../src/proxy/sse.js";

// The pieces of giul-proxy that read what passes without changing it: the SSE tap (every byte
// handed back in order, the [DONE] event and the final usage chunk found however TCP splits it,
// usage kept) and the `usage.energy` injection (every other byte of the body as it was).

/** The held usage chunk's bytes as they came. */
const held = (end: SseEnd) =>
  end.usageChunk === null
    ? Buffer.alloc(0)
    : Buffer.concat([Buffer.from(end.usageChunk.prefix + end.usageChunk.json), end.usageChunk.after]);

/** Runs a stream through a tap in the given pieces; returns what was passed on and the end. */
function through(stream: Buffer, cuts: readonly number[]) {
  const tap = new SseTap();
  const out: Buffer[] = [];
  let at = 0;
  for (const cut of [...cuts, stream.length]) {
    if (cut < at) continue;
    const passed = tap.push(stream.subarray(at, cut));
    if (passed !== null) out.push(passed);
    at = cut;
  }
  return { passed: Buffer.concat(out), end: tap.end(), usage: tap.usage };
}

const chunk = (i: number) =>
  `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" t${i}"}}]}`;
const usageLine =
  'data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"total_tokens":19,"completion_tokens":12}}';

function stream(eol: string, events: readonly string[]): Buffer {
  return Buffer.from(events.map((e) => `${e}${eol}${eol}`).join(""));
}

const cutsArb = (length: number) =>
  fc.uniqueArray(fc.integer({ min: 0, max: length }), { maxLength: 40 }).map((c) => c.sort((a, b) => a - b));

describe("SseTap", () => {
  for (const eol of ["\n", "\r\n", "\r"]) {
    it(`finds [DONE] and the usage chunk however the stream is split (${JSON.stringify(eol)} line ends)`, () => {
      const s = stream(eol, [chunk(0), chunk(1), usageLine, "data: [DONE]"]);
      const usageAt = s.indexOf(usageLine);
      const done = s.indexOf("data: [DONE]");
      fc.assert(
        fc.property(cutsArb(s.length), (cuts) => {
          const r = through(s, cuts);
          expect(r.end.done).toBe(true);
          expect(r.end.eol).toBe(eol);
          // Everything before the usage chunk is passed on; it and the rest are held, byte for byte.
          expect(r.passed.equals(s.subarray(0, usageAt))).toBe(true);
          expect(held(r.end).equals(s.subarray(usageAt, done))).toBe(true);
          expect(r.end.usageChunk?.prefix).toBe("data: ");
          expect(JSON.parse(r.end.usageChunk?.json as string).usage.completion_tokens).toBe(12);
          expect(r.end.rest.equals(s.subarray(done))).toBe(true);
          expect(r.usage).toEqual({ promptTokens: 7, completionTokens: 12 });
          expect(r.end.first).toMatchObject({ id: "c", object: "chat.completion.chunk" });
        }),
        { numRuns: 300 },
      );
    });

    it(`passes a usage chunk that is not the last one on as it came (${JSON.stringify(eol)})`, () => {
      // vLLM's continuous usage: a usage chunk followed by more events is not the final one.
      const s = stream(eol, [usageLine, chunk(1), usageLine.replace("[]", '[{"index":0}]'), "data: [DONE]"]);
      fc.assert(
        fc.property(cutsArb(s.length), (cuts) => {
          const r = through(s, cuts);
          expect(r.end.usageChunk).toBeNull();
          expect(Buffer.concat([r.passed, r.end.rest]).equals(s)).toBe(true);
          expect(r.end.rest.equals(s.subarray(s.indexOf("data: [DONE]")))).toBe(true);
        }),
        { numRuns: 200 },
      );
    });
  }

  it("holds an unfinished line only until it ends, and passes a line too long to parse as it comes", () => {
    const tap = new SseTap();
    expect(tap.push(Buffer.from(`${chunk(0)}\n\ndata: `))?.toString()).toBe(`${chunk(0)}\n\n`);
    expect(tap.push(Buffer.from("{"))).toBeNull();
    expect(tap.push(Buffer.from('"x":1}\n\n'))?.toString()).toBe('data: {"x":1}\n\n');
    const long = Buffer.alloc((1 << 20) + 10, 0x61);
    expect(tap.push(Buffer.concat([Buffer.from("data: "), long]))?.length).toBe(long.length + 6);
    expect(tap.push(Buffer.from("bc"))?.toString()).toBe("bc");
    expect(tap.push(Buffer.from("\n\ndata: [DONE]\n\n"))?.toString()).toBe("\n\n");
    expect(tap.end().done).toBe(true);
  });

  it("a stream without [DONE] passes whole; a comment may follow only when it ends on an event boundary", () => {
    const whole = stream("\n", [chunk(0), chunk(1)]);
    const r = through(whole, [5, 17]);
    expect(Buffer.concat([r.passed, r.end.rest]).equals(whole)).toBe(true);
    expect(r.end).toMatchObject({ done: false, atBoundary: true });
    // Ends mid-event, or mid-line: a comment would complete the event, so none goes there.
    for (const cut of [`${chunk(0)}\n`, `${chunk(0)}\n\ndata: [DO`, `${chunk(0)}\n\ndata: x`]) {
      const t = through(Buffer.from(cut), []);
      expect(Buffer.concat([t.passed, t.end.rest]).toString()).toBe(cut);
      expect(t.end.atBoundary).toBe(false);
    }
  });

  it("[DONE] counts only as the first line of an event, and exactly", () => {
    for (const text of [
      ": ping\ndata: [DONE]\n\n",
      "data: [DONE] \n\n",
      'data: "[DONE]"\n\n',
      "event: x\ndata: [DONE]\n\n",
    ]) {
      const r = through(Buffer.from(text), []);
      expect(r.end.done, text).toBe(false);
      expect(Buffer.concat([r.passed, r.end.rest]).toString()).toBe(text);
    }
    expect(through(Buffer.from("data:[DONE]\n\n"), [3]).end.done).toBe(true);
  });

  it("keeps the last usage and ignores `usage: null` and unparseable lines", () => {
    const s = Buffer.from(
      [
        'data: {"usage":null}',
        'data: {"usage":{"prompt_tokens":1,"completion_tokens":2}}',
        'data: {"usage":{"prompt_tokens":3,"completion_tokens":4.5}}',
        'data: {"usage": broken',
        "data: [DONE]",
      ].join("\n\n"),
    );
    expect(through(s, []).usage).toEqual({ promptTokens: 3, completionTokens: null });
  });
});

describe("requestInfo and injectEnergy", () => {
  it("reads model and stream from a JSON body, and nothing from anything else", () => {
    expect(requestInfo(Buffer.from(' {"model":"llama","stream":true}'))).toEqual({
      model: "llama",
      stream: true,
      includeUsage: false,
    });
    const asked = '{"model":"m","stream":true,"stream_options":{"include_usage":true}}';
    expect(requestInfo(Buffer.from(asked)).includeUsage).toBe(true);
    const none = { model: null, stream: false, includeUsage: false };
    expect(requestInfo(Buffer.from('{"model":3}'))).toEqual(none);
    expect(requestInfo(Buffer.from('{"model":""}'))).toEqual(none);
    expect(requestInfo(Buffer.from("model=x"))).toEqual(none);
    expect(requestInfo(Buffer.from("{broken"))).toEqual(none);
  });

  const record = { request_id: "r1", joules: 1.5 } as unknown as Parameters<typeof injectEnergy>[1];

  it("adds usage.energy and leaves every other byte as it was", () => {
    const body =
      '{"id":"x","choices":[{"usage":{"n":1}}],"usage": {"prompt_tokens": 7, "x": {"y": [1,{"z":"}"}]}} ,"z":1}';
    const out = injectEnergy(Buffer.from(body), record)?.toString() as string;
    const close = body.lastIndexOf("}}");
    expect(out).toBe(
      `${body.slice(0, close + 1)},"energy":{"request_id":"r1","joules":1.5}${body.slice(close + 1)}`,
    );
    expect(JSON.parse(out).usage.energy).toEqual({ request_id: "r1", joules: 1.5 });
    expect(JSON.parse(out).choices[0].usage).toEqual({ n: 1 });
  });

  it("fills an empty usage, and leaves bodies without a usage object alone", () => {
    expect(JSON.parse(injectEnergy(Buffer.from('{"usage":{ }}'), record)?.toString() as string)).toEqual({
      usage: { energy: { request_id: "r1", joules: 1.5 } },
    });
    for (const body of ['{"usage":null}', '{"data":[]}', "[1]", "not json", '{"a":"usage","usage":3}']) {
      expect(injectEnergy(Buffer.from(body), record), body).toBeNull();
    }
  });
});

describe("streamEnd", () => {
  const record = { request_id: "r1", joules: 1.5 } as unknown as Parameters<typeof streamEnd>[1];
  const endOf = (s: Buffer) => through(s, []);

  it("gives the final usage chunk usage.energy, then the comment, then [DONE]; other bytes unchanged", () => {
    for (const eol of ["\n", "\r\n"]) {
      const s = stream(eol, [chunk(0), usageLine, "data: [DONE]"]);
      const r = endOf(s);
      const out = streamEnd(r.end, record, { inject: true, add: false }).toString();
      const events = out.split(`${eol}${eol}`);
      expect(JSON.parse((events[0] as string).slice(6)).usage).toEqual({
        prompt_tokens: 7,
        total_tokens: 19,
        completion_tokens: 12,
        energy: { request_id: "r1", joules: 1.5 },
      });
      expect(events[1]).toBe(': energy {"request_id":"r1","joules":1.5}');
      expect(events.slice(2)).toEqual(["data: [DONE]", ""]);
      // Not injecting: the usage chunk as it came.
      const plain = streamEnd(endOf(s).end, record, { inject: false, add: false });
      expect(plain.toString().startsWith(`${usageLine}${eol}${eol}: energy `)).toBe(true);
    }
  });

  it("adds a usage chunk before [DONE] where the upstream sent none, and only to a [DONE] stream", () => {
    const s = stream("\n", [chunk(0), chunk(1), "data: [DONE]"]);
    const out = streamEnd(endOf(s).end, record, { inject: true, add: true }).toString();
    const [added, comment, done] = out.split("\n\n");
    expect(JSON.parse((added as string).slice(6))).toEqual({
      id: "c",
      object: "chat.completion.chunk",
      choices: [],
      usage: { energy: { request_id: "r1", joules: 1.5 } },
    });
    expect(comment?.startsWith(": energy ")).toBe(true);
    expect(done).toBe("data: [DONE]");
    const noDone = stream("\n", [chunk(0)]);
    expect(streamEnd(endOf(noDone).end, record, { inject: true, add: true }).toString()).toMatch(
      /^: energy /,
    );
  });
});
