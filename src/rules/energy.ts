import type {
  BackendName,
  ContendingProcess,
  Method,
  Partition,
  SpanMeasurement,
} from "../vocabulary/measurement.js";

export type { Method } from "../vocabulary/measurement.js";

/**
 * How a window on a card shared with other windows of this process is charged:
 * - `shared`: at every instant the card's energy above idle is split among the windows open on it,
 *   in proportion to their weights (the shares add up to the card);
 * - `exclusive`: the whole card above idle over the window (giul 0.2's figure); a window that
 *   overlapped another is witnessed, not measured.
 */
export type Attribution = "shared" | "exclusive";

/** How many windows were open on the card while a span was (itself included). */
export interface Concurrency {
  /** Time-weighted mean. */
  readonly mean: number;
  /** Most at any instant. */
  readonly max: number;
}

/**
 * A window's share of the card, as the per-card ledger split it: already above idle (idle is
 * subtracted once for the card, at each instant, before the split).
 */
export interface ShareMeasurement {
  readonly ok: true;
  readonly share: true;
  /** This window's share of the card's energy above idle (J). */
  readonly aboveJoules: number;
  /** The card's energy above idle over the same span, as an exclusive window would measure it (J), or null. */
  readonly cardAboveJoules: number | null;
  /** Bound on the share's error: the card's bound apportioned like the energy (J). */
  readonly uncertaintyJoules: number;
  readonly samples: number;
  readonly maxGapMs: number;
  readonly caveat: string | null;
}

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
  /** The node watches for tenants (it sets servingMatch). */
  readonly shared: boolean;
  /** The span's stages: handed over to charge(), which freezes this object itself (no copy). */
  readonly stages: Readonly<Record<string, Energy>>;
  readonly attribution: Attribution;
  /** Windows open on the card during the span, or null when not known. */
  readonly concurrency: Concurrency | null;
  /**
   * The span is one card's part of a window over several cards: a part that is not sampled is
   * never estimated on its own (the window as a whole is, ../rules/cards.ts).
   */
  readonly part?: boolean;
}

/** One card's part of a window over several cards (tensor parallel), charged by the same rules. */
export interface CardEnergy {
  /** The card's index (NVML / nvidia-smi, or the agent's); null for a remote card named by UUID. */
  readonly index: number | null;
  /** The card's UUID, where known. */
  readonly uuid: string | null;
  readonly backend: BackendName;
  readonly method: Method;
  /** Its share above idle when sampled, else null (a part is never estimated). */
  readonly joules: number | null;
  readonly uncertaintyJoules: number | null;
  readonly measuredJoules: number | null;
  readonly cardJoules: number | null;
  readonly idleW: number;
  readonly contended: boolean;
  readonly contendedBy: readonly ContendingProcess[];
  readonly reason: string | null;
  readonly samples: number | null;
  readonly maxGapMs: number | null;
  readonly concurrency: Concurrency | null;
}

/** A card's part in the fleet record (an entry of `cards`). */
export interface CardRecord {
  index: number | null;
  uuid: string | null;
  backend: BackendName;
  method: Method;
  joules: number | null;
  uncertainty_joules: number | null;
  measured_joules: number | null;
  card_joules: number | null;
  idle_w: number;
  contended: boolean;
  contended_by: { pid: number; name: string | null; used_mib: number | null; slice_uuid?: string }[];
  reason: string | null;
  samples: number | null;
  max_gap_ms: number | null;
  concurrency_mean: number | null;
  concurrency_max: number | null;
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
  contention_checked: boolean | null;
  contended_by: { pid: number; name: string | null; used_mib: number | null; slice_uuid?: string }[];
  reason: string | null;
  measured_joules: number | null;
  uncertainty_joules: number | null;
  samples: number | null;
  max_gap_ms: number | null;
  attribution: Attribution;
  concurrency_mean: number | null;
  concurrency_max: number | null;
  card_joules: number | null;
  /** Only for a window over several cards: each card's part (the top level is their sum). */
  cards?: CardRecord[];
  /** Only for a window on a MIG slice: which slice, of which card, weighing how much of it. */
  partition?: PartitionRecord;
}

/** A MIG slice in the fleet record. */
export interface PartitionRecord {
  kind: "mig";
  profile: string | null;
  slice_uuid: string;
  card_uuid: string | null;
  slices: number;
  card_slices: number;
}

/**
 * Every stored field of an {@link Energy}, all present (one shape, so building records stays
 * cheap). `stages` and `contendedBy` are frozen by the caller (charge() does); `contended` is
 * derived from `contendedBy`.
 */
export type EnergyFields = Omit<
  Energy,
  "contended" | "joulesPer1kTokens" | "toJSON" | "cards" | "partition"
> & {
  readonly cards?: readonly CardEnergy[] | null;
  readonly partition?: Partition | null;
};

const NO_STAGES: Readonly<Record<string, Energy>> = Object.freeze({});
const NO_PROCESSES: readonly ContendingProcess[] = Object.freeze([]);

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
  /**
   * On a shared node (one that sets servingMatch): whether the resident processes could be read
   * at both edges. null on a dedicated node, where nothing is looked up.
   */
  readonly contentionChecked: boolean | null;
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
  /** How the card was charged among overlapping windows (see {@link Attribution}). */
  readonly attribution: Attribution;
  /** Windows open on the card during the span, itself included (time-weighted mean, max); null when unknown. */
  readonly concurrency: Concurrency | null;
  /**
   * The whole card's energy above idle over the span (what an exclusive window over the same edges
   * measures), or null when not measured. Equal to `measuredJoules` for an exclusive window.
   */
  readonly cardJoules: number | null;
  /**
   * A window over several cards (a node with several `gpuIndex`): each card's part, in the node's
   * order; the figures above are their sum. null for a one-card node.
   */
  readonly cards: readonly CardEnergy[] | null;
  /**
   * A window on a MIG slice: which slice, of which card, and its share of it (a slice has no
   * sensor: the figures are its share of the card's). null for a whole card.
   */
  readonly partition: Partition | null;

  /** @internal Records are made by the rules (Meter.result()), not by callers. */
  constructor(fields: EnergyFields) {
    this.joules = fields.joules;
    this.method = fields.method;
    this.backend = fields.backend;
    this.seconds = fields.seconds;
    this.idleW = fields.idleW;
    this.tokens = fields.tokens;
    this.stages = fields.stages;
    this.contendedBy = fields.contendedBy;
    this.contended = fields.contendedBy.length > 0;
    this.contentionChecked = fields.contentionChecked;
    this.reason = fields.reason;
    this.measuredJoules = fields.measuredJoules;
    this.uncertaintyJoules = fields.uncertaintyJoules;
    this.samples = fields.samples;
    this.maxGapMs = fields.maxGapMs;
    this.attribution = fields.attribution;
    this.concurrency = fields.concurrency;
    this.cardJoules = fields.cardJoules;
    this.cards = fields.cards ?? null;
    this.partition = fields.partition ?? null;
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
    const record: EnergyRecord = {
      joules: this.joules,
      method: this.method,
      backend: this.backend,
      seconds: this.seconds,
      idle_w: this.idleW,
      tokens: this.tokens,
      joules_per_1k_tokens: this.joulesPer1kTokens,
      stages,
      contended: this.contended,
      contention_checked: this.contentionChecked,
      contended_by: processRecords(this.contendedBy),
      reason: this.reason,
      measured_joules: this.measuredJoules,
      uncertainty_joules: this.uncertaintyJoules,
      samples: this.samples,
      max_gap_ms: this.maxGapMs,
      attribution: this.attribution,
      concurrency_mean: this.concurrency?.mean ?? null,
      concurrency_max: this.concurrency?.max ?? null,
      card_joules: this.cardJoules,
    };
    if (this.cards !== null) record.cards = this.cards.map(cardRecord);
    if (this.partition !== null) record.partition = partitionRecord(this.partition);
    return record;
  }
}

function partitionRecord(p: Partition): PartitionRecord {
  return {
    kind: p.kind,
    profile: p.profile,
    slice_uuid: p.sliceUuid,
    card_uuid: p.cardUuid,
    slices: p.slices,
    card_slices: p.cardSlices,
  };
}

/** A window's record on a MIG slice: its partition, and `note` (what that means) first in its reason. */
export function withPartition(e: Energy, partition: Partition, note: string): Energy {
  return new Energy({ ...e, partition, reason: e.reason === null ? note : `${note}; ${e.reason}` });
}

function processRecords(processes: readonly ContendingProcess[]): EnergyRecord["contended_by"] {
  return processes.map((p) =>
    p.slice === undefined
      ? { pid: p.pid, name: p.name, used_mib: p.usedMib }
      : { pid: p.pid, name: p.name, used_mib: p.usedMib, slice_uuid: p.slice },
  );
}

function cardRecord(c: CardEnergy): CardRecord {
  return {
    index: c.index,
    uuid: c.uuid,
    backend: c.backend,
    method: c.method,
    joules: c.joules,
    uncertainty_joules: c.uncertaintyJoules,
    measured_joules: c.measuredJoules,
    card_joules: c.cardJoules,
    idle_w: c.idleW,
    contended: c.contended,
    contended_by: processRecords(c.contendedBy),
    reason: c.reason,
    samples: c.samples,
    max_gap_ms: c.maxGapMs,
    concurrency_mean: c.concurrency?.mean ?? null,
    concurrency_max: c.concurrency?.max ?? null,
  };
}

/** Rule 1: what a span drew above the idle floor (J). The only place idle is subtracted. */
export function aboveIdle(grossJoules: number, idleW: number, seconds: number): number {
  return grossJoules - idleW * seconds;
}

/**
 * The rules, in one place, for every backend and every span:
 *
 * 1. charged above idle: `joules = measured − idleW × seconds` (for a shared window, the ledger
 *    subtracts idle once for the card with {@link aboveIdle} before splitting it);
 * 2. ≤ 0 J above idle is a failed measurement, never a sampled zero (a share too);
 * 3. what could not be measured is estimated from the hint (`hint × tokens / 1000`) or unknown,
 *    labelled with the reason;
 * 4. a window with another tenant at an edge is demoted out of `sampled`, and so is an exclusive
 *    window that overlapped another window on the card; the measured number stays in
 *    `measuredJoules`.
 */
export function charge(measurement: SpanMeasurement | ShareMeasurement, ctx: ChargeContext): Energy {
  // Handed over by the caller and frozen as it is: a frozen copy of a spread costs ~5× more.
  const stages = isEmpty(ctx.stages) ? NO_STAGES : Object.freeze(ctx.stages);
  const contendedBy =
    ctx.contendedBy === null || ctx.contendedBy.length === 0
      ? NO_PROCESSES
      : Object.freeze([...ctx.contendedBy]);
  if (!measurement.ok) return degrade(ctx, stages, contendedBy, measurement.reason, null, null, null);

  const share = "share" in measurement;
  const above = share ? measurement.aboveJoules : aboveIdle(measurement.grossJoules, ctx.idleW, ctx.seconds);
  const card = share ? measurement.cardAboveJoules : above;
  if (!(above > 0)) {
    const failed = share
      ? `this window's share was ${round(above)} J above idle (the card: ` +
        `${card === null ? "not measured" : `${round(card)} J`} above idle over ${round(ctx.seconds)} s ` +
        `at idleW ${ctx.idleW}, ${round(ctx.concurrency?.mean ?? 1)} windows open on average): ` +
        "a failed measurement, not a free request"
      : `measured ${round(above)} J above idle (${round(measurement.grossJoules)} J drawn over ` +
        `${round(ctx.seconds)} s at idleW ${ctx.idleW}): a failed measurement, not a free request`;
    return degrade(ctx, stages, contendedBy, failed, above, measurement, card);
  }
  if (contendedBy.length > 0) {
    const who = contendedBy.map((p) => `${p.name ?? "?"} (pid ${p.pid})`).join(", ");
    return degrade(
      ctx,
      stages,
      contendedBy,
      `card shared with ${who}: the draw is real but not ours`,
      above,
      measurement,
      card,
    );
  }
  if (ctx.attribution === "exclusive" && ctx.concurrency !== null && ctx.concurrency.max > 1) {
    const others = ctx.concurrency.max - 1;
    return degrade(
      ctx,
      stages,
      contendedBy,
      `exclusive attribution, but up to ${others} other window${others === 1 ? " was" : "s were"} open on the ` +
        'card meanwhile: the draw is real but not all ours (use attribution: "shared" to split it)',
      above,
      measurement,
      card,
    );
  }
  let reason = simulatedLabel(ctx, measurement.caveat);
  if (ctx.contentionUnchecked !== null)
    reason = reason === null ? ctx.contentionUnchecked : `${reason}; ${ctx.contentionUnchecked}`;
  return new Energy({
    joules: above,
    method: "sampled",
    backend: ctx.backend,
    seconds: ctx.seconds,
    idleW: ctx.idleW,
    tokens: ctx.tokens,
    stages,
    contendedBy,
    contentionChecked: ctx.shared ? ctx.contentionUnchecked === null : null,
    reason,
    measuredJoules: above,
    uncertaintyJoules: measurement.uncertaintyJoules,
    samples: measurement.samples,
    maxGapMs: measurement.maxGapMs,
    attribution: ctx.attribution,
    concurrency: ctx.concurrency,
    cardJoules: card,
  });
}

function isEmpty(o: object): boolean {
  for (const key in o) if (Object.hasOwn(o, key)) return false;
  return true;
}

/** A span that could not be measured at all (no backend, say), under the same rules. */
export function unmeasured(reason: string, ctx: ChargeContext): Energy {
  return charge({ ok: false, reason }, ctx);
}

function degrade(
  ctx: ChargeContext,
  stages: Readonly<Record<string, Energy>>,
  contendedBy: readonly ContendingProcess[],
  reason: string,
  measuredJoules: number | null,
  quality: { readonly uncertaintyJoules: number; readonly samples: number; readonly maxGapMs: number } | null,
  cardJoules: number | null,
): Energy {
  const extra = ctx.contentionUnchecked ? `; ${ctx.contentionUnchecked}` : "";
  const estimate = ctx.part !== true && ctx.joulesPer1kHint !== null && ctx.tokens !== null;
  const missing =
    ctx.joulesPer1kHint === null ? "no joulesPer1kHint to estimate from" : "no token count to estimate from";
  return new Energy({
    joules: estimate ? ((ctx.joulesPer1kHint as number) * (ctx.tokens as number)) / 1000 : null,
    method: estimate ? "estimated" : "unknown",
    backend: ctx.backend,
    seconds: ctx.seconds,
    idleW: ctx.idleW,
    tokens: ctx.tokens,
    stages,
    contendedBy,
    contentionChecked: ctx.shared ? ctx.contentionUnchecked === null : null,
    reason: estimate
      ? `${simulatedLabel(ctx, reason)}; estimated from joulesPer1kHint ${ctx.joulesPer1kHint} × ${ctx.tokens} tokens${extra}`
      : ctx.part === true
        ? `${simulatedLabel(ctx, reason)}${extra}`
        : `${simulatedLabel(ctx, reason)}; ${missing}${extra}`,
    measuredJoules,
    uncertaintyJoules: quality?.uncertaintyJoules ?? null,
    samples: quality?.samples ?? null,
    maxGapMs: quality?.maxGapMs ?? null,
    attribution: ctx.attribution,
    concurrency: ctx.concurrency,
    cardJoules,
  });
}

/** A simulated card's figures say so, first, whatever else the reason says: they measure no hardware. */
export const SIMULATED = "a simulated card (giul/testing): this figure measures no hardware";

function simulatedLabel(ctx: ChargeContext, reason: string | null): string | null {
  if (ctx.backend !== "simulated") return reason;
  return reason === null ? SIMULATED : `${SIMULATED}; ${reason}`;
}

function round(x: number): string {
  return Number.isFinite(x) ? String(Math.round(x * 1000) / 1000) : String(x);
}
