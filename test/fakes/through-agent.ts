/**
 * A window measured through giul-agent's /energy instead of the card's own track: each edge's
 * reading built by the agent's own code (src/agent/energy-wire.ts) from a synthetic card's track,
 * read at the edge's instant (no network: the lead's bound is test/remote-lead.test.ts's), and the
 * span a remote client's (src/sources/remote/exact.ts).
 */
import { energyWire } from "../../src/agent/energy-wire.js";
import { exactSpan, placeEdge, RemoteEdge } from "../../src/sources/remote/exact.js";
import type { Edge } from "../../src/track/track.js";
import type { SpanMeasurement } from "../../src/vocabulary/measurement.js";
import type { EnergyWire } from "../../src/vocabulary/wire.js";
import type { SyntheticCard } from "./synthetic.js";

const SOURCE = { agent: "giul-node/test", gpu: 0, backend: "synthetic", series: "s", clockOffsetNs: 0n };

/** The agent's reading of a settled edge, changed by `alter` (an older agent's missing fields). */
export function agentReading(
  card: SyntheticCard,
  edge: Edge,
  alter: (w: EnergyWire) => EnergyWire = (w) => w,
): RemoteEdge {
  const w = energyWire(card.track, edge, SOURCE, 0, null);
  if (!w.ok) throw new Error(w.reason);
  const e = new RemoteEdge(edge.tNs);
  placeEdge(e, alter(w.value), edge.tNs, edge.tNs, edge.tNs);
  return e;
}

/** The span between two settled edges as a remote client measures it through the agent. */
export function spanThroughAgent(
  card: SyntheticCard,
  from: Edge,
  to: Edge,
  alter?: (w: EnergyWire) => EnergyWire,
): SpanMeasurement {
  // An edge the agent cannot read is a failed request: the client's reason.
  const read = (e: Edge) => {
    const w = energyWire(card.track, e, SOURCE, 0, null);
    return w.ok ? null : w.reason;
  };
  const why = read(from) ?? read(to);
  if (why !== null) return { ok: false, reason: `the agent: ${why}` };
  return exactSpan(agentReading(card, from, alter), agentReading(card, to, alter));
}
