/**
 * The `simulated` backend: a card that does not exist, drawing the power a test (or a first look)
 * says, metered through the normal selection so that a server's energy accounting can be exercised
 * in CI without a GPU. Its records say `backend: "simulated"` and, in their reason, that they
 * measure no hardware. Cards are declared with `simulateCard()` (giul/testing).
 */

import { JsRing } from "../../ring/js-ring.js";
import { RingTrack } from "../../ring/ring-track.js";
import type { CardReader } from "../../track/card.js";
import type { BackendDescriptor } from "../../track/descriptor.js";
import type { RingSource, SampleRing } from "../../track/ring.js";
import type { Track } from "../../track/track.js";
import { fail, ok, type Result } from "../../vocabulary/measurement.js";

/** Power over time: watts, seconds since the card was declared → watts, or [offsetMs, watts] steps. */
export type SimulatedPower = number | ((seconds: number) => number) | readonly (readonly [number, number])[];

/** A declared card: its power and, once a window has used it, its track. */
interface SimulatedCard {
  readonly watts: (seconds: number) => number;
  readonly t0Ns: bigint;
  track: Track | null;
}

/**
 * The declared cards, shared by every copy of giul loaded in this JavaScript environment (the ESM
 * and CommonJS builds, giul and giul/testing bundled apart): a copy that declares a card and the
 * copy whose Meter meters it must see the same table. `generation` counts the declarations and
 * withdrawals, so that selection can tell its cached choice for a card is stale.
 */
interface Declared {
  readonly cards: Map<number, SimulatedCard>;
  generation: number;
}
const SHARED = Symbol.for("giul.simulatedCards");
const holder = globalThis as Record<symbol, Declared | undefined>;
holder[SHARED] ??= { cards: new Map(), generation: 0 };
const declared = holder[SHARED] as Declared;
const cards = declared.cards;

/** Changes whenever a card is declared simulated or withdrawn (see select's cache). */
export function simulationGeneration(): number {
  return declared.generation;
}

/** Turns the three forms into a function of seconds since t0 (steps hold until the next). */
export function powerFunction(power: SimulatedPower): (seconds: number) => number {
  if (typeof power === "number") return () => power;
  if (typeof power === "function") return power;
  const steps = [...power].sort((a, b) => a[0] - b[0]);
  return (seconds) => {
    let w = steps[0]?.[1] ?? 0;
    for (const [ms, watts] of steps) {
      if (ms / 1000 > seconds) break;
      w = watts;
    }
    return w;
  };
}

/** Declares GPU `gpuIndex` simulated, in this JavaScript environment, until `undeclare`. */
export function declareSimulatedCard(gpuIndex: number, power: SimulatedPower): void {
  cards.set(gpuIndex, { watts: powerFunction(power), t0Ns: process.hrtime.bigint(), track: null });
  declared.generation += 1;
}

export function undeclareSimulatedCard(gpuIndex: number): void {
  if (cards.delete(gpuIndex)) declared.generation += 1;
}

const PERIOD_MS = 10;

/** Samples the declared power into a ring on a timer: the "counter" is its exact running sum. */
class SimulatedSource implements RingSource {
  readonly column = "energy" as const;
  readonly averagedPower = false;
  readonly averagedPowerSource = "the simulated card's declared power";
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly card: SimulatedCard) {}

  open(): Result<SampleRing> {
    const ring = new JsRing({ epochNs: this.card.t0Ns, periodNs: PERIOD_MS * 1e6 });
    let energyMj = 0;
    let lastT = process.hrtime.bigint();
    let lastW = this.wattsAt(lastT);
    ring.push(lastT, energyMj, lastW * 1000);
    this.timer = setInterval(() => {
      const t = process.hrtime.bigint();
      const w = this.wattsAt(t);
      // The trapezoid of the declared power: exact for constant and linear pieces.
      energyMj += ((lastW + w) / 2) * (Number(t - lastT) / 1e6);
      lastT = t;
      lastW = w;
      ring.push(t, energyMj, w * 1000);
    }, PERIOD_MS);
    this.timer.unref();
    return ok(ring);
  }

  private wattsAt(tNs: bigint): number {
    const w = this.card.watts(Number(tNs - this.card.t0Ns) / 1e9);
    return Number.isFinite(w) && w >= 0 ? w : 0;
  }

  setPeriod(): void {}

  close(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  describeError(code: number): string {
    return `simulated card error ${code}`;
  }
}

/** A simulated card has no processes and no memory to report: it is always free. */
const SIMULATED_INFO = Object.freeze({
  name: "simulated card",
  memoryTotalMib: null,
  memoryUsedMib: null,
  memoryFreeMib: null,
  utilizationPct: null,
  powerW: null,
});
const simulatedReader: CardReader = {
  async readProcesses() {
    return { ok: true, tNs: process.hrtime.bigint(), processes: [] };
  },
  async readInfo() {
    return ok(SIMULATED_INFO);
  },
  async readState() {
    return ok({ ...SIMULATED_INFO, computeApps: [] });
  },
};

/** `simulated`: a card declared with simulateCard() (giul/testing), before every real backend. */
export const simulatedBackend: BackendDescriptor = {
  name: "simulated",
  canServe: (card) => card.isLocal && cards.has(card.gpuIndex),
  open(card) {
    const declared = cards.get(card.gpuIndex);
    if (declared === undefined) return fail(`GPU ${card.gpuIndex} is not simulated`);
    declared.track ??= new RingTrack("simulated", new SimulatedSource(declared));
    return ok({ track: declared.track, reader: simulatedReader });
  },
  generation: simulationGeneration,
};
