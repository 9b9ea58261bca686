import { context, type Span, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  DataPointType,
  type HistogramMetricData,
  MeterProvider,
  type MetricData,
  MetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { counterAdvanceBounds } from "./fakes/card-energy.js";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// giul/otel with the real OpenTelemetry SDK (in-memory exporters), against the NVML double's
// ground truth: the record on each request's span, the per-request histogram, the card metrics.

const POWER_W = 300;
const UUID = "GPU-5e1f0000-0000-4000-8000-0000000000aa";
const sc = scenarioForThisProcess({
  driverVersion: "575.51.03",
  devices: [{ name: "NVIDIA H200", uuid: UUID, power: POWER_W, counterStepMs: 10 }],
});
const { Meter } = await import("../src/index.js");
const { instrumentOpenTelemetry } = await import("../src/exporters/otel.js");
const { hrTimeOfMs, JOULE_BUCKETS } = await import("../src/exporters/attributes.js");
const { cardInUse } = await import("../src/select/in-use.js");
type Energy = import("../src/index.js").Energy;
type GiulMeter = import("../src/index.js").Meter;

class TestReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

const ready = nativeReady();
const IDLE_W = 60;
const node = { name: "iris", gpuIndex: 0, idleW: IDLE_W };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const tick = () => new Promise((r) => setImmediate(r));

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const tracer = tracerProvider.getTracer("test");
let reader: TestReader;
let otel: ReturnType<typeof instrumentOpenTelemetry>;

afterAll(() => {
  otel?.disable();
  sc.remove();
});

async function collect(): Promise<MetricData[]> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  return resourceMetrics.scopeMetrics.filter((s) => s.scope.name === "giul").flatMap((s) => s.metrics);
}

const metric = (all: MetricData[], name: string) => all.find((m) => m.descriptor.name === name);

/** A request: a span, and a window opened inside it with two stages. */
async function request(name: string, opts: { result?: boolean; tokens?: number } = {}) {
  return tracer.startActiveSpan(name, async (span: Span) => {
    const m = await Meter.forNode(node, { joulesPer1kHint: 4000 }).open();
    await sleep(40);
    m.mark("retrieve");
    await sleep(60);
    m.mark("generate");
    await m.close();
    const e = opts.result === false ? null : m.result({ tokens: opts.tokens ?? 100 });
    await tick();
    span.end();
    return { m, e: e ?? m.result(), spanId: span.spanContext().spanId };
  });
}

function finished(spanId: string): ReadableSpan {
  const span = spans.getFinishedSpans().find((s) => s.spanContext().spanId === spanId);
  if (span === undefined) throw new Error(`span ${spanId} not finished`);
  return span;
}

const toNs = (t: [number, number]) => BigInt(t[0]) * 1_000_000_000n + BigInt(t[1]);

function truthAbove(m: GiulMeter): number {
  const e = m.edgeTimes();
  const from = e.open as bigint;
  const to = e.close as bigint;
  return sc.energyJ(0, from, to) - (IDLE_W * Number(to - from)) / 1e9;
}

describe.runIf(ready)("giul/otel with the OpenTelemetry SDK", () => {
  beforeAll(async () => {
    const warm = await Meter.forNode(node).open();
    await warm.close();
  });
  beforeEach(() => {
    otel?.disable();
    reader = new TestReader();
    otel = instrumentOpenTelemetry({
      meterProvider: new MeterProvider({ readers: [reader] }),
      tracerProvider,
    });
    spans.reset();
  });

  it("puts each window's record on the span active when it opened, and each stage as an event", async () => {
    const { m, e, spanId } = await request("POST /generate", { tokens: 412 });
    const span = finished(spanId);
    const a = span.attributes;
    expect(e.method).toBe("sampled");
    expect(a["giul.energy.joules"]).toBe(e.joules);
    expect(a["giul.energy.method"]).toBe("sampled");
    expect(a["giul.energy.backend"]).toBe("nvml_counter");
    expect(a["giul.energy.uncertainty_joules"]).toBe(e.uncertaintyJoules);
    expect(a["giul.energy.attribution"]).toBe("shared");
    expect(a["giul.energy.contended"]).toBe(false);
    expect(a["giul.energy.card_joules"]).toBe(e.cardJoules);
    expect(a["giul.energy.tokens"]).toBe(412);
    expect(a["giul.node"]).toBe("iris");
    expect(a["giul.energy.reason"]).toBeUndefined();
    // The figure is the card's energy above idle over the window, within its own bar.
    expect(Math.abs((e.joules as number) - truthAbove(m))).toBeLessThanOrEqual(e.uncertaintyJoules as number);

    const events = span.events.filter((ev) => ev.name === "giul.stage");
    expect(events.map((ev) => ev.attributes?.["giul.stage.name"])).toEqual(["retrieve", "generate"]);
    const marks = m.edgeTimes().marks;
    for (const [i, ev] of events.entries()) {
      const stage = e.stages[ev.attributes?.["giul.stage.name"] as string] as Energy;
      expect(ev.attributes?.["giul.energy.joules"]).toBe(stage.joules);
      expect(ev.attributes?.["giul.energy.method"]).toBe(stage.method);
      expect(ev.attributes?.["giul.energy.uncertainty_joules"]).toBe(stage.uncertaintyJoules);
      // At the stage's end, on the span's clock (to a millisecond).
      const at = toNs(ev.time);
      expect(at).toBeGreaterThan(toNs(span.startTime));
      expect(at).toBeLessThan(toNs(span.endTime));
      const markEpochNs =
        BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6)) -
        (process.hrtime.bigint() - (marks[i]?.tNs as bigint));
      expect(Number(at - markEpochNs) / 1e6).toBeLessThan(1);
      expect(Number(at - markEpochNs) / 1e6).toBeGreaterThan(-1);
    }
  });

  it("finds each request's own span among concurrent ones, also when result() is never called", async () => {
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => request(`req-${i}`, { result: i % 3 !== 0, tokens: 10 + i })),
    );
    for (const [i, r] of results.entries()) {
      const a = finished(r.spanId).attributes;
      expect(a["giul.energy.joules"]).toBe(r.e.joules);
      expect(a["giul.energy.card_joules"]).toBe(r.e.cardJoules);
      expect(a["giul.energy.tokens"]).toBe(i % 3 === 0 ? undefined : 10 + i);
      expect(r.e.concurrency?.max).toBeGreaterThan(1);
    }
  });

  it("uses the span of the opening even when the window is closed elsewhere", async () => {
    let span: Span | undefined;
    const m = await tracer.startActiveSpan("opened-here", async (s) => {
      span = s;
      return Meter.forNode(node).open();
    });
    await sleep(50);
    const closedIn = tracer.startSpan("closed-here");
    await context.with(trace.setSpan(context.active(), closedIn), async () => {
      await m.close();
      m.result();
    });
    closedIn.end();
    span?.end();
    const opened = finished(span?.spanContext().spanId as string);
    expect(opened.attributes["giul.energy.joules"]).toBe(m.result().joules);
    expect(finished(closedIn.spanContext().spanId).attributes["giul.energy.joules"]).toBeUndefined();
  });

  it("records giul.request.energy (J) per window and counts every window in giul.requests", async () => {
    const out = await Promise.all([request("a"), request("b"), request("c")]);
    const unmeterable = {
      name: "far",
      idleW: 10,
      isLocal: false,
      powerEndpoint: "http://127.0.0.1:9",
      timeoutMs: 50,
    };
    const unknown = await Meter.forNode(unmeterable).open();
    await unknown.close();
    expect(unknown.result().method).toBe("unknown");
    const all = await collect();

    const h = metric(all, "giul.request.energy") as HistogramMetricData;
    expect(h.descriptor.unit).toBe("J");
    expect(h.dataPointType).toBe(DataPointType.HISTOGRAM);
    expect(h.dataPoints).toHaveLength(1);
    const point = h.dataPoints[0];
    expect(point?.attributes).toEqual({
      "hw.id": UUID,
      "hw.type": "gpu",
      "giul.energy.method": "sampled",
      "giul.energy.backend": "nvml_counter",
      "giul.node": "iris",
    });
    expect(point?.value.count).toBe(3);
    expect(point?.value.sum).toBeCloseTo(
      out.reduce((s, r) => s + (r.e.joules as number), 0),
      9,
    );
    expect(point?.value.buckets.boundaries).toEqual(JOULE_BUCKETS);
    // Each sample is its record's joules …
    const joules = out.map((r) => r.e.joules as number);
    expect(point?.value.min).toBe(Math.min(...joules));
    expect(point?.value.max).toBe(Math.max(...joules));
    // … and the records are shares of the card that add up to its energy above idle over the
    // windows' union (they overlap), within their bars.
    const from = out.map((r) => r.m.edgeTimes().open as bigint).reduce((x, y) => (x < y ? x : y));
    const to = out.map((r) => r.m.edgeTimes().close as bigint).reduce((x, y) => (x > y ? x : y));
    const truth = sc.energyJ(0, from, to) - (IDLE_W * Number(to - from)) / 1e9;
    const bar = out.reduce((sum, r) => sum + (r.e.uncertaintyJoules as number), 0);
    expect(Math.abs(joules.reduce((x, y) => x + y, 0) - truth)).toBeLessThanOrEqual(bar);

    const requests = metric(all, "giul.requests");
    const counts = Object.fromEntries(
      (requests?.dataPoints ?? []).map((p) => [
        `${p.attributes["giul.energy.method"]}/${p.attributes["giul.node"]}`,
        p.value,
      ]),
    );
    expect(counts).toEqual({ "sampled/iris": 3, "unknown/far": 1 });
  });

  it("reports hw.energy and hw.power for the card, advancing by the scenario's energy", async () => {
    const m = await Meter.forNode(node).open(); // the sampler runs while a window is open
    try {
      const readings = cardInUse(0)?.readings;
      const at = () => readings?.latest()?.tNs as bigint;
      const b1 = at();
      const first = await collect();
      const a1 = at();
      await sleep(800);
      const b2 = at();
      const second = await collect();
      const a2 = at();
      const attributes = {
        "hw.id": UUID,
        "hw.type": "gpu",
        "hw.name": "NVIDIA H200",
        "hw.vendor": "NVIDIA",
        "hw.driver_version": "575.51.03",
      };
      const e1 = metric(first, "hw.energy");
      const e2 = metric(second, "hw.energy");
      expect(e1?.descriptor.unit).toBe("J");
      expect(e1?.dataPointType).toBe(DataPointType.SUM);
      expect(e2?.dataPoints[0]?.attributes).toEqual(attributes);
      const advanced = (e2?.dataPoints[0]?.value as number) - (e1?.dataPoints[0]?.value as number);
      // The scenario's energy between the samples the collections read, within the counter's
      // update step (10 ms at 300 W).
      const { lo, hi } = counterAdvanceBounds(
        sc,
        0,
        { before: b1, after: a1 },
        { before: b2, after: a2 },
        POWER_W * 0.01,
      );
      expect(lo).toBeGreaterThan(200);
      expect(advanced).toBeGreaterThanOrEqual(lo);
      expect(advanced).toBeLessThanOrEqual(hi);
      const p = metric(second, "hw.power");
      expect(p?.descriptor.unit).toBe("W");
      expect(p?.dataPointType).toBe(DataPointType.GAUGE);
      expect(p?.dataPoints[0]?.attributes).toEqual(attributes);
      expect(p?.dataPoints[0]?.value).toBeCloseTo(POWER_W, 6);
    } finally {
      await m.close();
    }
  });

  it("can make each window a giul.window span of its own, between its edges, under the request's span", async () => {
    otel.disable();
    reader = new TestReader();
    otel = instrumentOpenTelemetry({
      meterProvider: new MeterProvider({ readers: [reader] }),
      tracerProvider,
      windowSpans: true,
    });
    const { m, e, spanId } = await request("with-window-span");
    // (The previous test's last window, closed as this one began, made one too, under no span.)
    const child = spans
      .getFinishedSpans()
      .find((s) => s.name === "giul.window" && s.parentSpanContext?.spanId === spanId);
    expect(child).toBeDefined();
    expect(child?.attributes["giul.energy.joules"]).toBe(e.joules);
    const edges = m.edgeTimes();
    const seconds =
      Number(toNs(child?.endTime as [number, number]) - toNs(child?.startTime as [number, number])) / 1e9;
    expect(seconds).toBeCloseTo(Number((edges.close as bigint) - (edges.open as bigint)) / 1e9, 5);
    expect(child?.events.map((ev) => ev.attributes?.["giul.stage.name"])).toEqual(["retrieve", "generate"]);
  });

  it("leaves the stage events out with stageEvents: false, and the span alone with spanAttributes: false", async () => {
    otel.disable();
    otel = instrumentOpenTelemetry({
      meterProvider: new MeterProvider({ readers: [new TestReader()] }),
      stageEvents: false,
    });
    const plain = await request("no-stage-events");
    const a = finished(plain.spanId);
    expect(a.attributes["giul.energy.joules"]).toBe(plain.e.joules);
    expect(a.events).toEqual([]);
    otel.disable();
    otel = instrumentOpenTelemetry({
      meterProvider: new MeterProvider({ readers: [new TestReader()] }),
      spanAttributes: false,
    });
    const bare = await request("no-attributes");
    expect(finished(bare.spanId).attributes).toEqual({});
    expect(finished(bare.spanId).events).toEqual([]);
  });

  it("stops when disabled: no more records, no card metrics", async () => {
    otel.disable();
    otel.disable();
    const { spanId } = await request("after-disable");
    expect(finished(spanId).attributes["giul.energy.joules"]).toBeUndefined();
    const all = await collect();
    expect(metric(all, "giul.request.energy")?.dataPoints ?? []).toEqual([]);
    expect(metric(all, "hw.energy")?.dataPoints ?? []).toEqual([]);
  });
});

describe("stage event times", () => {
  it("are given to the SDK as HrTime, the nanoseconds carried into the seconds when they round up", () => {
    expect(hrTimeOfMs(1_700_000_000_123.5)).toEqual([1_700_000_000, 123_500_000]);
    expect(hrTimeOfMs(2_000)).toEqual([2, 0]);
    // 1999.9999999996 ms: the nanoseconds round to a whole second.
    expect(hrTimeOfMs(1_999.9999999996)).toEqual([2, 0]);
    expect(hrTimeOfMs(0.000_001)).toEqual([0, 1]);
  });
});
