/**
 * fast-check's options for the suite's generated properties: the cases come from one seed, the
 * same on every run (a failure is the code's, never the draw's). GIUL_PROPERTY_SEED=random draws
 * afresh (what to explore with, GIUL_PROPERTY_RUNS high); a failing case again: GIUL_PROPERTY_SEED
 * and GIUL_PROPERTY_PATH as fast-check printed them. GIUL_PROPERTY_RUNS: cases (60 by default).
 */
import type fc from "fast-check";

export function propertyOptions(seedOfSuite: number): fc.Parameters<unknown> {
  const seed = process.env.GIUL_PROPERTY_SEED;
  return {
    numRuns: Number(process.env.GIUL_PROPERTY_RUNS ?? 60),
    ...(seed === "random" ? {} : { seed: seed === undefined ? seedOfSuite : Number(seed) }),
    ...(process.env.GIUL_PROPERTY_PATH !== undefined ? { path: process.env.GIUL_PROPERTY_PATH } : {}),
  };
}
