// Each request's energy in OpenTelemetry: the span of every metered request carries its record
// (giul.energy.joules, .method, .uncertainty_joules, …) and one giul.stage event per stage, and
// the metrics get giul.request.energy (J per request) and the card's hw.energy and hw.power.
// Everything goes to the console here; in production, your OTLP exporters instead.
//
//   npm i giul @opentelemetry/api @opentelemetry/sdk-trace-base @opentelemetry/sdk-metrics \
//         @opentelemetry/context-async-hooks
//   node examples/otel-console.mjs [requests=3]
import { context, metrics, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { ConsoleMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, ConsoleSpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Meter } from "giul";
import { instrumentOpenTelemetry } from "giul/otel";

// The SDK, as @opentelemetry/sdk-node would set it up: spans and metrics to the console.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())],
});
trace.setGlobalTracerProvider(tracerProvider);
const meterProvider = new MeterProvider({
  readers: [
    new PeriodicExportingMetricReader({ exporter: new ConsoleMetricExporter(), exportIntervalMillis: 60_000 }),
  ],
});
metrics.setGlobalMeterProvider(meterProvider);

instrumentOpenTelemetry(); // giul's windows and cards, to the global providers

const node = { name: "local", gpuIndex: 0, idleW: Number(process.env.IDLE_W ?? 60) };
const tracer = trace.getTracer("example");
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

/** A request handler: its span is the one the window's record lands on. */
function handle(prompt) {
  return tracer.startActiveSpan("POST /generate", async (span) => {
    const { value } = await Meter.forNode(node, { joulesPer1kHint: 4000 }).measure(
      async (m) => {
        await sleep(50); // retrieval, say
        m.mark("retrieve");
        await sleep(150); // the model (simulated here)
        m.mark("generate");
        return { text: `echo ${prompt}`, tokens: 42 };
      },
      { tokens: (out) => out.tokens },
    );
    span.end();
    return value;
  });
}

const n = Number(process.argv[2] ?? 3);
await Promise.all(Array.from({ length: n }, (_, i) => handle(`prompt-${i}`)));
await meterProvider.forceFlush();
await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
