/**
 * giul/testing: a simulated card, for first looks and for your own tests. While a card is
 * simulated, Meters on its gpuIndex in this JavaScript environment meter it through the normal
 * selection, so a server's energy accounting can be exercised in CI without a GPU. Its records say
 * `backend: "simulated"` and, in their reason, that they measure no hardware.
 *
 * ```ts
 * import { simulateCard } from "giul/testing";
 * const card = simulateCard({ gpuIndex: 0, watts: [[0, 90], [200, 310]] });
 * // … Meter.forNode({ name: "ci", gpuIndex: 0, idleW: 90 }) measures 220 W above idle after 200 ms
 * card.close();
 * ```
 */
import {
  declareSimulatedCard,
  type SimulatedPower,
  undeclareSimulatedCard,
} from "./sources/simulated/descriptor.js";
import { GiulError } from "./vocabulary/errors.js";
import { describeValue, firstUnknownKey, unknownKey } from "./vocabulary/validate.js";

export type { SimulatedPower } from "./sources/simulated/descriptor.js";

export interface SimulateCardOptions {
  /** The card to stand in for (default 0). */
  readonly gpuIndex?: number;
  /**
   * Its power (W): a constant, a function of the seconds since simulateCard() was called, or
   * `[offsetMs, watts]` steps (each holding until the next).
   */
  readonly watts: SimulatedPower;
}

export interface SimulatedCardHandle {
  readonly gpuIndex: number;
  /** The card stops being simulated: later windows on its index meter the real card, if any. */
  close(): void;
}

const KNOWN: readonly string[] = ["gpuIndex", "watts"];

function invalid(field: string, message: string): GiulError {
  return new GiulError("INVALID_OPTION", `${field}: ${message}`, { field });
}

/** Simulates GPU `gpuIndex` drawing `watts`, until close(). Throws GiulError for bad options. */
export function simulateCard(options: SimulateCardOptions): SimulatedCardHandle {
  if (options === null || typeof options !== "object") {
    throw invalid("options", `expected an object, got ${describeValue(options)}`);
  }
  const unknown = firstUnknownKey(options, KNOWN);
  if (unknown !== null) throw invalid(unknown, unknownKey(unknown, KNOWN));
  const gpuIndex = options.gpuIndex ?? 0;
  if (!Number.isInteger(gpuIndex) || gpuIndex < 0 || gpuIndex > 1023) {
    throw invalid("gpuIndex", `expected an integer from 0 to 1023, got ${describeValue(gpuIndex)}`);
  }
  const watts = options.watts;
  const validSteps =
    Array.isArray(watts) &&
    watts.length > 0 &&
    watts.every(
      (p) =>
        Array.isArray(p) && p.length === 2 && Number.isFinite(p[0]) && Number.isFinite(p[1]) && p[1] >= 0,
    );
  if (
    !(typeof watts === "number" && Number.isFinite(watts) && watts >= 0) &&
    typeof watts !== "function" &&
    !validSteps
  ) {
    throw invalid(
      "watts",
      `expected watts ≥ 0, a function of seconds, or [offsetMs, watts] steps, got ${describeValue(watts)}`,
    );
  }
  declareSimulatedCard(gpuIndex, watts);
  let open = true;
  return {
    gpuIndex,
    close() {
      if (!open) return;
      open = false;
      undeclareSimulatedCard(gpuIndex);
    },
  };
}
