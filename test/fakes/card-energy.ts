import type { Scenario } from "./scenario.js";

/** CLOCK_MONOTONIC ns of the sampler's newest sample just before and just after an exporter read it. */
export interface Bracket {
  readonly before: bigint;
  readonly after: bigint;
}

/**
 * What an exporter's energy counter may have advanced by between two readings of a card's
 * sampler, each made at an unknown sample between `before` and `after` (the sampler's thread can
 * write a sample while the exporter reads): at least the scenario's energy from the first
 * bracket's end to the second's start, at most from the first's start to the second's end, each
 * widened by one counter step's energy (`stepJ`: the counter's staircase lags the truth by up to
 * a step, in either reading).
 */
export function counterAdvanceBounds(
  sc: Scenario,
  device: number,
  first: Bracket,
  second: Bracket,
  stepJ: number,
): { readonly lo: number; readonly hi: number } {
  return {
    lo: sc.energyJ(device, first.after, second.before) - stepJ - 1e-3,
    hi: sc.energyJ(device, first.before, second.after) + stepJ + 1e-3,
  };
}
