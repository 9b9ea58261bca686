/**
 * A window over several cards (tensor parallel): each card's part is charged by the rules
 * (./energy.ts charge(), as a part: never estimated on its own), and the window's record is their
 * sum. It is sampled only when every part is; otherwise its reason names each card that is not,
 * and the window as a whole is estimated from the hint or unknown. Nothing is summed from a part
 * that was not measured.
 */
import type { BackendName, ContendingProcess } from "../vocabulary/measurement.js";
import { type Attribution, type CardEnergy, type Concurrency, Energy, SIMULATED } from "./energy.js";

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

/** Σ of the values, or null where any is null. */
function total(values: readonly (number | null)[]): number | null {
  let s = 0;
  for (const v of values) {
    if (v === null) return null;
    s += v;
  }
  return s;
}

function sum(
  parts: readonly CardPart[],
  facts: CardsFacts,
  tokens: number | null,
  stagesIn: Record<string, Energy>,
): Energy {
  const energies = parts.map((p) => p.energy);
  const first = energies[0] as Energy;
  const backends = new Set<BackendName>(energies.map((e) => e.backend));
  const backend: BackendName = backends.size === 1 ? first.backend : "mixed";
  const contendedBy: ContendingProcess[] = [];
  const pids = new Set<number>();
  for (const e of energies) {
    for (const p of e.contendedBy) {
      if (pids.has(p.pid)) continue;
      pids.add(p.pid);
      contendedBy.push(p);
    }
  }
  const checked = energies.map((e) => e.contentionChecked);
  const contentionChecked = checked.every((c) => c === null) ? null : !checked.includes(false);
  const concurrency: Concurrency | null = energies.some((e) => e.concurrency === null)
    ? null
    : {
        mean: Math.max(...energies.map((e) => (e.concurrency as Concurrency).mean)),
        max: Math.max(...energies.map((e) => (e.concurrency as Concurrency).max)),
      };
  const measuredJoules = total(energies.map((e) => e.measuredJoules));
  const uncertaintyJoules = total(energies.map((e) => e.uncertaintyJoules));
  const samples = total(energies.map((e) => e.samples));
  const gaps = energies.map((e) => e.maxGapMs);
  const maxGapMs = gaps.includes(null) ? null : Math.max(...(gaps as number[]));
  const simulated = backends.has("simulated");
  const notSampled = parts.filter((p) => p.energy.method !== "sampled");
  const notes: string[] = simulated ? [SIMULATED] : [];
  for (const p of notSampled.length === 0 ? parts : notSampled) {
    const reason = ownReason(p.energy.reason);
    if (reason !== null) notes.push(`${label(p)}: ${reason}`);
  }
  if (backends.size > 1)
    notes.push(`cards measured by ${parts.map((p) => `${p.index} ${p.energy.backend}`).join(", ")}`);
  let joules: number | null = null;
  let method: Energy["method"] = "sampled";
  if (notSampled.length === 0) {
    joules = total(energies.map((e) => e.joules));
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
  return new Energy({
    joules,
    method,
    backend,
    seconds: first.seconds,
    idleW: energies.reduce((s, e) => s + e.idleW, 0),
    tokens,
    stages,
    contendedBy: Object.freeze(contendedBy),
    contentionChecked,
    reason: notes.length === 0 ? null : notes.join("; "),
    measuredJoules,
    uncertaintyJoules,
    samples,
    maxGapMs,
    attribution: facts.attribution,
    concurrency,
    cardJoules: total(energies.map((e) => e.cardJoules)),
    cards: Object.freeze(parts.map(cardEnergy)),
  });
}
