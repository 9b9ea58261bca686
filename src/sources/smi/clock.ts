/**
 * nvidia-smi's clock mapped onto CLOCK_MONOTONIC, so that the smi_sampler places each row at the
 * instant nvidia-smi took the reading, not when this process got to read it: in a busy server the
 * event loop reads the pipe tens of ms late, and irregularly, and the power often rises exactly
 * while it is busy (the load that keeps it busy is the GPU's load), so arrival times would shift
 * the integral where it matters. The query asks for `timestamp` (nvidia-smi's wall clock at the
 * query, `YYYY/MM/DD HH:MM:SS.mmm`, local time), and {@link SmiClock} maps it onto CLOCK_MONOTONIC
 * with an offset estimated from the stream itself: a row's arrival minus its stamp is the clocks'
 * offset plus that row's delay (the pipe, the event loop) and a row can only arrive late, never
 * early, so the smallest such difference over the last {@link OFFSET_WINDOW_MS} ms is the offset
 * plus the smallest delay seen (about a ms when the loop was free at least once). The zone cancels
 * in the difference; a step of the wall clock (settimeofday, a DST change) forward lowers the
 * differences and is followed at once, one backward shows as a stamp that goes back or an
 * iteration closer than half a period to the last one, and restarts the estimate. NTP slewing
 * moves CLOCK_MONOTONIC with the wall clock on Linux, and elsewhere drifts by well under a ms over
 * the window. The stamp has a ms resolution (a reading is placed up to 1 ms early), far below the
 * 100 ms periods used.
 *
 * A row without a usable timestamp (a replayed capture, `[N/A]`, garbage) falls back
 * ({@link RowPlacer}): placed on the period grid after the last row that had one (never after its
 * arrival), or with none, at its arrival, with bunching corrected: when several iterations arrive
 * in one chunk, iteration j of n is stamped (n − 1 − j) periods before the arrival, so the samples
 * keep their spacing instead of piling up on one instant. The times handed out never go back.
 */
import { debug } from "../../vocabulary/debug.js";
import type { SmiStamp } from "./parse.js";

/** The span of rows over which the offset between nvidia-smi's wall clock and CLOCK_MONOTONIC is taken. */
export const OFFSET_WINDOW_MS = 15_000;

/**
 * Maps nvidia-smi's timestamps (its wall clock, whole ms) onto CLOCK_MONOTONIC: a reading stamped
 * `wall` is placed at `wall + min(arrival_i − wall_i)` over the rows that arrived in the last
 * `windowMs` (see the module's comment). The minimum is kept in a monotone queue (O(1) a row).
 * The estimate restarts on a step of the wall clock: a stamp earlier than the last one, or an
 * iteration less than half a period after the previous (nvidia-smi sleeps a period between
 * queries). A step forward needs no detection: it lowers the differences, and the minimum takes
 * the new one at once. A step back smaller than half a period goes unseen, and places readings up
 * to that much early until the rows from before it leave the window.
 */
export class SmiClock {
  private readonly windowNs: bigint;
  /** Rows in the window whose difference is below every later one's: differences increase. */
  private arrivals: bigint[] = [];
  private offsets: bigint[] = [];
  private first = 0;
  private lastWallNs: bigint | null = null;
  private iterationWallNs: bigint | null = null;
  private fresh = false;
  /** Steps detected (each restarted the estimate). */
  steps = 0;

  constructor(windowMs = OFFSET_WINDOW_MS) {
    this.windowNs = BigInt(Math.round(windowMs * 1e6));
  }

  /**
   * The next row is a new child's first: it is not held to the period grid of the last child's
   * rows, and may be read up to a period before the last of them (the two overlap when the period
   * changes).
   */
  newStream(): void {
    this.iterationWallNs = null;
    this.fresh = true;
  }

  /** The current estimate of CLOCK_MONOTONIC − wall clock (ns), or null before any row. */
  offsetNs(): bigint | null {
    return this.first < this.offsets.length ? (this.offsets[this.first] as bigint) : null;
  }

  /**
   * The CLOCK_MONOTONIC instant (ns) of a reading stamped `wallMs` ({@link SmiStamp}) whose row
   * arrived at `arrivalNs`. `startsIteration`: the row is the first of an iteration of the loop,
   * whose period is `periodNs`. Never later than `arrivalNs`.
   */
  map(arrivalNs: bigint, wallMs: number, startsIteration: boolean, periodNs: bigint): bigint {
    const wallNs = BigInt(wallMs) * 1_000_000n;
    const back = this.lastWallNs !== null && wallNs < this.lastWallNs - (this.fresh ? periodNs : 0n);
    const tooSoon =
      startsIteration && this.iterationWallNs !== null && wallNs - this.iterationWallNs < periodNs / 2n;
    this.fresh = false;
    if (back || tooSoon) {
      this.steps += 1;
      this.arrivals = [];
      this.offsets = [];
      this.first = 0;
    }
    this.lastWallNs = wallNs;
    if (startsIteration || this.iterationWallNs === null) this.iterationWallNs = wallNs;

    const offset = arrivalNs - wallNs;
    while (this.offsets.length > this.first && (this.offsets[this.offsets.length - 1] as bigint) >= offset) {
      this.offsets.pop();
      this.arrivals.pop();
    }
    this.offsets.push(offset);
    this.arrivals.push(arrivalNs);
    const oldest = arrivalNs - this.windowNs;
    while ((this.arrivals[this.first] as bigint) < oldest) this.first += 1;
    if (this.first > 256 && this.first * 2 > this.offsets.length) {
      this.offsets = this.offsets.slice(this.first);
      this.arrivals = this.arrivals.slice(this.first);
      this.first = 0;
    }
    return wallNs + (this.offsets[this.first] as bigint);
  }
}

/** Iterations after the last stamped row for which an unstamped row is placed on its grid. */
const GRID_ITERATIONS = 5;

/** Where one child's stream of rows stands, as far as placing them in time goes. */
export interface StreamPosition {
  /** Iterations of the loop seen before the current one. */
  readonly iteration: number;
  /** The iteration and time of the last row placed by its timestamp, or null. */
  lastStamped: { iteration: number; t: bigint } | null;
}

/** What placing rows counts (fields of the sampler's counters). */
export interface PlacementCounts {
  /** Rows placed by nvidia-smi's own timestamp, and those placed without one (missing or bad). */
  stamped: number;
  unstamped: number;
  /** Rows whose timestamp did not parse. */
  badStamps: number;
  /** Steps of the wall clock seen in the timestamps (the offset estimate restarted). */
  clockSteps: number;
}

/**
 * The instant of each row of nvidia-smi's output on CLOCK_MONOTONIC: by its timestamp through
 * {@link SmiClock} where it has a good one, else by the fallbacks of the module's comment. One for
 * every child of a sampler: the times it hands out never go back.
 */
export class RowPlacer {
  private readonly wall = new SmiClock();
  private last = 0n;

  constructor(private readonly counts: PlacementCounts) {}

  /**
   * A card's row stamped `stamp` (null: the query has no timestamp), of iteration `iteration` of
   * `stream` (`starts`: the first row of that iteration), in a chunk that arrived at `arrival`.
   */
  row(
    stream: StreamPosition,
    stamp: SmiStamp | null,
    arrival: bigint,
    iteration: number,
    starts: boolean,
    periodNs: bigint,
  ): bigint {
    if (stamp === null || !stamp.ok) {
      if (stamp !== null) this.counts.badStamps += 1;
      return this.unstamped(stream, arrival, iteration, periodNs);
    }
    if (stream.lastStamped === null) this.wall.newStream();
    const steps = this.wall.steps;
    const t = this.wall.map(arrival, stamp.wallMs, starts, periodNs);
    if (this.wall.steps !== steps) {
      this.counts.clockSteps += 1;
      debug("smi: the wall clock stepped; offset estimate restarted");
    }
    this.counts.stamped += 1;
    stream.lastStamped = { iteration, t };
    return this.monotone(t);
  }

  /**
   * A row without a usable timestamp: on the period grid after the stream's last stamped row (not
   * after the arrival), or, with none, `back` periods before the arrival, `back` being the
   * iterations after it in the same chunk.
   */
  unstamped(stream: StreamPosition, arrival: bigint, iteration: number, periodNs: bigint): bigint {
    this.counts.unstamped += 1;
    const last = stream.lastStamped;
    // The grid holds for a few iterations only: nvidia-smi sleeps a period after each query, so
    // its iterations are a little longer than the period and the grid falls behind.
    if (last !== null && iteration - last.iteration <= GRID_ITERATIONS) {
      const t = last.t + BigInt(iteration - last.iteration) * periodNs;
      return this.monotone(t < arrival ? t : arrival);
    }
    return this.monotone(arrival - BigInt(stream.iteration - iteration) * periodNs);
  }

  /** An instant that is not a row (the child's death, say): `t`, kept in order with the rows. */
  arrived(t: bigint): bigint {
    return this.monotone(t);
  }

  /** `t`, or the last time handed out if that is later. */
  private monotone(t: bigint): bigint {
    if (t < this.last) t = this.last;
    this.last = t;
    return t;
  }
}
