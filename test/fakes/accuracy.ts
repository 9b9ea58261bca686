/**
 * Scoring windows against exact ground truth on a synthetic card (./synthetic.ts): power traces
 * (steady, square waves, bursts placed at each edge's counter step), window plans (random,
 * back-to-back), and the scores — each window's error against its own bar, the bar as a share of
 * the figure, and what Zeus (a difference of two counter reads at the edges) would have said.
 * Used by the accuracy suite (test/accuracy.test.ts) and the benchmark (bench/accuracy.js).
 */
import type { Edge } from "../../src/track/track.js";
import type { SpanMeasurement } from "../../src/vocabulary/measurement.js";
import type { PowerPoint } from "./scenario.js";
import { hash01, type SyntheticCard } from "./synthetic.js";

/** One window: its edges, ns from t0. */
export interface WindowPlan {
  readonly open: number;
  readonly close: number;
}

/** One window, scored. */
export interface Scored {
  readonly plan: WindowPlan;
  /** The span measured (sampled) or why not. */
  readonly sampled: boolean;
  readonly reason: string | null;
  /** Above idle (J): what giul reports, the truth, the bar; Zeus's figure. */
  readonly figureJ: number;
  readonly truthJ: number;
  readonly barJ: number;
  readonly zeusJ: number | null;
  /** Zeus's figure before idle is taken off: the counter's difference (J). */
  readonly zeusGrossJ: number | null;
  readonly caveat: string | null;
  /**
   * Each edge's fused value less the exact cumulative energy at it (J; NaN unsampled or without a
   * counter): where a window's error comes from, its opening or its closing edge.
   */
  readonly openErrJ: number;
  readonly closeErrJ: number;
}

/** When a window's span is read: after the first sample past its close (close()), or later. */
export type WaitMode = "sample" | "counter";

const MS = 1e6;
/**
 * The shortest burst or dip the traces hold (ms): longer than the sampler's longest interval
 * between reads (1.618 periods of 10 ms), as the power bound assumes (see src/edges/power-model.ts).
 */
export const MIN_FEATURE_MS = 20;

/** A constant power. */
export function steady(watts: number): PowerPoint[] {
  return [[0, watts]];
}

/** `lo` ↔ `hi` W, switching every `halfMs`, for `seconds`. */
export function squareWave(lo: number, hi: number, halfMs: number, seconds: number): PowerPoint[] {
  const pts: PowerPoint[] = [];
  let high = false;
  for (let t = 0; t < seconds * 1000; t += halfMs) {
    pts.push([t, high ? hi : lo]);
    high = !high;
    pts.push([t, high ? hi : lo]);
  }
  return pts;
}

/**
 * `base` W with bursts of `burstW` lasting `burstMs`, one per edge, in the counter step (`stepMs`)
 * that holds the edge: ending at a random instant between the step's start and the edge (the part
 * of the step a counter read at the edge has not counted yet: "before"), or starting at a random
 * instant between the edge and the step's end ("after"), or either at random ("both").
 */
export function burstsAtEdges(
  plans: readonly WindowPlan[],
  options: {
    base: number;
    burstW: number;
    burstMs: number;
    stepMs: number;
    where: "before" | "after" | "both";
    /** Shortest dip left between bursts (ms; default MIN_FEATURE_MS). */
    minGapMs?: number;
  },
): PowerPoint[] {
  const { base, burstW, burstMs, stepMs, where } = options;
  const minGap = options.minGapMs ?? MIN_FEATURE_MS;
  const bursts: [number, number][] = [];
  let n = 0;
  for (const p of plans) {
    for (const edge of [p.open, p.close]) {
      const e = edge / MS;
      const side = where === "both" ? (hash01(n, 7) < 0.5 ? "before" : "after") : where;
      const stepStart = Math.floor(e / stepMs) * stepMs;
      const r = hash01(n, 8);
      if (side === "before") {
        const end = stepStart + r * (e - stepStart);
        bursts.push([Math.max(0, end - burstMs), end]);
      } else {
        const start = e + r * (stepStart + stepMs - e);
        bursts.push([start, start + burstMs]);
      }
      n++;
    }
  }
  // Bursts closer than minGap merge: a dip shorter than a sampling interval (or than a sensor's
  // refresh) is invisible to the power readings (only the counter's step sees it), and the bound
  // does not claim to see it.
  bursts.sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [a, b] of bursts) {
    const last = merged[merged.length - 1];
    if (last && a - last[1] < minGap) last[1] = Math.max(last[1], b);
    else merged.push([a, b]);
  }
  const pts: PowerPoint[] = [[0, base]];
  for (const [a, b] of merged) pts.push([a, base], [a, burstW], [b, burstW], [b, base]);
  return pts;
}

/**
 * `count` windows one after another: durations drawn from [minMs, maxMs], each opening
 * `gapMs` (drawn from its range) after the previous closed (0: back to back), from `startMs`.
 */
export function windowPlans(
  count: number,
  options: {
    minMs: number;
    maxMs: number;
    gapMs?: readonly [number, number];
    startMs?: number;
    seed?: number;
  },
): WindowPlan[] {
  const [gapMin, gapMax] = options.gapMs ?? [5, 150];
  const seed = options.seed ?? 1;
  let t = (options.startMs ?? 2000) * MS;
  const plans: WindowPlan[] = [];
  for (let i = 0; i < count; i++) {
    const d = options.minMs + hash01(i, seed * 3 + 11) * (options.maxMs - options.minMs);
    const open = Math.round(t + (i === 0 ? hash01(i, seed) * 100 * MS : 0));
    const close = Math.round(open + d * MS);
    plans.push({ open, close });
    t = close + (gapMin + hash01(i, seed * 3 + 12) * (gapMax - gapMin)) * MS;
  }
  return plans;
}

/**
 * Meters every window on `card` (edges taken in time order, samples written as time passes) and
 * scores it the moment it can be read: after the first sample past its close (`wait: "sample"`,
 * what close() does) or once one more counter step has passed (`"counter"`).
 */
export async function scoreWindows(
  card: SyntheticCard,
  plans: readonly WindowPlan[],
  idleW: number,
  options: {
    wait?: WaitMode;
    counterStepMs?: number;
    /** How a settled window is measured: the card's own track (default), or through an agent. */
    measure?: (card: SyntheticCard, open: Edge, close: Edge) => SpanMeasurement;
  } = {},
): Promise<Scored[]> {
  const wait = options.wait ?? "sample";
  const measure = options.measure ?? ((c: SyntheticCard, a: Edge, b: Edge) => c.track.span(a, b));
  const extraNs = wait === "counter" ? (options.counterStepMs ?? 100) * MS : 0;
  interface Open {
    plan: WindowPlan;
    open: Edge;
    close: Edge | null;
  }
  const events: { t: number; i: number; kind: 0 | 1 }[] = [];
  plans.forEach((p, i) => {
    events.push({ t: p.open, i, kind: 0 }, { t: p.close, i, kind: 1 });
  });
  // Closes before opens at the same instant (back to back), then by time.
  events.sort((a, b) => a.t - b.t || b.kind - a.kind);
  const live = new Map<number, Open>();
  const out: (Scored | undefined)[] = new Array(plans.length);
  const tryScore = (force: boolean) => {
    for (const [i, w] of live) {
      if (w.close === null) continue;
      if (!force && card.lastSampleT() - extraNs <= w.plan.close) continue;
      if (!card.track.settled([w.open, w.close]) && !force) continue;
      const m = measure(card, w.open, w.close);
      out[i] = scoreOne(card, w.plan, idleW, m, [edgeErrJ(card, w.open), edgeErrJ(card, w.close)]);
      live.delete(i);
    }
  };
  for (const ev of events) {
    // Write the samples up to this edge, scoring each window as soon as it can be read.
    while (card.nextSampleAt() <= ev.t) {
      card.advanceOne();
      tryScore(false);
    }
    const edge = card.edgeAt(ev.t);
    const plan = plans[ev.i] as WindowPlan;
    if (ev.kind === 0) live.set(ev.i, { plan, open: edge, close: null });
    else {
      const w = live.get(ev.i);
      if (w) w.close = edge;
    }
  }
  for (let n = 0; n < 10_000 && live.size > 0; n++) {
    card.advanceOne();
    tryScore(false);
  }
  tryScore(true);
  return out.map(
    (s, i) => s ?? scoreOne(card, plans[i] as WindowPlan, idleW, { ok: false, reason: "never read" }),
  );
}

function scoreOne(
  card: SyntheticCard,
  plan: WindowPlan,
  idleW: number,
  m: Awaited<ReturnType<SyntheticCard["track"]["span"]>>,
  [openErrJ, closeErrJ]: readonly [number, number] = [Number.NaN, Number.NaN],
): Scored {
  const seconds = (plan.close - plan.open) / 1e9;
  const truthJ = card.truth.energyJ(plan.open, plan.close) - idleW * seconds;
  const c0 = card.truth.counterMj(plan.open);
  const c1 = card.truth.counterMj(plan.close);
  const zeusGrossJ = c0 === null || c1 === null ? null : (c1 - c0) / 1000;
  const zeusJ = zeusGrossJ === null ? null : zeusGrossJ - idleW * seconds;
  if (!m.ok) {
    return {
      plan,
      sampled: false,
      reason: m.reason,
      figureJ: Number.NaN,
      truthJ,
      barJ: Number.NaN,
      zeusJ,
      zeusGrossJ,
      caveat: null,
      openErrJ: Number.NaN,
      closeErrJ: Number.NaN,
    };
  }
  return {
    plan,
    sampled: true,
    reason: null,
    figureJ: m.grossJoules - idleW * seconds,
    truthJ,
    barJ: m.uncertaintyJoules,
    zeusJ,
    zeusGrossJ,
    caveat: m.caveat,
    openErrJ,
    closeErrJ,
  };
}

/** An edge's fused value less the exact cumulative energy at its instant (J), NaN where not read. */
function edgeErrJ(card: SyntheticCard, edge: Edge): number {
  const r = card.track.reading(edge);
  const exact = card.truth.cumulativeMj(Number(edge.tNs - card.ring.epochNs));
  return r.ok && exact !== null ? (r.valueMj - exact) / 1000 : Number.NaN;
}

/** What a list of scored windows says. */
export interface Summary {
  readonly windows: number;
  readonly sampled: number;
  /** Sampled windows whose error exceeds their bar (must be 0), and the worst error / bar. */
  readonly outside: number;
  readonly worstOverBar: number;
  /** Bars as a share of the figure (%). */
  readonly medianBarPct: number;
  readonly p90BarPct: number;
  /** Bars (J). */
  readonly medianBarJ: number;
  readonly maxBarJ: number;
  /** |error| as a share of the truth (%). */
  readonly meanErrPct: number;
  readonly maxErrPct: number;
  /** |error| (J). */
  readonly meanErrJ: number;
  readonly maxErrJ: number;
  /** Zeus: |error| as a share of the truth (%), and windows it reports as 0 J (no counter change). */
  readonly zeusMeanErrPct: number;
  readonly zeusMaxErrPct: number;
  readonly zeusZero: number;
}

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] as number;
}

const mean = (xs: number[]) => (xs.length === 0 ? Number.NaN : xs.reduce((a, x) => a + x, 0) / xs.length);

export function summarize(rows: readonly Scored[]): Summary {
  const sampled = rows.filter((r) => r.sampled);
  const err = sampled.map((r) => Math.abs(r.figureJ - r.truthJ));
  const errPct = sampled.map((r) => (100 * Math.abs(r.figureJ - r.truthJ)) / Math.abs(r.truthJ));
  const barPct = sampled.map((r) => (100 * r.barJ) / Math.abs(r.figureJ));
  const zeus = rows.filter((r) => r.zeusJ !== null);
  const zeusPct = zeus.map((r) => (100 * Math.abs((r.zeusJ as number) - r.truthJ)) / Math.abs(r.truthJ));
  let outside = 0;
  let worst = 0;
  for (const r of sampled) {
    const e = Math.abs(r.figureJ - r.truthJ);
    if (e > r.barJ + 1e-9) outside++;
    if (r.barJ > 0) worst = Math.max(worst, e / r.barJ);
    else if (e > 1e-9) worst = Number.POSITIVE_INFINITY;
  }
  return {
    windows: rows.length,
    sampled: sampled.length,
    outside,
    worstOverBar: worst,
    medianBarPct: quantile(barPct, 0.5),
    p90BarPct: quantile(barPct, 0.9),
    medianBarJ: quantile(
      sampled.map((r) => r.barJ),
      0.5,
    ),
    maxBarJ: Math.max(0, ...sampled.map((r) => r.barJ)),
    meanErrPct: mean(errPct),
    maxErrPct: Math.max(0, ...errPct),
    meanErrJ: mean(err),
    maxErrJ: Math.max(0, ...err),
    zeusMeanErrPct: mean(zeusPct),
    zeusMaxErrPct: Math.max(0, ...zeusPct),
    zeusZero: zeus.filter((r) => r.zeusGrossJ === 0).length,
  };
}
