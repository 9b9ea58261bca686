/**
 * giul — what did this answer cost in energy? Joules charged above idle per request, from the
 * GPU's own counter where it has one, labelled with how they were obtained.
 */

import type * as Channels from "./diagnostics.js";
import type { Meter } from "./meter/meter.js";

export type { CloseMessageOf, EnergyMessageOf, MeteredWindow, OpenMessageOf } from "./diagnostics.js";
export { GIUL_CHANNELS } from "./diagnostics.js";
/** `giul:window:open`: a window's opening edge was taken. */
export type WindowOpenMessage = Channels.OpenMessageOf<Meter>;
/** `giul:window:close`: a window's closing edge was taken; its record follows on `giul:energy`. */
export type WindowCloseMessage = Channels.CloseMessageOf<Meter>;
/** `giul:energy`: a closed window's record, once. */
export type EnergyMessage = Channels.EnergyMessageOf<Meter>;
export type { IdleMeasurement, IdleOptions, IdleResult } from "./idle.js";
export { measureIdle } from "./idle.js";
export type { EdgeTimes, MarkOptions, MeasureOptions, MeterOptions, ResultOptions } from "./meter/meter.js";
export { Meter } from "./meter/meter.js";
export type { NodeState, PoolFit, ProbeOptions } from "./probe.js";
export { poolFits, probeNode } from "./probe.js";
export type {
  Attribution,
  CardEnergy,
  CardRecord,
  Concurrency,
  EnergyRecord,
  Method,
  PartitionRecord,
} from "./rules/energy.js";
export { Energy } from "./rules/energy.js";
export type { Node, NodeCard, ResolvedNode } from "./rules/node.js";
export { resolveNode } from "./rules/node.js";
export type { GiulErrorCode, GiulErrorOptions, NativeErrorCode } from "./vocabulary/errors.js";
export { GiulError, isGiulError } from "./vocabulary/errors.js";
export type { BackendName, ContendingProcess, Partition, ProcessInfo } from "./vocabulary/measurement.js";
