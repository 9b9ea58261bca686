/**
 * `giul/otel`: each metered request's energy where OpenTelemetry users already look. Subscribes to
 * giul's diagnostics channels (src/diagnostics.ts); the Meter knows nothing of it.
 *
 * ```ts
 * import { instrumentOpenTelemetry } from "giul/otel";
 * const otel = instrumentOpenTelemetry();   // the global MeterProvider / TracerProvider
 * ```
 *
 * - the span active when a window opened gets the window's record as attributes
 *   (`giul.energy.joules`, `.method`, `.backend`, `.uncertainty_joules`, …) and one `giul.stage`
 *   event per stage, at the stage's end;
 * - `giul.request.energy` (histogram, J) and `giul.requests` (counter) with `giul.energy.method`,
 *   `giul.energy.backend` and `giul.node`;
 * - `hw.energy` (counter, J) and `hw.power` (gauge, W) per local GPU, with `hw.id`, `hw.type`,
 *   `hw.vendor`, `hw.model`, `hw.driver_version` (OpenTelemetry's hardware conventions), read from
 *   the samplers already running at each collection: no NVML call.
 *
 * `@opentelemetry/api` is an optional peer dependency of giul: install it to use this entry.
 */
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import {
  type BatchObservableCallback,
  type Context,
  context,
  diag,
  type MeterProvider,
  metrics,
  type ObservableCallback,
  type Span,
  type TracerProvider,
  trace,
  ValueType,
} from "@opentelemetry/api";
import { type EnergyMessage, GIUL_CHANNELS, type WindowOpenMessage } from "../diagnostics.js";
import type { Energy } from "../energy.js";
import type { Meter as GiulMeter } from "../meter.js";
import { epochMs, JOULE_BUCKETS, LabelCache, setEnergyAttributes, stageAttributes } from "./attributes.js";
import { CardFigureReader, hwAttributes } from "./cards.js";

export interface OpenTelemetryOptions {
  /** Where the metrics go. Default: the global one (`metrics.getMeterProvider()`). */
  readonly meterProvider?: MeterProvider;
  /** Makes the `giul.window` spans (`windowSpans`). Default: the global one. */
  readonly tracerProvider?: TracerProvider;
  /** Put each window's record on the span active when it opened (default true). */
  readonly spanAttributes?: boolean;
  /**
   * Also record each window as a span of its own, `giul.window`, from its opening to its closing
   * edge, a child of the span active when it opened, with the record's attributes and stage
   * events (default false).
   */
  readonly windowSpans?: boolean;
  /** Report `hw.energy` and `hw.power` for the local GPUs (default true). */
  readonly cardMetrics?: boolean;
}

export interface OpenTelemetryInstrumentation {
  /** Stops: unsubscribes from giul's channels and removes the card callback. Idempotent. */
  disable(): void;
}

const SCOPE = "giul";

/** What a window's opening left for its record: the caller's context, and the opening edge. */
interface Opened {
  readonly context: Context;
  readonly openNs: bigint;
}

/**
 * Starts reporting every metered request (and the local cards) to OpenTelemetry. Call it once,
 * after the SDK is set up; windows opened before it are reported from their record on, without
 * their opening span.
 */
export function instrumentOpenTelemetry(options: OpenTelemetryOptions = {}): OpenTelemetryInstrumentation {
  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(SCOPE);
  const onSpans = options.spanAttributes ?? true;
  const windowSpans = options.windowSpans ?? false;
  const tracer = windowSpans ? (options.tracerProvider ?? trace.getTracerProvider()).getTracer(SCOPE) : null;

  const energy = meter.createHistogram("giul.request.energy", {
    unit: "J",
    description:
      "Energy charged to each metered request: joules above idle (its share of the card under shared " +
      "attribution); sampled or estimated, as giul.energy.method says",
    valueType: ValueType.DOUBLE,
    advice: { explicitBucketBoundaries: [...JOULE_BUCKETS] },
  });
  // Counted here and observed at each collection: an instrument's add() would hash the labels
  // again for every window (see bench/RESULTS.md).
  const labels = new LabelCache({
    method: "giul.energy.method",
    backend: "giul.energy.backend",
    node: "giul.node",
  });
  const requests = meter.createObservableCounter("giul.requests", {
    unit: "{request}",
    description: "Metered requests (windows closed), by how their energy was obtained: unknown ones included",
    valueType: ValueType.INT,
  });
  const countRequests: ObservableCallback = (result) => {
    for (const entry of labels.entries()) result.observe(entry.count, entry.labels);
  };
  requests.addCallback(countRequests);

  // The context of the caller of open(): a window's record goes to the span active then.
  const opened = new WeakMap<GiulMeter, Opened>();
  const onOpen = (message: unknown): void => {
    const active = context.active();
    if (trace.getSpan(active) === undefined) return;
    const { meter: window, openNs } = message as WindowOpenMessage;
    opened.set(window, { context: active, openNs });
  };

  const onEnergy = (message: unknown): void => {
    try {
      const { meter: window, node, energy: e } = message as EnergyMessage;
      const tags = labels.of(e.method, e.backend, node.name);
      tags.count += 1;
      if (e.joules !== null) energy.record(e.joules, tags.labels);
      if (!onSpans && tracer === null) return;
      const at = opened.get(window);
      if (at !== undefined) opened.delete(window);
      if (onSpans) {
        const span = trace.getSpan(at?.context ?? context.active());
        if (span?.isRecording()) annotate(span, window, e, node.name, at?.openNs ?? null);
      }
      if (tracer !== null) {
        const edges = window.edgeTimes();
        if (edges.open === null || edges.close === null) return;
        const span = tracer.startSpan(
          "giul.window",
          { startTime: epochMs(edges.open) },
          at?.context ?? context.active(),
        );
        annotate(span, window, e, node.name, edges.open);
        span.end(epochMs(edges.close));
      }
    } catch (error) {
      diag.warn(`giul: recording a window failed: ${String(error)}`);
    }
  };

  const cards = (options.cardMetrics ?? true) ? cardInstruments(meter) : null;

  if (onSpans || windowSpans) subscribe(GIUL_CHANNELS.windowOpen, onOpen);
  subscribe(GIUL_CHANNELS.energy, onEnergy);
  let enabled = true;
  return {
    disable() {
      if (!enabled) return;
      enabled = false;
      if (onSpans || windowSpans) unsubscribe(GIUL_CHANNELS.windowOpen, onOpen);
      unsubscribe(GIUL_CHANNELS.energy, onEnergy);
      requests.removeCallback(countRequests);
      cards?.remove();
    },
  };
}

/**
 * The record on `span`, and one `giul.stage` event per stage at the stage's closing mark. Stages
 * run back to back from the opening edge, so each mark is the opening edge plus the seconds of the
 * stages up to it (to the nanosecond; no need to ask the Meter for its edges).
 */
function annotate(span: Span, window: GiulMeter, e: Energy, node: string, openNs: bigint | null): void {
  setEnergyAttributes(span, e, node);
  const open = openNs ?? (hasStages(e) ? window.edgeTimes().open : null);
  if (open === null) return;
  let at = epochMs(open);
  for (const name in e.stages) {
    const stage = e.stages[name] as Energy;
    at += stage.seconds * 1000;
    span.addEvent("giul.stage", stageAttributes(name, stage), at);
  }
}

/** hw.energy and hw.power for the local GPUs, observed at each collection. */
function cardInstruments(meter: ReturnType<MeterProvider["getMeter"]>): { remove(): void } {
  const hwEnergy = meter.createObservableCounter("hw.energy", {
    unit: "J",
    description:
      "Energy consumed by the GPU, as giul's sampler saw it while it ran (never decreasing; see giul's README)",
    valueType: ValueType.DOUBLE,
  });
  const hwPower = meter.createObservableGauge("hw.power", {
    unit: "W",
    description: "Instantaneous power consumed by the GPU: the newest sample of giul's sampler",
    valueType: ValueType.DOUBLE,
  });
  const reader = new CardFigureReader();
  const callback: BatchObservableCallback = (result) => {
    try {
      for (const card of reader.read()) {
        const attributes = hwAttributes(card.identity);
        if (card.energyJ !== null) result.observe(hwEnergy, card.energyJ, attributes);
        if (card.powerW !== null) result.observe(hwPower, card.powerW, attributes);
      }
    } catch (error) {
      diag.warn(`giul: reading the cards failed: ${String(error)}`);
    }
  };
  meter.addBatchObservableCallback(callback, [hwEnergy, hwPower]);
  return { remove: () => meter.removeBatchObservableCallback(callback, [hwEnergy, hwPower]) };
}

function hasStages(e: Energy): boolean {
  for (const _ in e.stages) return true;
  return false;
}
