/** Meter.measure(): a window around one function, closed also when the function throws. */
import type { Energy } from "../rules/energy.js";
import { describeValue } from "../vocabulary/validate.js";
import {
  checkOptions,
  type MeasureOptions,
  optionError,
  type ResultOptions,
  TOKEN_OPTIONS,
} from "./options.js";

/** The window as measure() drives it (a Meter). */
export interface Runnable {
  open(): Promise<unknown>;
  close(): Promise<void>;
  result(options?: ResultOptions): Energy;
}

/** Opens `meter`, runs fn, closes it (also when fn throws, then rethrows): fn's value and its cost. */
export async function measureRun<M extends Runnable, T>(
  meter: M,
  fn: (meter: M) => Promise<T> | T,
  measureOptions?: MeasureOptions<T>,
): Promise<{ value: T; energy: Energy }> {
  if (typeof fn !== "function")
    throw optionError("fn", `measure() needs a function, got ${describeValue(fn)}`);
  const options = checkOptions<MeasureOptions<T>>("options", measureOptions, TOKEN_OPTIONS);
  await meter.open();
  let value: T;
  try {
    value = await fn(meter);
  } finally {
    await meter.close();
  }
  const tokens = typeof options.tokens === "function" ? (options.tokens(value) ?? null) : options.tokens;
  return { value, energy: meter.result({ tokens: tokens ?? null }) };
}
