/**
 * One card as giul-agent serves it: the card's shared track (chosen by select.ts, kept running for
 * the agent's life) for power and cumulative energy, and the card's state (name, memory,
 * utilization, compute processes) read through the addon off the JS thread (or, without it, through
 * nvidia-smi) and cached, so that a request costs no NVML call. The cache is refreshed in the background when a request finds it
 * older than its TTL; a request that finds it much older (the agent sat idle) waits for the
 * refresh, a bounded while.
 */
import type { GiulBinding } from "../../binding.js";
import type { CardReader } from "../backends/card.js";
import type { RingTrack } from "../backends/ring-track.js";
import { readSmiGpu } from "../backends/smi-card.js";
import { findNvidiaSmi } from "../backends/smi-path.js";
import type { Track } from "../backends/track.js";
import { loadBinding } from "../binding.js";
import { debug } from "../debug.js";
import { fail, ok, type Result } from "../measurement.js";
import { resolveNode } from "../node.js";
import { forcedBackend, select } from "../select/index.js";
import type { ComputeAppWire, EnergyWire, PowerWire } from "../wire.js";

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

/** A track that can hand out single readings (RingTrack does). */
function isRingTrack(track: Track | null): track is RingTrack {
  return track !== null && typeof (track as Partial<RingTrack>).reading === "function";
}

export class DeviceMonitor {
  readonly gpu: number;
  backend = "none";
  /** Why the card's energy cannot be read, or null. */
  reason: string | null = null;
  private track: RingTrack | null = null;
  /** Reads the card's state, or null when nothing can (no addon and no nvidia-smi). */
  private readState: (() => Promise<StateRead>) | null = null;
  private state: DeviceState = EMPTY;
  private refreshing: Promise<void> | null = null;
  private readonly options: MonitorOptions;
  private readonly series: string;
  private stopped = false;

  constructor(options: MonitorOptions) {
    this.options = options;
    this.gpu = options.gpu;
    this.series = `${process.pid}-${Date.now().toString(36)}-${options.gpu}`;
  }

  /** Chooses the backend, starts the sampler and reads the state once. Never throws. */
  async start(): Promise<void> {
    let reader: CardReader | null = null;
    try {
      const node = resolveNode({ name: `giul-agent-gpu${this.gpu}`, gpuIndex: this.gpu, idleW: 0 });
      let forced = null;
      try {
        forced = forcedBackend();
      } catch (error) {
        this.reason = String(error);
      }
      const selection = await select(node, forced);
      this.backend = selection.backend;
      reader = selection.reader ?? null;
      if (isRingTrack(selection.track)) {
        this.track = selection.track;
        this.track.retain(this.options.periodMs);
        const ready = await this.track.ready();
        this.reason = ready.ok ? null : ready.reason;
      } else {
        this.reason = selection.reason ?? "no sampler for this card";
      }
    } catch (error) {
      this.reason = `starting the sampler failed: ${String(error)}`;
    }
    const loaded = loadBinding();
    if (loaded.ok) {
      try {
        const init = await loaded.binding.nvmlInit();
        if (init.ok) this.readState = bindingState(loaded.binding, this.gpu);
      } catch (error) {
        debug("agent: nvmlInit threw: %s", String(error));
      }
    }
    if (this.readState === null) {
      // No NVML here: the state as nvidia-smi prints it, when it is found.
      const smi = findNvidiaSmi();
      if (smi.path !== null) this.readState = smiState(smi.path, this.gpu, reader);
    }
    await this.refresh();
    debug("agent: gpu %d backend %s%s", this.gpu, this.backend, this.reason ? ` (${this.reason})` : "");
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.track?.release();
    this.track = null;
  }

  /** Reads the state (through the addon off the JS thread, or nvidia-smi). Never throws. */
  private refresh(): Promise<void> {
    if (this.refreshing) return this.refreshing;
    const read = this.readState;
    if (read === null) {
      this.state = { ...EMPTY, at: performance.now() };
      return Promise.resolve();
    }
    const run = async () => {
      let state: StateRead;
      try {
        state = await read();
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
  private latest(): {
    watts: number | null;
    energyJ: number | null;
    monotonicNs: string | null;
    source: "counter" | "integral" | null;
    series: string | null;
  } {
    const track = this.track;
    const sample = track?.latest() ?? null;
    const info = track?.ringInfo() ?? null;
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

  /** GET /metrics: the state and the newest sample, for the Prometheus text. */
  async metrics(): Promise<{ state: DeviceState; watts: number | null; energyJ: number | null }> {
    const state = await this.currentState();
    const latest = this.latest();
    return { state, watts: latest.watts ?? state.powerW, energyJ: latest.energyJ };
  }

  /** GET /energy: the cumulative energy at this instant, once the sample after it exists. */
  async energy(): Promise<Result<EnergyWire>> {
    const track = this.track;
    if (track === null) return fail(this.reason ?? "no sampler for this card");
    const arrived = process.hrtime.bigint();
    const edge = track.edge();
    await track.settle([edge]);
    const r = track.reading(edge);
    const info = track.ringInfo();
    if (!r.ok) return fail(r.reason);
    if (info === null || info.generation !== r.generation) return fail("the sampler restarted");
    return ok({
      agent: this.options.agent,
      gpu: this.gpu,
      backend: this.backend,
      energy_source: info.column === "energy" ? "counter" : "integral",
      energy_series: `${this.series}-${r.generation}`,
      monotonic_ns: String(r.tNs + this.options.clockOffsetNs),
      energy_j: r.valueMj / 1000,
      power_w: Number.isFinite(r.powerMw) ? r.powerMw / 1000 : null,
      interp_err_j: r.interpErrMj / 1000,
      read_ns: r.readNs,
      sample_index: r.kA,
      faults_before: r.faultsA,
      faults_after: r.faultsB,
      counter_step_ns: info.counterStepNs,
      period_ns: info.periodNs,
      averaged_power: info.averagedPower,
      wait_ns: Number(process.hrtime.bigint() - arrived),
    });
  }
}

/** The state through the addon: device info and compute processes, each null when its read fails. */
function bindingState(binding: GiulBinding, gpu: number): () => Promise<StateRead> {
  return async () => {
    const [info, procs] = await Promise.all([
      binding.deviceInfo(gpu).catch(() => null),
      binding.computeProcesses(gpu).catch(() => null),
    ]);
    const ok = info?.ok === true ? info : null;
    return {
      name: ok?.name ?? null,
      memoryUsedMib: ok?.memoryUsedMib ?? null,
      memoryTotalMib: ok?.memoryTotalMib ?? null,
      memoryFreeMib: ok?.memoryFreeMib ?? null,
      utilizationPct: ok?.utilizationPct ?? null,
      powerW: ok?.powerW ?? null,
      computeApps:
        procs?.ok === true
          ? procs.processes.map((p) => ({ pid: p.pid, used_mib: p.usedMib, name: p.name }))
          : null,
    };
  };
}

/**
 * The state through nvidia-smi (no addon, or no NVML through it): its `--query-gpu` row and the
 * card's compute processes (through `reader`, the smi_sampler's card reader, when there is one),
 * each null when its read fails. Power comes from the sampler's track, not from here.
 */
function smiState(path: string, gpu: number, reader: CardReader | null): () => Promise<StateRead> {
  return async () => {
    const [row, procs] = await Promise.all([readSmiGpu(path, gpu), reader?.readProcesses() ?? null]);
    const g = row.ok ? row.gpu : null;
    return {
      name: g?.name ?? null,
      memoryUsedMib: g?.memoryUsedMib ?? null,
      memoryTotalMib: g?.memoryTotalMib ?? null,
      memoryFreeMib: g?.memoryFreeMib ?? null,
      utilizationPct: g?.utilizationPct ?? null,
      powerW: null,
      computeApps:
        procs?.ok === true
          ? procs.processes.map((p) => ({ pid: p.pid, used_mib: p.usedMib, name: p.name }))
          : null,
    };
  };
}
