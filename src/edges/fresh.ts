/**
 * A counter that changes at every read may update continuously: its value at a read is then as of
 * at most δ before it. Each δ of FRESH_NS is a hypothesis the counter must confirm, step by step,
 * between two reads in a row that both changed it (./fusion.ts). Times ns, energy mJ.
 */
import { CONTINUOUS, GainEvidence } from "./power-model.js";
import type { SensorEnergyMemo } from "./sensor-energy.js";
import { type Bound, stepGain } from "./uncertainty.js";

const FRESH_NS = [0.1e6, 0.5e6, 2e6] as const;
/** Reads in a row that must each show a change, and steps that must confirm a δ. */
const FRESH_READS = 64;
const FRESH_STEPS = 32;

/** An update's read window: the read before it started (lo), the read showing it ended (hi). */
export interface ReadWindow {
  readonly lo: number;
  readonly hi: number;
  /** The duration of the read that showed it (ns). */
  readonly readNs: number;
}

/** The update instant of `w` if the counter is at most `delta` behind its read, into `out`. */
export function freshInstant(w: ReadWindow, delta: number, out: Bound): Bound {
  out.lo = Math.max(w.lo, w.hi - w.readNs - delta);
  out.hi = w.hi;
  return out;
}

export class FreshCounter {
  /** Reads in a row (this run of the counter) that showed a change. */
  private changeRun = 0;
  /** Evidence for each δ; a δ the counter contradicted is dead for this run. */
  private evidence = FRESH_NS.map(() => new GainEvidence());
  private dead = FRESH_NS.map(() => false);
  private readonly a: Bound = { lo: 0, hi: 0 };
  private readonly b: Bound = { lo: 0, hi: 0 };
  private readonly bounds = { lo: 0, hi: 0 };
  private readonly gain: Bound = { lo: 0, hi: 0 };

  constructor(private readonly memo: SensorEnergyMemo) {}

  /** A new run of the counter: every hypothesis starts over. */
  restart(): void {
    this.changeRun = 0;
    this.evidence = FRESH_NS.map(() => new GainEvidence());
    this.dead = FRESH_NS.map(() => false);
  }

  /** A read showed a change (true) or the same value (false). */
  read(changed: boolean): void {
    this.changeRun = changed ? this.changeRun + 1 : 0;
  }

  /** Whether each of the last FRESH_READS reads showed a change (it updates faster than it is read). */
  changesEveryRead(): boolean {
    return this.changeRun >= FRESH_READS;
  }

  /** The smallest δ the counter has confirmed, or NaN. */
  delta(): number {
    if (!this.changesEveryRead()) return Number.NaN;
    for (let d = 0; d < FRESH_NS.length; d++) {
      const e = this.evidence[d] as GainEvidence;
      if (!this.dead[d] && e.count >= FRESH_STEPS && e.consistent()) return FRESH_NS[d] as number;
    }
    return Number.NaN;
  }

  /** A step of `dvMj` between two updates read in a row: evidence for each δ still alive. */
  check(dvMj: number, from: ReadWindow, to: ReadWindow): void {
    for (let d = 0; d < FRESH_NS.length; d++) {
      if (this.dead[d]) continue;
      const fa = freshInstant(from, FRESH_NS[d] as number, this.a);
      const fb = freshInstant(to, FRESH_NS[d] as number, this.b);
      this.memo.energy(fa.hi, fb.lo, CONTINUOUS, this.bounds);
      const inner = this.bounds.lo;
      this.memo.energy(fa.lo, fb.hi, CONTINUOUS, this.bounds);
      const outer = this.bounds.hi;
      if (!Number.isFinite(outer) || !(outer > 0)) continue;
      const e = this.evidence[d] as GainEvidence;
      stepGain(dvMj, inner, outer, this.gain);
      e.push(this.gain.lo, this.gain.hi, true);
      if (!e.consistent()) this.dead[d] = true;
    }
  }
}
