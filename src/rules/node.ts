import { GiulError } from "../vocabulary/errors.js";
import { MAX_PLAUSIBLE_W } from "../vocabulary/measurement.js";
import { describeValue, firstUnknownKey, isFiniteIn, unknownKey } from "../vocabulary/validate.js";

/**
 * A node: the GPU (or the GPUs, tensor parallel) that requests are charged against, and what the
 * caller knows about it.
 *
 * `idleW` is the card's idle draw in watts, measured by the caller. giul never guesses, defaults
 * or learns it: a wrong idle floor silently rewrites every figure the node reports.
 */
export interface Node {
  /** A name for the node, carried into logs and records. */
  readonly name: string;
  /**
   * NVML / nvidia-smi index of the card, or the indices of every card a request runs on (tensor
   * parallel: `[0, 1, 2, 3]`; distinct). Default 0.
   */
  readonly gpuIndex?: number | readonly number[];
  /**
   * The card's idle draw in watts (finite, ≥ 0), or one per card of `gpuIndex`, in its order (one
   * number: every card's). Required.
   */
  readonly idleW: number | readonly number[];
  /** The card is in this host (meter it here). Default true. */
  readonly isLocal?: boolean;
  /** Base URL of a giul-agent on the node (e.g. "http://10.0.0.7:9402"), or null. */
  readonly powerEndpoint?: string | null;
  /**
   * How long open() may wait on the card (ms, 1..60000; default 500): its first probe, its
   * sampler's first sample. Past it the window opens unmeasured and says why. Also the timeout of
   * each request to the node's giul-agent.
   */
  readonly timeoutMs?: number;
  /**
   * What our own serving process looks like (a substring of its name, or a RegExp). A node that
   * sets none is dedicated: contention is never looked for.
   */
  readonly servingMatch?: string | RegExp | null;
  /** Process names that are never competitors (a display server, say). Matched by name, never size. */
  readonly contentionIgnore?: readonly string[];
  /** Resident processes using less memory than this (MiB) are too small to matter. Default 0. */
  readonly contentionFloorMib?: number;
  /**
   * Process lists are read at most once per this many ms per card, however many windows open and
   * close (a read serialises on the driver and can take milliseconds). Default 100.
   */
  readonly contentionIntervalMs?: number;
}

/** One card of a node: its index and its idle floor. */
export interface NodeCard {
  readonly gpuIndex: number;
  readonly idleW: number;
}

/** A validated node with every default filled in. */
export interface ResolvedNode {
  readonly name: string;
  /** The card's index (a node of several cards: the first's; see `cards`). */
  readonly gpuIndex: number;
  /** The card's idle floor (a node of several cards: the first's; see `cards`). */
  readonly idleW: number;
  /** Every card of the node, in order (one for a one-card node). */
  readonly cards: readonly NodeCard[];
  readonly isLocal: boolean;
  readonly powerEndpoint: string | null;
  readonly timeoutMs: number;
  readonly servingMatch: string | RegExp | null;
  readonly contentionIgnore: readonly string[];
  readonly contentionFloorMib: number;
  readonly contentionIntervalMs: number;
}

const KNOWN_KEYS: readonly (keyof Node)[] = [
  "name",
  "gpuIndex",
  "idleW",
  "isLocal",
  "powerEndpoint",
  "timeoutMs",
  "servingMatch",
  "contentionIgnore",
  "contentionFloorMib",
  "contentionIntervalMs",
];

function invalid(field: string, message: string): GiulError {
  return new GiulError("INVALID_NODE", `node.${field}: ${message}`, { field: `node.${field}` });
}

const describe = describeValue;

/**
 * Checks a node and fills in defaults. Throws a {@link GiulError} with code `INVALID_NODE` naming
 * the field at the first problem; these are programmer errors, reported at once.
 */
export function resolveNode(node: Node): ResolvedNode {
  if (resolvedNodes.has(node as object)) return node as ResolvedNode;
  if (node === null || typeof node !== "object" || Array.isArray(node)) {
    throw new GiulError("INVALID_NODE", `node: expected an object, got ${describe(node)}`, { field: "node" });
  }
  const unknown = firstUnknownKey(node, KNOWN_KEYS);
  if (unknown !== null) throw invalid(unknown, unknownKey(unknown, KNOWN_KEYS));
  const raw = node as Node & Record<string, unknown>;

  if (typeof raw.name !== "string" || raw.name.length === 0) {
    throw invalid("name", `expected a non-empty string, got ${describe(raw.name)}`);
  }
  const cards = resolveCards(raw.gpuIndex, raw.idleW);
  const isLocal = raw.isLocal ?? true;
  if (typeof isLocal !== "boolean") {
    throw invalid("isLocal", `expected a boolean, got ${describe(raw.isLocal)}`);
  }
  const powerEndpoint = raw.powerEndpoint ?? null;
  if (powerEndpoint !== null) {
    if (typeof powerEndpoint !== "string") {
      throw invalid("powerEndpoint", `expected a URL string or null, got ${describe(powerEndpoint)}`);
    }
    let url: URL;
    try {
      url = new URL(powerEndpoint);
    } catch {
      throw invalid("powerEndpoint", `not a valid URL: ${describe(powerEndpoint)}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw invalid("powerEndpoint", `expected an http:// or https:// URL, got ${describe(powerEndpoint)}`);
    }
  }
  if (!isLocal && powerEndpoint === null) {
    throw invalid(
      "powerEndpoint",
      "required when isLocal is false: the URL of the giul-agent on that node (a remote card cannot be metered from here otherwise)",
    );
  }
  const timeoutMs = raw.timeoutMs ?? 500;
  if (typeof timeoutMs !== "number" || !Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 60_000) {
    throw invalid("timeoutMs", `expected an integer from 1 to 60000 (ms), got ${describe(raw.timeoutMs)}`);
  }
  let servingMatch = raw.servingMatch ?? null;
  if (servingMatch instanceof RegExp && /[gy]/.test(servingMatch.flags)) {
    // A global or sticky RegExp's test() moves its lastIndex: alternate calls would disagree.
    servingMatch = new RegExp(servingMatch.source, servingMatch.flags.replace(/[gy]/g, ""));
  }
  if (servingMatch !== null && !(servingMatch instanceof RegExp)) {
    if (typeof servingMatch !== "string" || servingMatch.length === 0) {
      throw invalid(
        "servingMatch",
        `expected a non-empty string, a RegExp or null, got ${describe(servingMatch)}`,
      );
    }
  }
  const contentionIgnore = raw.contentionIgnore ?? [];
  if (!Array.isArray(contentionIgnore)) {
    throw invalid(
      "contentionIgnore",
      `expected an array of process names, got ${describe(contentionIgnore)}`,
    );
  }
  contentionIgnore.forEach((entry: unknown, i: number) => {
    if (typeof entry !== "string" || entry.length === 0) {
      throw invalid(`contentionIgnore[${i}]`, `expected a non-empty string, got ${describe(entry)}`);
    }
  });
  const contentionFloorMib = raw.contentionFloorMib ?? 0;
  if (
    typeof contentionFloorMib !== "number" ||
    !Number.isFinite(contentionFloorMib) ||
    contentionFloorMib < 0
  ) {
    throw invalid(
      "contentionFloorMib",
      `expected a finite number ≥ 0 (MiB), got ${describe(contentionFloorMib)}`,
    );
  }
  const contentionIntervalMs = raw.contentionIntervalMs ?? 100;
  if (!isFiniteIn(contentionIntervalMs, 1, 60_000)) {
    throw invalid(
      "contentionIntervalMs",
      `expected a number of ms from 1 to 60000, got ${describe(contentionIntervalMs)}`,
    );
  }
  const first = cards[0] as NodeCard;
  return resolved({
    name: raw.name,
    gpuIndex: first.gpuIndex,
    idleW: first.idleW,
    cards,
    isLocal,
    powerEndpoint,
    timeoutMs,
    servingMatch,
    contentionIgnore: Object.freeze([...contentionIgnore]),
    contentionFloorMib,
    contentionIntervalMs,
  });
}

/** What resolveNode() made: given back as it is (a resolved node is a valid node). */
const resolvedNodes = new WeakSet<object>();

function resolved(node: ResolvedNode): ResolvedNode {
  Object.freeze(node);
  resolvedNodes.add(node);
  return node;
}

/** The node's cards: `gpuIndex` and `idleW`, each one value or a list (one idleW for all cards). */
function resolveCards(rawIndex: unknown, rawIdle: unknown): readonly NodeCard[] {
  const indices = rawIndex === undefined ? [0] : Array.isArray(rawIndex) ? rawIndex : [rawIndex];
  if (indices.length === 0) throw invalid("gpuIndex", "expected at least one card index, got []");
  const seen = new Set<number>();
  indices.forEach((index: unknown, i: number) => {
    const field = Array.isArray(rawIndex) ? `gpuIndex[${i}]` : "gpuIndex";
    if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index > 1023) {
      throw invalid(field, `expected a non-negative integer, got ${describe(index)}`);
    }
    if (seen.has(index)) throw invalid(field, `card ${index} is listed twice`);
    seen.add(index);
  });
  if (rawIdle === undefined) {
    throw invalid(
      "idleW",
      "required: the card's idle draw in watts, measured by you (giul never guesses it; a wrong floor rewrites every figure)",
    );
  }
  let idles: readonly unknown[];
  if (Array.isArray(rawIdle)) {
    if (rawIdle.length !== indices.length) {
      throw invalid(
        "idleW",
        `expected one idle draw per card of gpuIndex (${indices.length}), or one number for all, got ${rawIdle.length}`,
      );
    }
    idles = rawIdle;
  } else {
    idles = indices.map(() => rawIdle);
  }
  return Object.freeze(
    indices.map((index, i) => {
      const idleW = idles[i];
      const field = Array.isArray(rawIdle) ? `idleW[${i}]` : "idleW";
      if (typeof idleW !== "number" || !Number.isFinite(idleW) || idleW < 0) {
        throw invalid(field, `expected a finite number ≥ 0 (watts), got ${describe(idleW)}`);
      }
      if (idleW > MAX_PLAUSIBLE_W) {
        throw invalid(
          field,
          `${idleW} W is more than any card draws (${MAX_PLAUSIBLE_W} W): a card's idle draw, in watts`,
        );
      }
      return Object.freeze({ gpuIndex: index as number, idleW });
    }),
  );
}

const cardNodes = new WeakMap<ResolvedNode, readonly ResolvedNode[]>();

/**
 * The node as one node per card, each with that card's index and floor (a one-card node: itself):
 * every per-card part of giul (backend choice, track, ledger, contention) takes one of these.
 */
export function nodesOfCards(node: ResolvedNode): readonly ResolvedNode[] {
  if (node.cards.length === 1) return [node];
  let nodes = cardNodes.get(node);
  if (nodes === undefined) {
    nodes = Object.freeze(
      node.cards.map((card) =>
        resolved({
          ...node,
          gpuIndex: card.gpuIndex,
          idleW: card.idleW,
          cards: Object.freeze([card]),
          // A remote node's cards are the agent's: each named to it by ?gpu=.
          powerEndpoint: node.powerEndpoint === null ? null : withGpu(node.powerEndpoint, card.gpuIndex),
        }),
      ),
    );
    cardNodes.set(node, nodes);
  }
  return nodes;
}

function withGpu(endpoint: string, gpuIndex: number): string {
  const url = new URL(endpoint);
  url.searchParams.set("gpu", String(gpuIndex));
  return url.href;
}
