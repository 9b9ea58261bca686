/**
 * Ground truth for shared attribution: the exact weighted fair share of a trace. At every instant
 * the card's power above idle is split among the windows open then, in proportion to their
 * weights; a window's truth is the integral of its part. Computed from the scenario's exact energy
 * between consecutive event times, independently of the package's ledger.
 */

/** One window as the truth sees it: its edges and its weight from each instant on. */
export interface TruthWindow {
  readonly open: bigint;
  readonly close: bigint;
  /** [tNs, weight] from each instant on, the first at `open` (ascending times). */
  readonly weights: readonly (readonly [bigint, number])[];
}

/** What the truth reads of a window: its edges and weights (a Meter's edgeTimes()). */
export interface WithEdges {
  edgeTimes(): {
    open: bigint | null;
    close: bigint | null;
    weights: { tNs: bigint; weight: number }[];
  };
}

/** A closed window as the truth sees it. */
export function truthWindow(m: WithEdges): TruthWindow {
  const t = m.edgeTimes();
  if (t.open === null || t.close === null) throw new Error("window has no edges");
  return { open: t.open, close: t.close, weights: t.weights.map((w) => [w.tNs, w.weight] as const) };
}

/** What the truth says about a set of windows. */
export interface FairShare {
  /** Each window's exact share of the energy above idle (J), in the order given. */
  readonly shares: number[];
  /** The card's energy above idle over the union of the windows (J). */
  readonly unionAbove: number;
}

/**
 * `energyJ(from, to)`: the scenario's exact energy over [from, to] (J). `idleW` is subtracted at
 * every instant at least one window is open, once for the card.
 */
export function fairShare(
  windows: readonly TruthWindow[],
  energyJ: (from: bigint, to: bigint) => number,
  idleW: number,
): FairShare {
  const times = new Set<bigint>();
  for (const w of windows) {
    times.add(w.open);
    times.add(w.close);
    for (const [t] of w.weights) times.add(t);
  }
  const sorted = [...times].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const shares = windows.map(() => 0);
  let unionAbove = 0;
  // Per window, the index of its weight piece in force (advanced as time moves on).
  const piece = windows.map(() => 0);
  for (let i = 0; i + 1 < sorted.length; i++) {
    const a = sorted[i] as bigint;
    const b = sorted[i + 1] as bigint;
    let total = 0;
    const open: [number, number][] = [];
    for (let j = 0; j < windows.length; j++) {
      const w = windows[j] as TruthWindow;
      if (!(w.open <= a && b <= w.close)) continue;
      let k = piece[j] as number;
      while (k + 1 < w.weights.length && (w.weights[k + 1] as readonly [bigint, number])[0] <= a) k++;
      piece[j] = k;
      const weight = (w.weights[k] as readonly [bigint, number])[1];
      open.push([j, weight]);
      total += weight;
    }
    if (open.length === 0) continue;
    const above = energyJ(a, b) - (idleW * Number(b - a)) / 1e9;
    unionAbove += above;
    for (const [j, weight] of open) shares[j] = (shares[j] as number) + (above * weight) / total;
  }
  return { shares, unionAbove };
}
