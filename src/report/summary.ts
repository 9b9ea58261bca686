/**
 * What giul-report says of a run, built a record at a time (a million records cost a few numbers
 * each, not the records). Honest by construction: sampled and estimated joules are kept apart and
 * never summed into one "measured" total; unknown answers are counted, never given a figure; every
 * sampled total carries the sum of its bars.
 */
import type { ReportRecord, Skipped } from "./read.js";

/** Edges of the J-per-answer histogram: 10 bins a decade from 1 mJ to 100 kJ. */
export const HISTOGRAM_EDGES: readonly number[] = Array.from({ length: 81 }, (_, i) => 10 ** (-3 + i / 10));

/** Requests drawn on the time line at most (a uniform sample of them: a reservoir). */
const MAX_BANDS = 2000;

export interface Band {
  readonly t0: number;
  readonly t1: number;
  readonly joules: number | null;
  readonly method: string;
  /** The card's average draw over the request (card_joules / seconds + idle), where known. */
  readonly cardW: number | null;
}

interface Sum {
  answers: number;
  joules: number;
  uncertainty: number;
  tokens: number;
  /** Joules of the answers that gave tokens (for J per 1k tokens). */
  tokenJoules: number;
}

const sum = (): Sum => ({ answers: 0, joules: 0, uncertainty: 0, tokens: 0, tokenJoules: 0 });

function add(s: Sum, r: ReportRecord): void {
  s.answers++;
  s.joules += r.joules as number;
  s.uncertainty += r.uncertainty_joules ?? 0;
  if (r.tokens !== null && r.tokens > 0) {
    s.tokens += r.tokens;
    s.tokenJoules += r.joules as number;
  }
}

function perK(s: Sum): number | null {
  return s.tokens > 0 ? (s.tokenJoules / s.tokens) * 1000 : null;
}

function quantile(sorted: Float64Array, q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

/** A growable array of numbers outside the heap's object graph. */
class Numbers {
  private data = new Float64Array(1024);
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const next = new Float64Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = v;
  }
  sorted(): Float64Array {
    return this.data.slice(0, this.length).sort();
  }
}

export interface MethodFigures {
  readonly answers: number;
  readonly joules: number;
  /** Σ of the answers' bars (sampled only; estimates carry none). */
  readonly uncertaintyJoules: number | null;
  readonly joulesPerAnswer: number | null;
  readonly joulesPer1kTokens: number | null;
  readonly p50: number | null;
  readonly p90: number | null;
  readonly p99: number | null;
}

export interface ReportSummary {
  readonly files: readonly string[];
  readonly lines: number;
  readonly records: number;
  readonly skipped: Skipped;
  readonly answers: number;
  readonly unknown: number;
  readonly contended: number;
  /** Per method: sampled and estimated, apart (never one total). */
  readonly sampled: MethodFigures;
  readonly estimated: MethodFigures;
  /** J per answer: counts per histogram bin (edges HISTOGRAM_EDGES; below the first, above the last, folded in). */
  readonly histogram: {
    readonly edges: readonly number[];
    readonly sampled: number[];
    readonly estimated: number[];
  };
  readonly byModel: readonly {
    readonly model: string;
    readonly answers: number;
    readonly sampledAnswers: number;
    readonly sampledJoules: number;
    readonly sampledUncertaintyJoules: number;
    readonly sampledJoulesPer1kTokens: number | null;
    readonly estimatedAnswers: number;
    readonly unknownAnswers: number;
  }[];
  readonly stages: readonly {
    readonly name: string;
    readonly sampledAnswers: number;
    readonly sampledJoules: number;
    readonly otherAnswers: number;
  }[];
  /** Requests over time (a sample, where the log has times): ms since the epoch. */
  readonly timeline: { readonly from: number; readonly to: number; readonly bands: readonly Band[] } | null;
}

export class ReportBuilder {
  private readonly s = { sampled: sum(), estimated: sum() };
  private readonly values = { sampled: new Numbers(), estimated: new Numbers() };
  private readonly bins = { sampled: HISTOGRAM_EDGES.map(() => 0), estimated: HISTOGRAM_EDGES.map(() => 0) };
  private unknown = 0;
  private contended = 0;
  private readonly models = new Map<
    string,
    { all: number; sampled: Sum; estimated: number; unknown: number }
  >();
  private readonly stages = new Map<string, { sampled: number; joules: number; other: number }>();
  private readonly bands: Band[] = [];
  private timed = 0;
  private from = Number.POSITIVE_INFINITY;
  private to = Number.NEGATIVE_INFINITY;
  /** A small seeded generator for the reservoir, so that a report is reproducible. */
  private seed = 0x9e3779b9;

  add(r: ReportRecord): void {
    if (r.contended) this.contended++;
    const model = typeof r.model === "string" && r.model !== "" ? r.model : "(none)";
    let m = this.models.get(model);
    if (m === undefined) {
      m = { all: 0, sampled: sum(), estimated: 0, unknown: 0 };
      this.models.set(model, m);
    }
    m.all++;
    for (const [name, stage] of Object.entries(r.stages)) {
      let st = this.stages.get(name);
      if (st === undefined) {
        st = { sampled: 0, joules: 0, other: 0 };
        this.stages.set(name, st);
      }
      if (stage.method === "sampled" && stage.joules !== null) {
        st.sampled++;
        st.joules += stage.joules;
      } else st.other++;
    }
    this.band(r);
    if (r.method === "unknown" || r.joules === null) {
      this.unknown++;
      m.unknown++;
      return;
    }
    const method = r.method;
    add(this.s[method], r);
    this.values[method].push(r.joules);
    const bins = this.bins[method];
    const bin = binOf(r.joules);
    bins[bin] = (bins[bin] as number) + 1;
    if (method === "sampled") add(m.sampled, r);
    else m.estimated++;
  }

  private band(r: ReportRecord): void {
    const t0 = typeof r.started_at === "string" ? Date.parse(r.started_at) : Number.NaN;
    if (!Number.isFinite(t0)) return;
    const t1 = t0 + (typeof r.duration_ms === "number" ? r.duration_ms : r.seconds * 1000);
    this.from = Math.min(this.from, t0);
    this.to = Math.max(this.to, t1);
    const cardW = r.card_joules !== null && r.seconds > 0 ? r.card_joules / r.seconds + r.idle_w : null;
    const band: Band = { t0, t1, joules: r.joules, method: r.method, cardW };
    this.timed++;
    if (this.bands.length < MAX_BANDS) this.bands.push(band);
    else {
      const k = Math.floor(this.random() * this.timed);
      if (k < MAX_BANDS) this.bands[k] = band;
    }
  }

  private random(): number {
    // xorshift32
    let x = this.seed;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.seed = x >>> 0;
    return this.seed / 4294967296;
  }

  summary(
    files: readonly string[],
    read: { lines: number; records: number; skipped: Skipped },
  ): ReportSummary {
    const figures = (method: "sampled" | "estimated"): MethodFigures => {
      const s = this.s[method];
      const sorted = this.values[method].sorted();
      return {
        answers: s.answers,
        joules: s.joules,
        uncertaintyJoules: method === "sampled" ? s.uncertainty : null,
        joulesPerAnswer: s.answers > 0 ? s.joules / s.answers : null,
        joulesPer1kTokens: perK(s),
        p50: quantile(sorted, 0.5),
        p90: quantile(sorted, 0.9),
        p99: quantile(sorted, 0.99),
      };
    };
    const sampled = figures("sampled");
    const estimated = figures("estimated");
    return {
      files,
      ...read,
      answers: sampled.answers + estimated.answers + this.unknown,
      unknown: this.unknown,
      contended: this.contended,
      sampled,
      estimated,
      histogram: { edges: HISTOGRAM_EDGES, sampled: this.bins.sampled, estimated: this.bins.estimated },
      byModel: [...this.models.entries()]
        .map(([model, m]) => ({
          model,
          answers: m.all,
          sampledAnswers: m.sampled.answers,
          sampledJoules: m.sampled.joules,
          sampledUncertaintyJoules: m.sampled.uncertainty,
          sampledJoulesPer1kTokens: perK(m.sampled),
          estimatedAnswers: m.estimated,
          unknownAnswers: m.unknown,
        }))
        .sort((a, b) => b.answers - a.answers),
      stages: [...this.stages.entries()].map(([name, st]) => ({
        name,
        sampledAnswers: st.sampled,
        sampledJoules: st.joules,
        otherAnswers: st.other,
      })),
      timeline:
        this.bands.length === 0
          ? null
          : { from: this.from, to: this.to, bands: [...this.bands].sort((a, b) => a.t0 - b.t0) },
    };
  }
}

/** The histogram bin of a figure: bin i holds (edge[i-1], edge[i]]; the ends fold in. */
function binOf(joules: number): number {
  if (!(joules > (HISTOGRAM_EDGES[0] as number))) return 0;
  const i = Math.ceil((Math.log10(joules) + 3) * 10);
  return Math.min(HISTOGRAM_EDGES.length - 1, Math.max(0, i));
}
