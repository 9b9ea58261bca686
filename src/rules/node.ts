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
   * The card named by its UUID instead (`"GPU-8f3c…"`, as `nvidia-smi -L` prints it), or one per
   * card: the same card whatever CUDA_VISIBLE_DEVICES numbers it. Not with `gpuIndex`. A local
   * card is found by NVML when a window first opens on it; a remote one is named so to its agent.
   */
  readonly gpuUuid?: string | readonly string[];
  /**
   * The card's idle draw in watts (finite, ≥ 0), or one per card of `gpuIndex` (or `gpuUuid`), in its order (one
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

/** One card of a node: its index (or UUID) and its idle floor. */
export interface NodeCard {
  /** The card's index; −1 for a card named by UUID until a window has found it. */
  readonly gpuIndex: number;
  /** The UUID the node named the card by, or null where it named it by index. */
  readonly gpuUuid: string | null;
  readonly idleW: number;
}

/** A validated node with every default filled in. */
export interface ResolvedNode {
  readonly name: string;
  /** The card's index (a node of several cards: the first's; see `cards`); −1 for a card named by UUID. */
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
  "gpuUuid",
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

const checkedNodes = new WeakMap<Node, ResolvedNode>();

/** resolveNode(), checked once per frozen node (a server's node is one object for every window). */
export function resolveNodeOnce(node: Node): ResolvedNode {
  let r = typeof node === "object" && node !== null ? checkedNodes.get(node) : undefined;
  if (r === undefined) {
    r = resolveNode(node);
    if (Object.isFrozen(node)) checkedNodes.set(node, r);
  }
  return r;
}

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
  const cards = resolveCards(raw.gpuIndex, raw.gpuUuid, raw.idleW);
  const isLocal = raw.isLocal === undefined ? true : raw.isLocal;
  if (typeof isLocal !== "boolean") {
    throw invalid("isLocal", `expected a boolean, got ${describe(raw.isLocal)}`);
  }
  let powerEndpoint = raw.powerEndpoint ?? null;
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
  const named = (cards[0] as NodeCard).gpuUuid;
  if (cards.length === 1 && named !== null && powerEndpoint !== null && !isLocal) {
    // A remote card named by UUID: named so to its agent (a node of several cards: each part).
    powerEndpoint = withGpu(powerEndpoint, named);
  }
  const timeoutMs = raw.timeoutMs === undefined ? 500 : raw.timeoutMs;
  if (typeof timeoutMs !== "number" || !Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 60_000) {
    throw invalid("timeoutMs", `expected an integer from 1 to 60000 (ms), got ${describe(raw.timeoutMs)}`);
  }
  const servingMatch = raw.servingMatch ?? null;
  if (servingMatch instanceof RegExp && /[gy]/.test(servingMatch.flags)) {
    // A global or sticky RegExp's test() moves its lastIndex: alternate calls would disagree.
    const flags = servingMatch.flags.replace(/[gy]/g, "");
    throw invalid(
      "servingMatch",
      `${String(servingMatch)} is ${servingMatch.sticky && !servingMatch.global ? "sticky (y)" : "global (g)"}: its test() keeps lastIndex, so one process name would match and not match in turn; give it without g and y (/${servingMatch.source}/${flags})`,
    );
  }
  if (servingMatch !== null && !(servingMatch instanceof RegExp)) {
    if (typeof servingMatch !== "string" || servingMatch.length === 0) {
      throw invalid(
        "servingMatch",
        `expected a non-empty string, a RegExp or null, got ${describe(servingMatch)}`,
      );
    }
  }
  const contentionIgnore = raw.contentionIgnore === undefined ? [] : raw.contentionIgnore;
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
  const contentionFloorMib = raw.contentionFloorMib === undefined ? 0 : raw.contentionFloorMib;
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
  const contentionIntervalMs = raw.contentionIntervalMs === undefined ? 100 : raw.contentionIntervalMs;
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

/**
 * A card UUID as its vendor's tool prints it (NVIDIA's GPU-…, MIG-…; AMD's bare hex UUID, which may
 * begin with a digit): no spaces, no URL or label syntax; never a bare number (an index).
 */
export const CARD_UUID =
  /^(?:(?!\d+$)[A-Za-z0-9][A-Za-z0-9_.:-]{0,95}|MIG-GPU-[A-Za-z0-9-]{1,90}\/\d{1,5}\/\d{1,5})$/;

/** The cards a node names: by `gpuIndex` (default 0) or by `gpuUuid`, one value or a list. */
function cardNames(
  rawIndex: unknown,
  rawUuid: unknown,
): { field: string; names: readonly (number | string)[] } {
  if (rawIndex !== undefined && rawUuid !== undefined) {
    throw invalid("gpuUuid", "name the cards by gpuIndex or by gpuUuid, not both");
  }
  const byUuid = rawUuid !== undefined;
  const field = byUuid ? "gpuUuid" : "gpuIndex";
  const raw = byUuid ? rawUuid : rawIndex;
  const names = raw === undefined ? [0] : Array.isArray(raw) ? raw : [raw];
  if (names.length === 0)
    throw invalid(field, `expected at least one card ${byUuid ? "UUID" : "index"}, got []`);
  const seen = new Set<unknown>();
  names.forEach((name: unknown, i: number) => {
    const at = Array.isArray(raw) ? `${field}[${i}]` : field;
    if (byUuid && (typeof name !== "string" || !CARD_UUID.test(name))) {
      throw invalid(
        at,
        `expected a card's or MIG slice's UUID as nvidia-smi -L or amd-smi list prints it (GPU-…, MIG-…, an AMD card's UUID), got ${describe(name)}`,
      );
    }
    if (
      !byUuid &&
      (typeof name !== "number" || !Number.isInteger(name) || name < 0 || name > 1023 || Object.is(name, -0))
    ) {
      throw invalid(at, `expected a non-negative integer, got ${describe(name)}`);
    }
    if (seen.has(name)) throw invalid(at, `card ${name} is listed twice`);
    seen.add(name);
  });
  return { field, names: names as (number | string)[] };
}

/** The node's cards and their idle floors (`idleW`: one for all cards, or one per card). */
function resolveCards(rawIndex: unknown, rawUuid: unknown, rawIdle: unknown): readonly NodeCard[] {
  const { field: namedBy, names } = cardNames(rawIndex, rawUuid);
  if (rawIdle === undefined) {
    throw invalid(
      "idleW",
      "required: the card's idle draw in watts, measured by you (giul never guesses it; a wrong floor rewrites every figure)",
    );
  }
  let idles: readonly unknown[];
  if (Array.isArray(rawIdle)) {
    if (rawIdle.length !== names.length) {
      throw invalid(
        "idleW",
        `expected one idle draw per card of ${namedBy} (${names.length}), or one number for all, got ${rawIdle.length}`,
      );
    }
    idles = rawIdle;
  } else {
    idles = names.map(() => rawIdle);
  }
  return Object.freeze(
    names.map((name, i) => {
      const idleW = idles[i];
      const field = Array.isArray(rawIdle) ? `idleW[${i}]` : "idleW";
      if (typeof idleW !== "number" || !Number.isFinite(idleW) || idleW < 0 || Object.is(idleW, -0)) {
        throw invalid(field, `expected a finite number ≥ 0 (watts), got ${describe(idleW)}`);
      }
      if (idleW > MAX_PLAUSIBLE_W) {
        throw invalid(
          field,
          `${idleW} W is more than any card draws (${MAX_PLAUSIBLE_W} W): a card's idle draw, in watts`,
        );
      }
      return typeof name === "string"
        ? Object.freeze({ gpuIndex: -1, gpuUuid: name, idleW })
        : Object.freeze({ gpuIndex: name, gpuUuid: null, idleW });
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
          powerEndpoint:
            node.powerEndpoint === null ? null : withGpu(node.powerEndpoint, card.gpuUuid ?? card.gpuIndex),
        }),
      ),
    );
    cardNodes.set(node, nodes);
  }
  return nodes;
}

function withGpu(endpoint: string, gpu: number | string): string {
  const url = new URL(endpoint);
  url.searchParams.set("gpu", String(gpu));
  return url.href;
}

const indexNodes = new WeakMap<ResolvedNode, ResolvedNode>();

/**
 * A one-card node named by UUID, with the index its card was found at on this host: what the
 * per-card parts of giul that address a card by index take. The same object for the same node.
 */
export function withFoundIndex(node: ResolvedNode, gpuIndex: number): ResolvedNode {
  const hit = indexNodes.get(node);
  if (hit !== undefined && hit.gpuIndex === gpuIndex) return hit;
  const card = node.cards[0] as NodeCard;
  const found = resolved({ ...node, gpuIndex, cards: Object.freeze([Object.freeze({ ...card, gpuIndex })]) });
  indexNodes.set(node, found);
  return found;
}
