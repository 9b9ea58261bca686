import type { BackendName } from "./backends/types.js";

/** How a figure was obtained: measured, estimated from a hint, or not known at all. */
export type Method = "sampled" | "estimated" | "unknown";

/** A resident process that was not ours at a window's edge. */
export interface ContendingProcess {
  readonly pid: number;
  readonly name: string | null;
  readonly usedMib: number | null;
}

/** What a backend measured over one span (a window or a stage), before any rule is applied. */
export type SpanMeasurement =
  | {
      readonly ok: true;
      /** Energy drawn by the whole card over the span, idle included (J). */
      readonly grossJoules: number;
      /** Samples strictly inside the span. */
      readonly samples: number;
      /** Largest interval between consecutive samples covering the span (ms). */
      readonly maxGapMs: number;
      /** Bound on the error the edges and the counter's step can introduce (J). */
      readonly uncertaintyJoules: number;
      /** A caveat about the source (averaged power, say), or null. */
      readonly caveat: string | null;
    }
  | { readonly ok: false; readonly reason: string };

/** What the rules need besides the measurement. */
export interface ChargeContext {
  readonly backend: BackendName;
  readonly seconds: number;
  readonly idleW: number;
  readonly tokens: number | null;
  readonly joulesPer1kHint: number | null;
  readonly contendedBy: readonly ContendingProcess[] | null;
  /** Why contention could not be checked, when it could not. */
  readonly contentionUnchecked: string | null;
  readonly stages: Readonly<Record<string, Energy>>;
}

/** The fleet record (snake_case, the same fields as giul 0.2's). */
export interface EnergyRecord {
  joules: number | null;
  method: Method;
  backend: BackendName;
  seconds: number;
  idle_w: number;
  tokens: number | null;
  joules_per_1k_tokens: number | null;
  stages: Record<string, EnergyRecord>;
  contended: boolean;
  contended_by: { pid: number; name: string | null; used_mib: number | null }[];
  reason: string | null;
  measured_joules: number | null;
  uncertainty_joules: number | null;
  samples: number | null;
  max_gap_ms: number | null;
}

/**
 * What one answer (or one stage of it) cost, charged above idle and labelled with how it was
 * obtained. `joules` is null only when `method` is "unknown".
 */
export class Energy {
  /** Joules above idle: measured (`sampled`), from the hint (`estimated`), or null (`unknown`). */
  readonly joules: number | null;
  readonly method: Method;
  readonly backend: BackendName;
  /** Length of the span in seconds. */
  readonly seconds: number;
  /** The idle draw that was charged off (W). */
  readonly idleW: number;
  readonly tokens: number | null;
  /** Named stages, in order; each is charged by the same rules. Empty for a stage. */
  readonly stages: Readonly<Record<string, Energy>>;
  /** Another tenant was resident at an edge: the number is real but not ours. */
  readonly contended: boolean;
  readonly contendedBy: readonly ContendingProcess[];
  /** Why the figure is not plainly sampled (or a caveat about it); null when there is nothing to say. */
  readonly reason: string | null;
  /** What was measured above idle, even when the rules did not let it stand as `joules`. */
  readonly measuredJoules: number | null;
  /** Bound on the measurement error from the edges and the counter's step (J). */
  readonly uncertaintyJoules: number | null;
  /** Samples inside the span. */
  readonly samples: number | null;
  /** Largest gap between the samples covering the span (ms). */
  readonly maxGapMs: number | null;

  constructor(fields: {
    joules: number | null;
    method: Method;
    backend: BackendName;
    seconds: number;
    idleW: number;
    tokens: number | null;
    stages?: Readonly<Record<string, Energy>>;
    contendedBy?: readonly ContendingProcess[];
    reason: string | null;
    measuredJoules?: number | null;
    uncertaintyJoules?: number | null;
    samples?: number | null;
    maxGapMs?: number | null;
  }) {
    this.joules = fields.joules;
    this.method = fields.method;
    this.backend = fields.backend;
    this.seconds = fields.seconds;
    this.idleW = fields.idleW;
    this.tokens = fields.tokens;
    this.stages = Object.freeze({ ...(fields.stages ?? {}) });
    this.contendedBy = Object.freeze([...(fields.contendedBy ?? [])]);
    this.contended = this.contendedBy.length > 0;
    this.reason = fields.reason;
    this.measuredJoules = fields.measuredJoules ?? null;
    this.uncertaintyJoules = fields.uncertaintyJoules ?? null;
    this.samples = fields.samples ?? null;
    this.maxGapMs = fields.maxGapMs ?? null;
    Object.freeze(this);
  }

  /** Joules per 1,000 tokens, when both are known. */
  get joulesPer1kTokens(): number | null {
    if (this.joules === null || this.tokens === null || this.tokens <= 0) return null;
    return (this.joules * 1000) / this.tokens;
  }

  /** The fleet record in snake_case, the same fields a Python giul node reports. */
  toJSON(): EnergyRecord {
    const stages: Record<string, EnergyRecord> = {};
    for (const [name, stage] of Object.entries(this.stages)) stages[name] = stage.toJSON();
    return {
      joules: this.joules,
      method: this.method,
      backend: this.backend,
      seconds: this.seconds,
      idle_w: this.idleW,
      tokens: this.tokens,
      joules_per_1k_tokens: this.joulesPer1kTokens,
      stages,
      contended: this.contended,
      contended_by: this.contendedBy.map((p) => ({ pid: p.pid, name: p.name, used_mib: p.usedMib })),
      reason: this.reason,
      measured_joules: this.measuredJoules,
      uncertainty_joules: this.uncertaintyJoules,
      samples: this.samples,
      max_gap_ms: this.maxGapMs,
    };
  }
}

/**
 * The rules, in one place, for every backend and every span:
 *
 * 1. charged above idle: `joules = measured − idleW × seconds`;
 * 2. ≤ 0 J above idle is a failed measurement, never a sampled zero;
 * 3. what could not be measured is estimated from the hint (`hint × tokens / 1000`) or unknown,
 *    labelled with the reason;
 * 4. a window with another tenant at an edge is demoted out of `sampled`; the measured number stays
 *    in `measuredJoules`.
 */
export function charge(measurement: SpanMeasurement, ctx: ChargeContext): Energy {
  const base = {
    backend: ctx.backend,
    seconds: ctx.seconds,
    idleW: ctx.idleW,
    tokens: ctx.tokens,
    stages: ctx.stages,
    contendedBy: ctx.contendedBy ?? [],
  };
  if (!measurement.ok) return degrade(base, ctx, measurement.reason, null, {});

  const above = measurement.grossJoules - ctx.idleW * ctx.seconds;
  const quality = {
    uncertaintyJoules: measurement.uncertaintyJoules,
    samples: measurement.samples,
    maxGapMs: measurement.maxGapMs,
  };
  if (!(above > 0)) {
    const reason =
      `measured ${round(above)} J above idle (${round(measurement.grossJoules)} J drawn over ` +
      `${round(ctx.seconds)} s at idleW ${ctx.idleW}): a failed measurement, not a free request`;
    return degrade(base, ctx, reason, above, quality);
  }
  if (ctx.contendedBy && ctx.contendedBy.length > 0) {
    const who = ctx.contendedBy.map((p) => `${p.name ?? "?"} (pid ${p.pid})`).join(", ");
    return degrade(base, ctx, `card shared with ${who}: the draw is real but not ours`, above, quality);
  }
  const notes = [measurement.caveat, ctx.contentionUnchecked].filter((n): n is string => n !== null);
  return new Energy({
    ...base,
    ...quality,
    joules: above,
    method: "sampled",
    reason: notes.length > 0 ? notes.join("; ") : null,
    measuredJoules: above,
  });
}

/** A span that could not be measured at all (no backend, say), under the same rules. */
export function unmeasured(reason: string, ctx: ChargeContext): Energy {
  return charge({ ok: false, reason }, ctx);
}

function degrade(
  base: {
    backend: BackendName;
    seconds: number;
    idleW: number;
    tokens: number | null;
    stages: Readonly<Record<string, Energy>>;
    contendedBy: readonly ContendingProcess[];
  },
  ctx: ChargeContext,
  reason: string,
  measuredJoules: number | null,
  quality: { uncertaintyJoules?: number; samples?: number; maxGapMs?: number },
): Energy {
  const extra = ctx.contentionUnchecked ? `; ${ctx.contentionUnchecked}` : "";
  if (ctx.joulesPer1kHint !== null && ctx.tokens !== null) {
    return new Energy({
      ...base,
      ...quality,
      joules: (ctx.joulesPer1kHint * ctx.tokens) / 1000,
      method: "estimated",
      reason: `${reason}; estimated from joulesPer1kHint ${ctx.joulesPer1kHint} × ${ctx.tokens} tokens${extra}`,
      measuredJoules,
    });
  }
  const missing =
    ctx.joulesPer1kHint === null ? "no joulesPer1kHint to estimate from" : "no token count to estimate from";
  return new Energy({
    ...base,
    ...quality,
    joules: null,
    method: "unknown",
    reason: `${reason}; ${missing}${extra}`,
    measuredJoules,
  });
}

function round(x: number): string {
  return Number.isFinite(x) ? String(Math.round(x * 1000) / 1000) : String(x);
}
