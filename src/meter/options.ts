/**
 * The options of a window (Meter.forNode, mark, result, measure): their types, and the checks that
 * turn a caller's mistake into a GiulError naming the field, at once.
 */
import type { Attribution } from "../rules/energy.js";
import { GiulError } from "../vocabulary/errors.js";
import { describeValue, firstUnknownKey, isFiniteIn, unknownKey } from "../vocabulary/validate.js";

/** Options of {@link Meter.forNode}. */
export interface MeterOptions {
  /**
   * Joules per 1,000 tokens to estimate from when a window cannot be measured. Without it (or
   * without a token count) an unmeasurable window is `unknown`.
   */
  readonly joulesPer1kHint?: number | null;
  /**
   * Awaited before the closing edge is taken: synchronise the GPU here when the work is local
   * (the energy counter only counts work the card has finished). An HTTP upstream needs none.
   */
  readonly sync?: (() => unknown) | null;
  /**
   * Sampling period in ms, 1..1000. Default 5. The card's sampler runs at the shortest asked (and
   * every 2 ms for its first 250 ms, to bound how often the card's energy counter updates).
   * Besides its period it reads right after each window's edge (on the native backends), at most
   * 4 times per period: a longer period costs fewer reads in a crowd of windows. A shorter one
   * places energy more finely inside the energy counter's steps (README, "How accurate is it?").
   */
  readonly periodMs?: number;
  /**
   * On a node with `servingMatch`, also look for tenants during the window (at the node's
   * `contentionIntervalMs`, shared with every window on the card), not only at its two edges.
   */
  readonly watchContention?: boolean;
  /**
   * How the card is charged when other windows of this process are open on it at the same time.
   * `"shared"` (the default): at every instant the card's energy above idle is split among the
   * open windows in proportion to their weights, so the shares add up to the card. `"exclusive"`:
   * the whole card above idle over the window (giul 0.2's figure, for fleet comparisons); a window
   * that overlapped another is then witnessed, not measured.
   */
  readonly attribution?: Attribution;
  /**
   * This window's weight in the split (finite, > 0; default 1): e.g. tokens in flight or KV-cache
   * blocks held. Change it while the window is open with {@link Meter.setWeight}.
   */
  readonly weight?: number;
  /**
   * How long close() waits for `sync` (ms; default 60,000). Past it the closing edge is taken
   * anyway, the window says why, and close() resolves: a hook that never settles cannot hold the
   * request.
   */
  readonly syncTimeoutMs?: number;
}

export const METER_OPTIONS: readonly (keyof MeterOptions)[] = [
  "joulesPer1kHint",
  "sync",
  "periodMs",
  "watchContention",
  "attribution",
  "weight",
  "syncTimeoutMs",
];
export const TOKEN_OPTIONS: readonly string[] = ["tokens"];

export interface MarkOptions {
  /** Tokens produced in this stage, so that it can be estimated if it cannot be measured. */
  readonly tokens?: number | null;
}

export interface ResultOptions {
  /** Tokens the answer produced (for the estimate and for joules per 1k tokens). */
  readonly tokens?: number | null;
}

export interface MeasureOptions<T> {
  /** Tokens the answer produced, or a function of fn's value that says. */
  readonly tokens?: number | null | ((value: T) => number | null | undefined);
}

export function optionError(field: string, message: string): GiulError {
  return new GiulError("INVALID_OPTION", `${field}: ${message}`, { field });
}

export function checkTokens(field: string, tokens: unknown): number | null {
  if (tokens === undefined || tokens === null) return null;
  if (typeof tokens !== "number" || !Number.isSafeInteger(tokens) || tokens < 0) {
    throw optionError(field, `expected a whole number of tokens ≥ 0, got ${describeValue(tokens)}`);
  }
  return tokens;
}

/** What checkOptions() gives for no options: one object (read, never written), not one per call. */
const NO_OPTIONS: Readonly<Record<string, never>> = Object.freeze({});

/**
 * The options object of a call (`undefined` and `null` are no options): an object whose keys are
 * all known, else a GiulError naming the key and the one meant.
 */
export function checkOptions<T extends object>(
  what: string,
  options: unknown,
  known: readonly string[],
): Partial<T> {
  if (options === undefined || options === null) return NO_OPTIONS as Partial<T>;
  if (typeof options !== "object" || Array.isArray(options)) {
    throw optionError(what, `expected an object, got ${describeValue(options)}`);
  }
  const unknown = firstUnknownKey(options, known);
  if (unknown !== null) throw optionError(unknown, unknownKey(unknown, known));
  return options as Partial<T>;
}

export function checkWeight(field: string, weight: unknown): number {
  if (typeof weight !== "number" || !Number.isFinite(weight) || weight <= 0) {
    throw optionError(field, `expected a finite number > 0, got ${describeValue(weight)}`);
  }
  return weight;
}

/** The options of a window, checked, with their defaults. */
export interface ResolvedMeterOptions {
  readonly hint: number | null;
  readonly sync: (() => unknown) | null;
  readonly periodMs: number;
  readonly watchContention: boolean;
  readonly syncTimeoutMs: number;
  readonly attribution: Attribution;
  readonly weight: number;
}

const ATTRIBUTIONS: readonly Attribution[] = ["shared", "exclusive"];

/** Checks a window's options (throws GiulError naming the field) and fills in the defaults. */
/**
 * The Meter's sampling period by default (ms): short enough to place energy inside a counter's
 * steps on a load that swings every few tens of ms; the sampling thread pays for it, not the event
 * loop.
 */
export const DEFAULT_PERIOD_MS = 5;

export function resolveMeterOptions(options: Partial<MeterOptions>): ResolvedMeterOptions {
  const hint = options.joulesPer1kHint ?? null;
  if (hint !== null && (typeof hint !== "number" || !Number.isFinite(hint) || hint < 0)) {
    throw optionError(
      "joulesPer1kHint",
      `expected a finite number ≥ 0 (J per 1,000 tokens), got ${describeValue(hint)}`,
    );
  }
  const sync = options.sync ?? null;
  if (sync !== null && typeof sync !== "function") {
    throw optionError("sync", `expected a function (sync or async), got ${describeValue(sync)}`);
  }
  const periodMs = options.periodMs ?? DEFAULT_PERIOD_MS;
  if (typeof periodMs !== "number" || !Number.isInteger(periodMs) || periodMs < 1 || periodMs > 1000) {
    throw optionError("periodMs", `expected an integer from 1 to 1000, got ${describeValue(periodMs)}`);
  }
  const watch = options.watchContention ?? false;
  if (typeof watch !== "boolean")
    throw optionError("watchContention", `expected a boolean, got ${describeValue(watch)}`);
  const syncTimeoutMs = options.syncTimeoutMs ?? 60_000;
  if (!isFiniteIn(syncTimeoutMs, 1, 86_400_000)) {
    throw optionError(
      "syncTimeoutMs",
      `expected a number of ms from 1 to 86400000, got ${describeValue(syncTimeoutMs)}`,
    );
  }
  const attribution = options.attribution ?? "shared";
  if (!ATTRIBUTIONS.includes(attribution)) {
    throw optionError("attribution", `expected "shared" or "exclusive", got ${describeValue(attribution)}`);
  }
  const weight = options.weight === undefined ? 1 : checkWeight("weight", options.weight);
  return { hint, sync, periodMs, watchContention: watch, syncTimeoutMs, attribution, weight };
}

/** The longest stage name mark() takes: it is copied into every record and log line. */
export const MAX_STAGE_NAME = 256;

/** mark()'s name: a non-empty string of at most MAX_STAGE_NAME characters (throws naming `name`). */
export function checkStageName(name: unknown): asserts name is string {
  if (typeof name !== "string" || name.length === 0) {
    throw optionError("name", `mark() needs a non-empty stage name, got ${describeValue(name)}`);
  }
  if (name.length > MAX_STAGE_NAME) {
    throw optionError("name", `a stage name is at most ${MAX_STAGE_NAME} characters, got ${name.length}`);
  }
}

/** Above this idle floor (W), on a card whose power limit is not known, giul warns once. */
const UNCHECKED_IDLE_WARN_W = 1500;
const warnedIdle = new Set<string>();

/**
 * The node's idleW against its card: a GiulError naming idleW when it is above the power limit
 * the card enforces (an idle floor cannot exceed what the card may draw); where no limit is known,
 * a warning (once per node name) for a floor above any single card's draw today; else null.
 */
export function checkIdleAgainstCard(
  node: { readonly name: string; readonly idleW: number },
  selection: { readonly powerLimitW?: number | null } | null,
): GiulError | null {
  const limit = selection?.powerLimitW ?? null;
  if (limit !== null) {
    if (node.idleW <= limit) return null;
    return new GiulError(
      "INVALID_NODE",
      `idleW: ${node.idleW} W is above the ${limit} W power limit that node ${JSON.stringify(node.name)}'s card ` +
        "enforces: an idle floor is what the card draws doing nothing (npx giul-probe --idle measures it)",
      { field: "idleW" },
    );
  }
  if (node.idleW > UNCHECKED_IDLE_WARN_W && !warnedIdle.has(node.name)) {
    warnedIdle.add(node.name);
    process.emitWarning(
      `giul: node ${JSON.stringify(node.name)} has idleW ${node.idleW} W, more than any single card idles at, ` +
        "and its card's power limit is not known to check it against",
      { code: "GIUL_IDLE_UNCHECKED" },
    );
  }
  return null;
}
