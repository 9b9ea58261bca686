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
 * - `giul.request.energy` (histogram, J) and `giul.requests` (counter) with `hw.id`, `hw.type`,
 *   `giul.energy.method`, `giul.energy.backend` and `giul.node`;
 * - `hw.energy` (counter, J) and `hw.power` (gauge, W) per local GPU, with `hw.id`, `hw.type`,
 *   `hw.name`, `hw.vendor`, `hw.driver_version` (OpenTelemetry's hardware conventions), read from
 *   the samplers already running at each collection: no NVML call. Names: ./names.ts.
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
  ROOT_CONTEXT,
  type Span,
  type TracerProvider,
  trace,
  ValueType,
} from "@opentelemetry/api";
import { type EnergyMessage, GIUL_CHANNELS, type WindowOpenMessage } from "../diagnostics.js";
import type { Energy } from "../rules/energy.js";
import { hrTimeOfMs, JOULE_BUCKETS, LabelCache, setEnergyAttributes, stageAttributes } from "./attributes.js";
import { CardFigureReader } from "./cards.js";
import { CARD_ENERGY, CARD_POWER, cardAttributes, REQUEST_ENERGY, REQUESTS } from "./names.js";

export interface OpenTelemetryOptions {
  /** Where the metrics go. Default: the global one (`metrics.getMeterProvider()`). */
  readonly meterProvider?: MeterProvider;
  /** Makes the `giul.window` spans (`windowSpans`). Default: the global one. */
  readonly tracerProvider?: TracerProvider;
  /** Put each window's record on the span active when it opened (default true). */
  readonly spanAttributes?: boolean;
  /**
   * With the record, one `giul.stage` event per stage (default true). The SDK's events are a
   * large part of what giul/otel costs a window: turn them off where that matters.
   */
  readonly stageEvents?: boolean;
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

/** Where giul/otel keeps, on a window's open message, the context its caller opened it in. */
const OPENED_IN = Symbol("giul/otel: opened in");
type Opening = WindowOpenMessage & { [OPENED_IN]?: Context };

/**
 * Starts reporting every metered request (and the local cards) to OpenTelemetry. Call it once,
 * after the SDK is set up; windows opened before it are reported from their record on, without
 * their opening span.
 */
export function instrumentOpenTelemetry(options: OpenTelemetryOptions = {}): OpenTelemetryInstrumentation {
  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(SCOPE);
  const onSpans = options.spanAttributes ?? true;
  const withStages = options.stageEvents ?? true;
  const windowSpans = options.windowSpans ?? false;
  const tracer = windowSpans ? (options.tracerProvider ?? trace.getTracerProvider()).getTracer(SCOPE) : null;

  const energy = meter.createHistogram(REQUEST_ENERGY.otel, {
    unit: REQUEST_ENERGY.unit,
    description: REQUEST_ENERGY.help,
    valueType: ValueType.DOUBLE,
    advice: { explicitBucketBoundaries: [...JOULE_BUCKETS] },
  });
  // Counted here and observed at each collection: an instrument's add() would hash the labels
  // again for every window.
  const labels = new LabelCache("otel");
  const requests = meter.createObservableCounter(REQUESTS.otel, {
    unit: REQUESTS.unit,
    description: REQUESTS.help,
    valueType: ValueType.INT,
  });
  const countRequests: ObservableCallback = (result) => {
    for (const entry of labels.entries()) result.observe(entry.count, entry.labels);
  };
  requests.addCallback(countRequests);

  // The context of the caller of open(): a window's record goes to the span active then, and only
  // there (a record published after close()'s tick runs in no particular request's context). Kept
  // on the window's open message, which its energy message hands back: no WeakMap of open windows
  // (an ephemeron table the collector revisits, set and deleted on every window).
  const onOpen = (message: unknown): void => {
    const active = context.active();
    if (trace.getSpan(active) !== undefined) (message as Opening)[OPENED_IN] = active;
  };

  const onEnergy = (message: unknown): void => {
    try {
      const { opening, node, energy: e, openMs, closeMs } = message as EnergyMessage;
      const tags = labels.of(e.method, e.backend, node);
      tags.count += 1;
      if (e.joules !== null) energy.record(e.joules, tags.labels);
      if (!onSpans && tracer === null) return;
      const at = opening === null ? undefined : (opening as Opening)[OPENED_IN];
      if (onSpans) {
        const span = at === undefined ? undefined : trace.getSpan(at);
        if (span?.isRecording()) annotate(span, e, node.name, withStages ? openMs : null);
      }
      if (tracer !== null) {
        const span = tracer.startSpan("giul.window", { startTime: hrTimeOf(openMs) }, at ?? ROOT_CONTEXT);
        annotate(span, e, node.name, withStages ? openMs : null);
        span.end(hrTimeOf(closeMs));
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
 * stages up to it. No events when `openMs` is null (stageEvents: false).
 */
function annotate(span: Span, e: Energy, node: string, openMs: number | null): void {
  setEnergyAttributes(span, e, node);
  if (openMs === null) return;
  let at = performance.timeOrigin + openMs;
  for (const name in e.stages) {
    const stage = e.stages[name] as Energy;
    at += stage.seconds * 1000;
    span.addEvent("giul.stage", stageAttributes(name, stage), hrTimeOfMs(at));
  }
}

/**
 * A time on performance.now()'s clock as ms since the epoch, as HrTime: the SDK stamps spans with
 * timeOrigin + now() and takes an HrTime as it is (a number in ms costs it a clock reading to tell an
 * epoch time from a performance one).
 */
function hrTimeOf(performanceMs: number): [number, number] {
  return hrTimeOfMs(performance.timeOrigin + performanceMs);
}

/** hw.energy and hw.power for the local GPUs, observed at each collection. */
function cardInstruments(meter: ReturnType<MeterProvider["getMeter"]>): { remove(): void } {
  const hwEnergy = meter.createObservableCounter(CARD_ENERGY.otel, {
    unit: CARD_ENERGY.unit,
    description: CARD_ENERGY.help,
    valueType: ValueType.DOUBLE,
  });
  const hwPower = meter.createObservableGauge(CARD_POWER.otel, {
    unit: CARD_POWER.unit,
    description: CARD_POWER.help,
    valueType: ValueType.DOUBLE,
  });
  const reader = new CardFigureReader();
  const callback: BatchObservableCallback = (result) => {
    try {
      for (const card of reader.read()) {
        const attributes = cardAttributes(card.identity);
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
