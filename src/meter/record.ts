/**
 * A closed window's record: the rules (../rules/energy.ts charge()) applied to what close()
 * measured, for the total and each stage, with what the window knows besides the measurement.
 */
import { type Attribution, type ChargeContext, charge, type Energy, withPartition } from "../rules/energy.js";
import { partitionNote } from "../select/mig.js";
import type { BackendName, ContendingProcess, Partition } from "../vocabulary/measurement.js";
import type { Outcome, SpanOutcome } from "./measure.js";

/** What the window knows besides its measurement (the Meter). */
export interface RecordFacts {
  readonly backend: BackendName;
  readonly idleW: number;
  readonly joulesPer1kHint: number | null;
  readonly contendedBy: readonly ContendingProcess[] | null;
  readonly contentionUnchecked: string | null;
  /** The node names a serving process (contention is witnessed). */
  readonly shared: boolean;
  readonly attribution: Attribution;
  /** One card's part of a window over several cards: never estimated on its own. */
  readonly part?: boolean;
  /** The MIG slice the window is on (its record says so), or null for a whole card. */
  readonly partition?: Partition | null;
}

const NO_STAGES: Readonly<Record<string, Energy>> = Object.freeze({});
/** One object for every call: charge() runs to completion and keeps none of it. */
const CONTEXT: { -readonly [K in keyof ChargeContext]: ChargeContext[K] } = {
  backend: "none",
  seconds: 0,
  idleW: 0,
  tokens: null,
  joulesPer1kHint: null,
  contendedBy: null,
  contentionUnchecked: null,
  shared: false,
  stages: NO_STAGES,
  attribution: "shared",
  concurrency: null,
  part: false,
};

/** The window's Energy: each stage charged, then the total over the whole window (never their sum). */
export function chargeOutcome(outcome: Outcome, facts: RecordFacts, tokens: number | null): Energy {
  const stages: Record<string, Energy> = {};
  for (const stage of outcome.stages) {
    stages[stage.name] = charge(stage.measurement, context(facts, outcome, stage, stage.tokens, NO_STAGES));
  }
  const energy = charge(outcome.total.measurement, context(facts, outcome, outcome.total, tokens, stages));
  // The shared context keeps no window's records alive.
  CONTEXT.stages = NO_STAGES;
  CONTEXT.contendedBy = null;
  CONTEXT.concurrency = null;
  const partition = facts.partition ?? null;
  return partition === null ? energy : withPartition(energy, partition, partitionNote(partition));
}

function context(
  facts: RecordFacts,
  outcome: Outcome,
  span: SpanOutcome,
  tokens: number | null,
  stages: Readonly<Record<string, Energy>>,
): ChargeContext {
  const c = CONTEXT;
  c.backend = facts.backend;
  c.seconds = span.seconds;
  // The floor the card was charged at: the node's, or the card's where windows elsewhere set it.
  c.idleW = outcome.idleW ?? facts.idleW;
  c.tokens = tokens;
  c.joulesPer1kHint = facts.joulesPer1kHint;
  c.contendedBy = facts.contendedBy;
  c.contentionUnchecked = facts.contentionUnchecked;
  c.shared = facts.shared;
  c.stages = stages;
  c.attribution = facts.attribution;
  c.concurrency = span.concurrency;
  c.part = facts.part === true;
  return c;
}
