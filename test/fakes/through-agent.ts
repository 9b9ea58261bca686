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

/**
 * The span between two settled edges as a remote client measures it through the agent, each
 * edge's reading changed by `alter` (an older agent's missing fields). An edge the agent cannot
 * read is a failed request: the client's reason.
 */
export function spanThroughAgent(
  card: SyntheticCard,
  from: Edge,
  to: Edge,
  alter: (w: EnergyWire) => EnergyWire = (w) => w,
): SpanMeasurement {
  const read: RemoteEdge[] = [];
  for (const edge of [from, to]) {
    const w = energyWire(card.track, edge, SOURCE, 0, null);
    if (!w.ok) return { ok: false, reason: `the agent: ${w.reason}` };
    const e = new RemoteEdge(edge.tNs);
    placeEdge(e, alter(w.value), edge.tNs, edge.tNs, edge.tNs);
    read.push(e);
  }
  return exactSpan(read[0] as RemoteEdge, read[1] as RemoteEdge);
}
