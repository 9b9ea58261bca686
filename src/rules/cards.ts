/**
 * A window over several cards (tensor parallel): each card's part is charged by the rules
 * (./energy.ts charge(), as a part: never estimated on its own), and the window's record is their
 * sum. It is sampled only when every part is; otherwise its reason names each card that is not,
 * and the window as a whole is estimated from the hint or unknown. Nothing is summed from a part
 * that was not measured.
 */
import type { BackendName, ContendingProcess } from "../vocabulary/measurement.js";
import { type Attribution, type CardEnergy, Energy, SIMULATED } from "./energy.js";

/** One card's part of the window, as charged on that card. */
export interface CardPart {
  readonly index: number | null;
  readonly uuid: string | null;
  readonly energy: Energy;
}

/** What the window knows besides its parts. */
export interface CardsFacts {
  readonly joulesPer1kHint: number | null;
  readonly attribution: Attribution;
}

/** The window's record: its stages (in the order of its marks), then the total over the window. */
export function chargeCards(
  parts: readonly CardPart[],
  marks: readonly { readonly name: string; readonly tokens: number | null }[],
  facts: CardsFacts,
  tokens: number | null,
): Energy {
  const stages: Record<string, Energy> = {};
  for (const mark of marks) {
    const stageParts: CardPart[] = [];
    for (const p of parts) {
      const stage = p.energy.stages[mark.name];
      if (stage !== undefined) stageParts.push({ index: p.index, uuid: p.uuid, energy: stage });
    }
    if (stageParts.length === parts.length) stages[mark.name] = sum(stageParts, facts, mark.tokens, {});
  }
  return sum(parts, facts, tokens, stages);
}

function label(p: CardPart): string {
  if (p.index === null) return `card ${p.uuid}`;
  return p.uuid === null ? `card ${p.index}` : `card ${p.index} (${p.uuid})`;
}

/** A part's reason without the simulated label, which the window's reason carries once, first. */
function ownReason(reason: string | null): string | null {
  if (reason === null || !reason.startsWith(SIMULATED)) return reason;
  const rest = reason.slice(SIMULATED.length).replace(/^; /, "");
  return rest === "" ? null : rest;
}

function cardEnergy(p: CardPart): CardEnergy {
  const e = p.energy;
  return Object.freeze({
    index: p.index,
    uuid: p.uuid,
    backend: e.backend,
    method: e.method,
    joules: e.method === "sampled" ? e.joules : null,
    uncertaintyJoules: e.uncertaintyJoules,
    measuredJoules: e.measuredJoules,
    cardJoules: e.cardJoules,
    idleW: e.idleW,
    contended: e.contended,
    contendedBy: e.contendedBy,
    reason: e.reason,
    samples: e.samples,
    maxGapMs: e.maxGapMs,
    concurrency: e.concurrency,
  });
}

/** Σ of `a` and `b`, null where either is. */
function plus(a: number | null, b: number | null): number | null {
  return a === null || b === null ? null : a + b;
}

/** The parts' figures added up in one pass (no list per figure: a record over 8 cards is built per window). */
class Totals {
  backend: BackendName | null = null;
  mixed = false;
  simulated = false;
  measuredJoules: number | null = 0;
  uncertaintyJoules: number | null = 0;
  samples: number | null = 0;
  maxGapMs: number | null = 0;
  cardJoules: number | null = 0;
  joules: number | null = 0;
  idleW = 0;
  notSampled = 0;
  /** Some part's contention was checked (true), found unchecked (false), or none was looked up (null). */
  checked: boolean | null = null;
  mean: number | null = 0;
  max: number | null = 0;
  readonly contendedBy: ContendingProcess[] = [];

  add(e: Energy): void {
    if (this.backend === null) this.backend = e.backend;
    else if (e.backend !== this.backend) this.mixed = true;
    if (e.backend === "simulated") this.simulated = true;
    if (e.method !== "sampled") this.notSampled += 1;
    this.measuredJoules = plus(this.measuredJoules, e.measuredJoules);
    this.uncertaintyJoules = plus(this.uncertaintyJoules, e.uncertaintyJoules);
    this.samples = plus(this.samples, e.samples);
    this.cardJoules = plus(this.cardJoules, e.cardJoules);
    this.joules = plus(this.joules, e.joules);
    this.maxGapMs =
      this.maxGapMs === null || e.maxGapMs === null ? null : Math.max(this.maxGapMs, e.maxGapMs);
    this.idleW += e.idleW;
    if (e.contentionChecked !== null) this.checked = this.checked !== false && e.contentionChecked;
    const c = e.concurrency;
    if (c === null || this.mean === null || this.max === null) {
      this.mean = null;
      this.max = null;
    } else {
      this.mean = Math.max(this.mean, c.mean);
      this.max = Math.max(this.max, c.max);
    }
    for (const p of e.contendedBy) {
      if (!this.contendedBy.some((q) => q.pid === p.pid)) this.contendedBy.push(p);
    }
  }
}

function sum(
  parts: readonly CardPart[],
  facts: CardsFacts,
  tokens: number | null,
  stagesIn: Record<string, Energy>,
): Energy {
  const t = new Totals();
  for (const p of parts) t.add(p.energy);
  const backend: BackendName = t.mixed ? "mixed" : (t.backend as BackendName);
  const notes: string[] = t.simulated ? [SIMULATED] : [];
  for (const p of parts) {
    if (t.notSampled > 0 && p.energy.method === "sampled") continue;
    const reason = ownReason(p.energy.reason);
    if (reason !== null) notes.push(`${label(p)}: ${reason}`);
  }
  if (t.mixed)
    notes.push(`cards measured by ${parts.map((p) => `${p.index} ${p.energy.backend}`).join(", ")}`);
  let joules: number | null = null;
  let method: Energy["method"] = "sampled";
  if (t.notSampled === 0) {
    joules = t.joules;
  } else if (facts.joulesPer1kHint !== null && tokens !== null) {
    method = "estimated";
    joules = (facts.joulesPer1kHint * tokens) / 1000;
    notes.push(`estimated from joulesPer1kHint ${facts.joulesPer1kHint} × ${tokens} tokens`);
  } else {
    method = "unknown";
    notes.push(
      facts.joulesPer1kHint === null
        ? "no joulesPer1kHint to estimate from"
        : "no token count to estimate from",
    );
  }
  const stages = Object.keys(stagesIn).length === 0 ? Object.freeze({}) : Object.freeze(stagesIn);
  const cards: CardEnergy[] = new Array(parts.length);
  for (let i = 0; i < parts.length; i++) cards[i] = cardEnergy(parts[i] as CardPart);
  return new Energy({
    joules,
    method,
    backend,
    seconds: (parts[0] as CardPart).energy.seconds,
    idleW: t.idleW,
    tokens,
    stages,
    contendedBy: Object.freeze(t.contendedBy),
    contentionChecked: t.checked,
    reason: notes.length === 0 ? null : notes.join("; "),
    measuredJoules: t.measuredJoules,
    uncertaintyJoules: t.uncertaintyJoules,
    samples: t.samples,
    maxGapMs: t.maxGapMs,
    attribution: facts.attribution,
    concurrency: t.mean === null || t.max === null ? null : { mean: t.mean, max: t.max },
    cardJoules: t.cardJoules,
    cards: Object.freeze(cards),
  });
}
