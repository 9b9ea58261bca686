/**
 * A window's messages on the diagnostics channels (../diagnostics.ts): its `giul:window:open`
 * message, kept to hand on with its close and energy messages, and whether its record is still
 * owed to `giul:energy` (it closed while the channel had subscribers; the first result() or the
 * tick's flush publishes it).
 */
import {
  announceClose,
  announceOpen,
  oweEnergy,
  publishEnergy,
  type WindowOpenMessage,
} from "../diagnostics.js";
import type { Energy } from "../rules/energy.js";
import type { BackendName } from "../vocabulary/measurement.js";

/** The window the messages are about (the Meter). */
type Window = Parameters<typeof announceOpen>[0];

export class WindowMessages {
  /** Its record is owed to `giul:energy`, till published. */
  owed = false;
  private opening: WindowOpenMessage | null = null;

  opened(window: Window, backend: BackendName, openNs: bigint): void {
    this.opening = announceOpen(window, backend, openNs);
  }

  closed(window: Window, backend: BackendName, openNs: bigint, closeNs: bigint): void {
    announceClose(window, this.opening, backend, openNs, closeNs);
  }

  owe(window: Window): void {
    this.owed = true;
    oweEnergy(window);
  }

  /** `energy`, published first where it is owed (the open message is let go then). */
  settled(window: Window, energy: Energy, openNs: () => bigint, closeNs: () => bigint): Energy {
    if (!this.owed) return energy;
    this.owed = false;
    const opening = this.opening;
    this.opening = null;
    publishEnergy(window, opening, energy, openNs(), closeNs());
    return energy;
  }
}
