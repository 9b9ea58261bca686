/**
 * The amdsmi_cli backend's engine: one long-lived `amd-smi metric --power --energy --json --watch 1`
 * child per process (run by a {@link Supervisor}), shared by every AMD card, each iteration written
 * into each card's {@link JsRing}: the energy counter (in exact 2^-16 J, ./amd-parse.ts) and socket
 * power (whole watts). For hosts where the addon or libamd_smi cannot be used.
 *
 * Time. amd-smi prints no timestamp: an iteration's reads happened after the sleep that followed
 * the previous iteration's output, and before its own output arrived. Each sample is stamped at
 * the middle of that interval and says how long it is (readNs), so that edges are bounded by it.
 */
import { JsRing } from "../../ring/js-ring.js";
import type { SampleRing } from "../../track/ring.js";
import { debug } from "../../vocabulary/debug.js";
import { fail, ok, type Result } from "../../vocabulary/measurement.js";
import { EXACT_PER_PRINTED, JsonFrames, parseAmdMetric } from "./amd-parse.js";
import { findAmdSmi } from "./path.js";
import { type ChildEnd, type ChildEvents, type SupervisedChild, Supervisor } from "./supervisor.js";

/** The codes a card's failed samples carry. */
export const AMD_SMI_ERROR = { NA: 1, NOT_LISTED: 2, UNREADABLE: 3, STOPPED: 4 } as const;

/** amd-smi's shortest --watch interval (s): it sleeps whole seconds between iterations. */
const WATCH_S = 1;
/** amd-smi (Python) can take seconds to print its first iteration. */
const FIRST_OUTPUT_MS = 20_000;

interface ChildState {
  readonly frames: JsonFrames;
  readonly spawnedAt: bigint;
  lastArrival: bigint | null;
  iterations: number;
}

export interface AmdSmiSamplerOptions {
  /** The amd-smi to run. Default: {@link findAmdSmi} of `env`, at each start. */
  readonly path?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** CLOCK_MONOTONIC ns. Default: process.hrtime.bigint. */
  readonly clock?: () => bigint;
}

export class AmdSmiSampler {
  private readonly supervisor: Supervisor<ChildState>;
  private readonly clock: () => bigint;
  private readonly cards = new Map<number, { ring: JsRing; holders: Set<object> }>();
  private child: SupervisedChild<ChildState> | null = null;
  /** Why the last child ended, for the samples that say so. */
  private lastStop = "amd-smi has not started";
  private readonly events: ChildEvents<ChildState> = {
    lines: (child, lines, arrival) => {
      for (const line of lines)
        for (const frame of child.state.frames.push(line)) this.iteration(child, frame, arrival);
    },
    exit: (child, end) => this.exited(child, end),
    stallLimitMs: (child) => (child.state.iterations === 0 ? FIRST_OUTPUT_MS : 10_000 + 5_000 * WATCH_S),
    stalled: () => {},
  };

  constructor(private readonly options: AmdSmiSamplerOptions = {}) {
    this.clock = options.clock ?? process.hrtime.bigint;
    this.supervisor = new Supervisor({
      name: "amd-smi",
      watchdogName: "giul-amd-smi",
      restartBaseMs: 500,
      restartMaxMs: 30_000,
      healthyMs: 10_000,
      maxLine: 4096,
      clock: this.clock,
    });
  }

  /** Card `index`'s ring, shared by its holders; starts the child at the first. */
  open(index: number, holder: object): Result<SampleRing> {
    let card = this.cards.get(index);
    if (card === undefined) {
      const ring = new JsRing({ epochNs: this.clock(), periodNs: WATCH_S * 1e9, powerQuantumMw: 1000 });
      card = { ring, holders: new Set() };
      this.cards.set(index, card);
    }
    card.holders.add(holder);
    const started = this.ensureRunning();
    if (!started.ok) return fail(started.reason);
    return ok(card.ring);
  }

  /** A holder lets card `index` go; the last card's last holder stops the child. */
  close(index: number, holder: object): void {
    const card = this.cards.get(index);
    if (card === undefined) return;
    card.holders.delete(holder);
    if (card.holders.size === 0) this.cards.delete(index);
    if (this.cards.size === 0 && this.child !== null) {
      this.child.stop();
      this.child = null;
    }
  }

  describeError(code: number): string {
    if (code === AMD_SMI_ERROR.NA) return "amd-smi printed N/A";
    if (code === AMD_SMI_ERROR.NOT_LISTED) return "amd-smi does not list this GPU";
    if (code === AMD_SMI_ERROR.UNREADABLE) return "amd-smi printed something unreadable";
    if (code === AMD_SMI_ERROR.STOPPED) return `amd-smi stopped (${this.lastStop})`;
    return `amd-smi error ${code}`;
  }

  private ensureRunning(): Result<null> {
    if (this.child !== null || this.supervisor.restartPending) return ok(null);
    const path = this.options.path ?? findAmdSmi(this.options.env).path;
    if (path === null) return fail("amd-smi is not found (GIUL_AMD_SMI, PATH, /opt/rocm/bin)");
    const state: ChildState = {
      frames: new JsonFrames(),
      spawnedAt: this.clock(),
      lastArrival: null,
      iterations: 0,
    };
    const args = ["metric", "--power", "--energy", "--json", "--watch", String(WATCH_S)];
    const spawned = this.supervisor.spawn(path, args, this.options.env ?? process.env, state, this.events);
    if (!spawned.ok) return spawned;
    this.child = spawned.value;
    debug("amd-smi: started %s", path);
    return ok(null);
  }

  /** One iteration: each card's counter and power, stamped inside the interval its reads took. */
  private iteration(child: SupervisedChild<ChildState>, frame: string, arrival: bigint): void {
    const s = child.state;
    const earliest = s.lastArrival === null ? s.spawnedAt : s.lastArrival + BigInt(WATCH_S * 1e9);
    const from = earliest < arrival ? earliest : arrival;
    const t = from + (arrival - from) / 2n;
    const readNs = Number(arrival - from);
    s.lastArrival = arrival;
    s.iterations += 1;
    const rows = parseAmdMetric(frame);
    for (const [index, card] of this.cards) {
      const row = typeof rows === "string" ? undefined : rows.find((r) => r.gpu === index);
      if (row === undefined) {
        card.ring.push(
          t,
          Number.NaN,
          Number.NaN,
          typeof rows === "string" ? AMD_SMI_ERROR.UNREADABLE : AMD_SMI_ERROR.NOT_LISTED,
          readNs,
        );
        continue;
      }
      const energyMj = row.energyJ === null ? Number.NaN : row.energyJ * 1000 * EXACT_PER_PRINTED;
      const powerMw = row.watts === null ? Number.NaN : row.watts * 1000;
      const error = row.energyJ === null || row.watts === null ? AMD_SMI_ERROR.NA : 0;
      card.ring.push(t, energyMj, powerMw, error, readNs);
    }
  }

  private exited(child: SupervisedChild<ChildState>, end: ChildEnd): void {
    if (this.child === child) this.child = null;
    this.lastStop = this.supervisor.describeExit(child, end, null);
    debug("amd-smi: %s", this.lastStop);
    const now = this.clock();
    for (const card of this.cards.values())
      card.ring.push(now, Number.NaN, Number.NaN, AMD_SMI_ERROR.STOPPED);
    this.supervisor.forgiveIfHealthy(child, child.state.iterations > 0);
    if (this.cards.size > 0) this.supervisor.scheduleRestart(() => this.ensureRunning());
  }
}
