/**
 * What giul-probe says of each card's sensors after watching them for a few seconds: how often the
 * energy counter updates (median and spread of its update intervals), how often the power reading
 * refreshes, and whether bars use a lock onto the counter's cadence now. All of it is what the
 * fused counter (src/edges/fusion.ts) has seen, read through the track a Meter would use: the same
 * evidence the bars are built from, not a separate measurement.
 */
import { COARSE, MIN_LOCK } from "../edges/cadence.js";
import type { FusionReport } from "../edges/fusion.js";
import { RingTrack } from "../ring/ring-track.js";
import { resolveNode } from "../rules/node.js";
import { select } from "../select/index.js";
import { whileAlive } from "../vocabulary/alive.js";
import type { BackendName } from "../vocabulary/measurement.js";

/** One card's sensors as watched (times in ms). */
export interface SensorSeen {
  /** How long the card was watched (s). */
  readonly seconds: number;
  readonly backend: BackendName;
  /** Least, median and most of the counter's recent update intervals; null without a counter or before two updates. */
  readonly counterUpdateMs: {
    readonly least: number;
    readonly median: number;
    readonly most: number;
    readonly updates: number;
  } | null;
  /**
   * The counter changed at every read (it updates faster than it is read: AMD's, every ms or so),
   * so no update interval can be timed; null without a counter.
   */
  readonly counterChangesEveryRead?: boolean | null;
  /**
   * The power reading: refreshes at least every `atMostMs`; its shortest and median run of one
   * value (the median about its refresh where it holds its readings, about a read where it does not).
   */
  readonly powerRefreshMs: {
    readonly atMostMs: number;
    readonly shortestRunMs: number;
    readonly medianRunMs: number;
  } | null;
  /**
   * Whether bars place the counter's updates by its cadence: `locked` (to within `lockMs`),
   * `learning` (fewer updates seen than a lock needs), `coarse` (read too seldom for its updates:
   * each is placed by the reads around it), `irregular` (no cadence fits the updates: the same),
   * `none` (no counter read on this card).
   */
  readonly cadenceLock: "locked" | "learning" | "coarse" | "irregular" | "none";
  readonly lockMs: number | null;
  /** What bounds edges now (the fused counter's basis), or why nothing was seen. */
  readonly bounding: string;
}

const ms = (ns: number) => ns / 1e6;

/** The sensors of `report` (null: the track fuses no counter), watched for `seconds`. */
export function sensorSeen(report: FusionReport | null, backend: BackendName, seconds: number): SensorSeen {
  if (report === null) {
    return {
      seconds,
      backend,
      counterUpdateMs: null,
      counterChangesEveryRead: null,
      powerRefreshMs: null,
      cadenceLock: "none",
      lockMs: null,
      bounding: `no energy counter is read (${backend})`,
    };
  }
  const c = report.counter;
  const u = c.updateIntervalNs;
  const locked = c.periodNs !== null && !c.irregular && c.lockedNs < c.readIntervalNs;
  const coarse = u !== null && c.readIntervalNs > COARSE * u.median;
  return {
    seconds,
    backend,
    counterUpdateMs:
      u === null ? null : { least: ms(u.least), median: ms(u.median), most: ms(u.most), updates: u.count },
    counterChangesEveryRead: c.changeEveryRead,
    powerRefreshMs: Number.isFinite(report.refreshUpperNs)
      ? {
          atMostMs: ms(report.refreshUpperNs),
          shortestRunMs: ms(report.shortestRunNs),
          medianRunMs: ms(report.medianRunNs),
        }
      : null,
    cadenceLock: c.irregular ? "irregular" : locked ? "locked" : coarse ? "coarse" : "learning",
    lockMs: locked ? ms(c.lockedNs) : null,
    bounding: report.bounding,
  };
}

/** A card to watch: its index, its UUID where known (then named by it), and the key of what is seen. */
export interface WatchedCard {
  readonly key: string;
  readonly index: number;
  readonly uuid: string | null;
}

/** Watches every card at once for `seconds`, through the track a Meter would use; by card key. */
export async function watchSensors(
  cards: readonly WatchedCard[],
  seconds: number,
  forced: BackendName | null,
): Promise<Map<string, SensorSeen | string>> {
  const seen = new Map<string, SensorSeen | string>();
  const watched: { index: string; backend: BackendName; track: RingTrack }[] = [];
  for (const card of cards) {
    const index = card.key;
    // By UUID where known: on a host with both vendors' cards an index could name either.
    const named = card.uuid !== null ? { gpuUuid: card.uuid } : { gpuIndex: card.index };
    const node = resolveNode({ name: `probe-gpu${card.index}`, ...named, idleW: 0 });
    const selection = await whileAlive(select(node, forced));
    if (selection.track === null) {
      seen.set(index, selection.reason ?? `not read (${selection.backend})`);
      continue;
    }
    if (!(selection.track instanceof RingTrack)) {
      seen.set(index, `not watched: ${selection.backend} reads no samples here`);
      continue;
    }
    selection.track.retain(10);
    watched.push({ index, backend: selection.backend, track: selection.track });
  }
  if (watched.length === 0) return seen;
  await whileAlive(Promise.all(watched.map((w) => w.track.ready())));
  await whileAlive(new Promise((done) => setTimeout(done, seconds * 1000)));
  for (const w of watched) {
    seen.set(w.index, sensorSeen(w.track.fusionReport(), w.backend, seconds));
    w.track.release();
  }
  return seen;
}

const f = (x: number) => (x >= 10 ? x.toFixed(0) : x.toFixed(1));

/** The rows giul-probe prints for a card's sensors. */
export function sensorRows(seen: SensorSeen | string): Array<readonly [string, string]> {
  if (typeof seen === "string") return [["sensors", seen]];
  const u = seen.counterUpdateMs;
  const p = seen.powerRefreshMs;
  const counter =
    seen.cadenceLock === "none"
      ? "not read"
      : u === null
        ? seen.counterChangesEveryRead === true
          ? "at every read: faster than it is read, so no interval can be timed"
          : `not seen to update in ${seen.seconds} s`
        : `every ${f(u.median)} ms (median of ${Math.min(u.updates, 64)} well-read updates; ${f(u.least)}–${f(u.most)} ms)`;
  const lock = {
    locked: `yes: each update placed to within ${seen.lockMs?.toFixed(2)} ms`,
    learning: `not yet (a lock needs ${MIN_LOCK} updates that agree)`,
    coarse: "no: read too seldom for its updates, each is placed by the reads around it",
    irregular: "no: the updates fit no cadence, each is placed by the reads around it",
    none: "no counter",
  }[seen.cadenceLock];
  return [
    [`counter updates`, counter],
    [
      `power refreshes`,
      p === null
        ? "not seen"
        : `at least every ${f(p.atMostMs)} ms (each value held ${f(p.medianRunMs)} ms at the median, ${f(p.shortestRunMs)} ms the shortest)`,
    ],
    [`cadence lock`, lock],
    [`bars bounded by`, `${seen.bounding} (watched ${seen.seconds} s)`],
  ];
}
