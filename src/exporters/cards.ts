/**
 * Card-level figures for the exporters: each local card with an open track, its power now and its
 * energy as a counter that never goes back, read from the newest sample of the sampler already
 * running (shared memory): no NVML call, nothing started. See src/select/in-use.ts.
 */
import { EnergyTotal, freshPowerW } from "../edges/energy-total.js";
import { type CardIdentity, cardsInUse } from "../select/in-use.js";

export interface CardFigures {
  readonly identity: CardIdentity;
  /** Board power from the newest sample (W), or null when there is no fresh one. */
  readonly powerW: number | null;
  /** Energy the sampler has seen the card draw since this reader first read it (J), or null before. */
  readonly energyJ: number | null;
}

/** One exporter's view of the cards: its own running totals, so its counters start at its first read. */
export class CardFigureReader {
  private readonly totals = new Map<number, EnergyTotal>();

  /** Every card with an open track, read now. */
  read(nowNs: bigint = process.hrtime.bigint()): CardFigures[] {
    const out: CardFigures[] = [];
    for (const card of cardsInUse()) {
      let total = this.totals.get(card.gpuIndex);
      if (total === undefined) {
        total = new EnergyTotal();
        this.totals.set(card.gpuIndex, total);
      }
      const readings = card.readings;
      const info = readings.ringInfo();
      const sample = info === null ? null : readings.latest();
      const energyJ = info === null ? total.totalJ : total.observe(sample, info.column, readings);
      const powerW = info === null ? null : freshPowerW(sample, info.periodNs, nowNs);
      if (energyJ === null && powerW === null) continue;
      out.push({ identity: card.identity, powerW, energyJ });
    }
    return out;
  }
}
