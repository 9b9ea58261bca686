import { describe, expect, it } from "vitest";
import { exactSpan, placeEdge, RemoteEdge } from "../src/sources/remote/exact.js";
import type { Edge } from "../src/track/track.js";
import type { EnergyWire } from "../src/vocabulary/wire.js";
import { squareWave, windowPlans } from "./fakes/accuracy.js";
import { inferenceTrace } from "./fakes/family.js";
import type { DeviceSpec, PowerPoint } from "./fakes/scenario.js";
import { type SamplerModel, SyntheticCard } from "./fakes/synthetic.js";

// The remote path over an agent whose card has no energy counter (it integrates its power
// readings): a client's bar is made of the agent's readings at its two edges alone, so each reading
// carries the agent's running bound of its integral (integral_spread_j) and what may still lie
// before its edge (integral_spread_ahead_j). Scored against the trace's exact energy, the agent's
// readings taken from a synthetic card exactly as giul-agent's /energy takes them
// (src/agent/monitor.ts: RingTrack.reading), the client's arithmetic the real one (exact.ts).
// Without the running bound, 15–22 of 300 windows per square wave were outside their bars (up to
// 11 times it), the same windows all inside theirs when measured locally.

const IDLE_W = 60;

/** What the agent answers for a settled edge of its card (the fields a client's span reads). */
function energyWire(card: SyntheticCard, edge: Edge): EnergyWire {
  const r = card.track.reading(edge);
  if (!r.ok) throw new Error(r.reason);
  const j = (mj: number) => (Number.isFinite(mj) ? mj / 1000 : null);
  return {
    agent: "synthetic",
    gpu: 0,
    backend: "nvml_sampler",
    energy_source: "integral",
    energy_series: "s-1",
    monotonic_ns: String(edge.tNs),
    energy_j: r.valueMj / 1000,
    power_w: j(r.powerMw),
    interp_err_j: r.interpErrMj / 1000,
    read_ns: r.readNs,
    sample_index: r.kA,
    faults_before: r.faultsA,
    faults_after: r.faultsB,
    counter_step_ns: 0,
    period_ns: 10e6,
    averaged_power: false,
    integral_unbounded: card.track.integralProblem(),
    integral_spread_j: j(r.spreadMj),
    integral_spread_ahead_j: j(r.spreadAheadMj),
    wait_ns: 0,
    power_min_w: 0,
    power_max_w: 700,
    power_range_ns: 2e9,
    edge_bounded: true,
    edge_age_ns: null,
  };
}

/** A remote edge read at its own instant (no lead: the lead's bound is test/remote-lead.test.ts's). */
function remoteEdge(card: SyntheticCard, edge: Edge, older: boolean): RemoteEdge {
  const e = new RemoteEdge(edge.tNs);
  const w = energyWire(card, edge);
  placeEdge(
    e,
    older ? { ...w, integral_spread_j: null, integral_spread_ahead_j: null } : w,
    edge.tNs,
    edge.tNs,
    edge.tNs,
  );
  return e;
}

/** How the agent's sampler reads: natively every 10 ms (its default), or nvidia-smi's 100 ms grid. */
const NATIVE: SamplerModel = { periodMs: 10, dither: "golden", readsAtEdges: true };
const SMI: SamplerModel = { periodMs: 100, dither: "none" };

/** Meters `plans` through the agent's readings: windows sampled, outside their bars, and the reasons of the rest. */
function score(
  device: DeviceSpec,
  power: PowerPoint[],
  plans: readonly { open: number; close: number }[],
  { sampler = NATIVE, older = false }: { sampler?: SamplerModel; older?: boolean } = {},
) {
  const card = new SyntheticCard({ ...device, counter: false, power }, sampler);
  let sampled = 0;
  let outside = 0;
  const reasons = new Set<string>();
  for (const p of plans) {
    if (!(p.close > p.open) || p.open <= 0) continue;
    const a = card.edgeAt(p.open);
    const b = card.edgeAt(p.close);
    for (let i = 0; i < 1000 && !card.track.settled([a, b]); i++) card.advanceOne();
    const m = exactSpan(remoteEdge(card, a, older), remoteEdge(card, b, older));
    if (!m.ok) {
      reasons.add(m.reason);
      continue;
    }
    sampled += 1;
    const truth = card.truth.energyJ(p.open, p.close);
    if (Math.abs(m.grossJoules - truth) > m.uncertaintyJoules + 1e-9) outside += 1;
  }
  return { sampled, outside, reasons: [...reasons] };
}

describe("remote_agent over an integrating agent: bars that hold", () => {
  const cases: [string, DeviceSpec, SamplerModel][] = [
    ["nvml_sampler, a sensor that refreshes at every read", { powerMode: "instant" }, NATIVE],
    // Held about a read on nvidia-smi's steady grid (A100/H100): it passes for fresh, and lags.
    ["smi_sampler, a 25 ms average every 100 ms", { powerUpdateMs: 100, powerAvgShare: 0.25 }, SMI],
  ];
  for (const [name, device, sampler] of cases) {
    it(`${name}: square waves and requests, no figure outside its bar`, () => {
      // No level shorter than two reads: the integral's stated limit.
      const minMs = 2 * (sampler.periodMs ?? 10);
      let sampled = 0;
      let windows = 0;
      for (const half of [23, 37, 60].map((h) => Math.max(h, minMs))) {
        const plans = windowPlans(300, { minMs: 20, maxMs: 2000, gapMs: [5, 50], startMs: 200, seed: half });
        const r = score(device, squareWave(100, 400, half, 40), plans, { sampler });
        expect(r.outside).toBe(0);
        sampled += r.sampled;
        windows += 300;
      }
      const trace = inferenceTrace(200, [20, 100, 250, 600, 1000, 3000], {
        idleW: IDLE_W,
        minPhaseMs: minMs,
        startMs: 500,
      });
      const r = score(device, trace.power, trace.plans, { sampler });
      expect(r.outside).toBe(0);
      sampled += r.sampled;
      windows += 200;
      // Every window once the sensor is judged (its first three changes).
      expect(sampled).toBeGreaterThan(0.95 * windows);
    });
  }

  it("an agent without the running bound (older): its integral is not sampled, and the reason says why", () => {
    const plans = windowPlans(40, { minMs: 100, maxMs: 1000, gapMs: [5, 50], startMs: 200, seed: 1 });
    const r = score({ powerMode: "instant" }, squareWave(100, 400, 37, 40), plans, { older: true });
    expect(r.sampled).toBe(0);
    expect(r.reasons.some((why) => /integral_spread_j: an agent older than that field/.test(why))).toBe(true);
  });
});
