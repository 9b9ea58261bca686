/**
 * One card as giul-agent serves it, through the backend selection chooses for it as for a Meter:
 * the card's shared track (kept running for the agent's life) for power and cumulative energy,
 * through the readings its track offers, and the card's state (name, memory, utilization, compute
 * processes) through the backend's CardReader (the addon off the JS thread, or nvidia-smi), cached
 * so that a request costs no NVML call. The cache is refreshed in the background when a request
 * finds it older than its TTL; a request that finds it much older (the agent sat idle) waits for
 * the refresh, a bounded while.
 */

import { EnergyTotal } from "../edges/energy-total.js";
import { resolveNode } from "../rules/node.js";
import { type CardIdentity, cardInUse } from "../select/in-use.js";
import { cardUuid, forcedBackend, select } from "../select/index.js";
import type { CardReader } from "../track/card.js";
import type { LatestSample, Track, TrackReadings } from "../track/track.js";
import { debug } from "../vocabulary/debug.js";
import { fail, type Result } from "../vocabulary/measurement.js";
import type { ComputeAppWire, EnergyWire, PowerWire } from "../vocabulary/wire.js";
import { energyWire } from "./energy-wire.js";

export interface DeviceState {
  readonly name: string | null;
  readonly memoryUsedMib: number | null;
  readonly memoryTotalMib: number | null;
  readonly memoryFreeMib: number | null;
  readonly utilizationPct: number | null;
  readonly powerW: number | null;
  readonly computeApps: readonly ComputeAppWire[] | null;
  /** performance.now() (monotonic ms) when read (0: never). */
  readonly at: number;
}

const EMPTY: DeviceState = {
  name: null,
  memoryUsedMib: null,
  memoryTotalMib: null,
  memoryFreeMib: null,
  utilizationPct: null,
  powerW: null,
  computeApps: null,
  at: 0,
};

export interface MonitorOptions {
  readonly gpu: number;
  readonly periodMs: number;
  /** A request finding the state older than this refreshes it in the background. */
  readonly stateTtlMs: number;
  /** A request finding it older than this waits for the refresh (at most refreshWaitMs). */
  readonly stateMaxAgeMs: number;
  readonly refreshWaitMs: number;
  readonly agent: string;
  /** Added to every monotonic_ns the agent reports (tests: an agent on another clock). */
  readonly clockOffsetNs: bigint;
}

/** The card's state without its timestamp: what one refresh reads. */
type StateRead = Omit<DeviceState, "at">;

/** The card's track, and the single readings it offers. */
interface Sampler {
  readonly track: Track;
  readonly readings: TrackReadings;
}

export class DeviceMonitor {
  readonly gpu: number;
  backend = "none";
  /** Why the card's energy cannot be read, or null. */
  reason: string | null = null;
  private sampler: Sampler | null = null;
  /** Reads the card's state, or null when the backend cannot (none). */
  private reader: CardReader | null = null;
  /** The card's UUID once started, where NVML knows it (`?gpu=` may name the card by it). */
  uuid: string | null = null;
  private state: DeviceState = EMPTY;
  private refreshing: Promise<void> | null = null;
  private readonly options: MonitorOptions;
  private readonly series: string;
  private stopped = false;
  /** hw_energy_joules_total: the sampler's energy since the first scrape, never decreasing. */
  private readonly total = new EnergyTotal();

  constructor(options: MonitorOptions) {
    this.options = options;
    this.gpu = options.gpu;
    this.series = `${process.pid}-${Date.now().toString(36)}-${options.gpu}`;
  }

  /** Chooses the backend, starts the sampler and reads the state once. Never throws. */
  async start(): Promise<void> {
    try {
      const node = resolveNode({ name: `giul-agent-gpu${this.gpu}`, gpuIndex: this.gpu, idleW: 0 });
      let forced = null;
      try {
        forced = forcedBackend();
      } catch (error) {
        this.reason = String(error);
      }
      const selection = await select(node, forced);
      this.uuid = cardUuid(selection, node);
      this.backend = selection.backend;
      this.reader = selection.reader ?? null;
      const track = selection.track;
      const readings = track?.readings;
      if (track !== null && readings !== undefined) {
        this.sampler = { track, readings };
        track.retain(this.options.periodMs);
        const ready = await track.ready();
        this.reason = ready.ok ? null : ready.reason;
      } else {
        this.reason = selection.reason ?? "no sampler for this card";
      }
    } catch (error) {
      this.reason = `starting the sampler failed: ${String(error)}`;
    }
    await this.refresh();
    debug("agent: gpu %d backend %s%s", this.gpu, this.backend, this.reason ? ` (${this.reason})` : "");
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.sampler?.track.release();
    this.sampler = null;
  }

  /** Reads the state (through the addon off the JS thread, or nvidia-smi). Never throws. */
  private refresh(): Promise<void> {
    if (this.refreshing) return this.refreshing;
    const reader = this.reader;
    if (reader === null) {
      this.state = { ...EMPTY, at: performance.now() };
      return Promise.resolve();
    }
    const run = async () => {
      let state: StateRead;
      try {
        state = await readState(reader);
      } catch (error) {
        debug("agent: reading the state failed: %s", String(error));
        state = EMPTY;
      }
      this.state = { ...state, at: performance.now() };
    };
    this.refreshing = run().finally(() => {
      this.refreshing = null;
    });
    return this.refreshing;
  }

  /** The cached state, refreshed in the background when stale; waited for when very old. */
  async currentState(): Promise<DeviceState> {
    const age = performance.now() - this.state.at;
    if (age > this.options.stateMaxAgeMs) {
      const refresh = this.refresh();
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((done) => {
        timer = setTimeout(done, this.options.refreshWaitMs);
      });
      await Promise.race([refresh, waited]);
      clearTimeout(timer);
      // Too old and no fresher answer: unreadable, not a stale figure presented as current.
      if (performance.now() - this.state.at > this.options.stateMaxAgeMs + this.options.refreshWaitMs)
        return EMPTY;
    } else if (age > this.options.stateTtlMs) {
      void this.refresh();
    }
    return this.state;
  }

  /** The newest power and cumulative energy of the card's sampler. */
  private latest(sample: LatestSample | null = this.sampler?.readings.latest() ?? null): {
    watts: number | null;
    energyJ: number | null;
    monotonicNs: string | null;
    source: "counter" | "integral" | null;
    series: string | null;
  } {
    const readings = this.sampler?.readings;
    const info = readings?.ringInfo() ?? null;
    if (sample === null || info === null) {
      return { watts: null, energyJ: null, monotonicNs: null, source: null, series: null };
    }
    const ageNs = Number(process.hrtime.bigint() - sample.tNs);
    const fresh = ageNs < Math.max(1e9, 5 * info.periodNs);
    return {
      watts: fresh && Number.isFinite(sample.powerMw) ? sample.powerMw / 1000 : null,
      energyJ: Number.isFinite(sample.cumulativeMj) ? sample.cumulativeMj / 1000 : null,
      monotonicNs: String(sample.tNs + this.options.clockOffsetNs),
      source: info.column === "energy" ? "counter" : "integral",
      series: `${this.series}-${sample.generation}`,
    };
  }

  /** GET /power. */
  async power(): Promise<PowerWire> {
    const state = await this.currentState();
    const latest = this.latest();
    // Power from the sampler when it has a fresh sample; else what the last state read said.
    const watts = latest.watts ?? (state.at > 0 ? state.powerW : null);
    return {
      watts,
      name: state.name,
      memory_used_mib: state.memoryUsedMib,
      memory_total_mib: state.memoryTotalMib,
      memory_free_mib: state.memoryFreeMib,
      utilization_pct: state.utilizationPct,
      compute_apps: state.computeApps === null ? null : [...state.computeApps],
      agent: this.options.agent,
      gpu: this.gpu,
      backend: this.backend,
      energy_source: latest.source,
      energy_series: latest.series,
      energy_j: latest.energyJ,
      monotonic_ns: latest.monotonicNs,
    };
  }

  /** GET /metrics: the state, the newest sample and who the card is, for the Prometheus text. */
  async metrics(): Promise<{
    state: DeviceState;
    watts: number | null;
    energyJ: number | null;
    energyTotalJ: number | null;
    identity: CardIdentity;
  }> {
    const state = await this.currentState();
    // One sample for both energy figures, so that they move together.
    const readings = this.sampler?.readings;
    const sample = readings?.latest() ?? null;
    const latest = this.latest(sample);
    const info = readings?.ringInfo() ?? null;
    const energyTotalJ =
      readings === undefined || info === null
        ? this.total.totalJ
        : this.total.observe(sample, info.column, readings);
    const identity = cardInUse(this.gpu)?.identity ?? {
      id: `gpu${this.gpu}`,
      name: `gpu${this.gpu}`,
      vendor: "NVIDIA",
      model: null,
      driverVersion: null,
    };
    return { state, watts: latest.watts ?? state.powerW, energyJ: latest.energyJ, energyTotalJ, identity };
  }

  /**
   * GET /energy: the cumulative energy at the request's arrival, or `edgeAgeNs` before it (the
   * client's edge: see EDGE_AGE_HEADER), once the sample after that instant exists.
   */
  async energy(edgeAgeNs: number | null = null): Promise<Result<EnergyWire>> {
    const sampler = this.sampler;
    if (sampler === null) return fail(this.reason ?? "no sampler for this card");
    const { track, readings } = sampler;
    const arrived = process.hrtime.bigint();
    const edge = edgeAgeNs === null ? track.edge() : readings.edgeAt(arrived - BigInt(edgeAgeNs));
    await track.settle([edge]);
    const { agent, clockOffsetNs } = this.options;
    const source = { agent, clockOffsetNs, gpu: this.gpu, backend: this.backend, series: this.series };
    return energyWire(readings, edge, source, Number(process.hrtime.bigint() - arrived), edgeAgeNs);
  }
}

/**
 * The card's values and its processes, each read on its own and null when its read fails (a
 * process list the driver refuses leaves the memory readable). Power comes from the sampler's
 * track; `powerW` is what the card's state read gave, where it gives one.
 */
async function readState(reader: CardReader): Promise<StateRead> {
  const [info, procs] = await Promise.all([reader.readInfo(), reader.readProcesses()]);
  const card = info.ok ? info.value : null;
  return {
    name: card?.name ?? null,
    memoryUsedMib: card?.memoryUsedMib ?? null,
    memoryTotalMib: card?.memoryTotalMib ?? null,
    memoryFreeMib: card?.memoryFreeMib ?? null,
    utilizationPct: card?.utilizationPct ?? null,
    powerW: card?.powerW ?? null,
    computeApps: procs.ok
      ? procs.processes.map((p) => ({ pid: p.pid, used_mib: p.usedMib, name: p.name }))
      : null,
  };
}
