import type { DeviceInfo } from "../../binding.js";
import type { BackendName, Result } from "../vocabulary/measurement.js";
import type { CardReader } from "./card.js";
import type { Track } from "./track.js";

/**
 * What every backend is to the one place that chooses (src/select/): a name, whether it can serve
 * a card, and how to open the card. Each backend's own file exports its descriptor; the registry
 * (src/select/registry.ts) lists them in order of preference. Adding a source of samples is one
 * folder under src/sources/ and one line there.
 */
export interface BackendDescriptor {
  readonly name: Exclude<BackendName, "none">;
  /** Whether it can serve `card`; `caps` is what a local card offers, null for a remote node. */
  canServe(card: CardTarget, caps: LocalCapabilities | null): boolean;
  /** The card's shared track and its reader, or why they cannot be had. Never throws for the card. */
  open(card: CardTarget, caps: CardCapabilities | null): Result<OpenedBackend>;
  /**
   * Where what it can serve changes outside any probe (a simulated card declared or withdrawn): a
   * number that changes with it, so that a cached local choice made before is looked at again.
   */
  generation?(): number;
}

/** What a backend opened for a card. */
export interface OpenedBackend {
  /** The card's stream of readings, shared by every window on it. */
  readonly track: Track;
  /** Reads the card's processes and state (contention, probeNode, giul-agent), or null. */
  readonly reader: CardReader | null;
}

/** The card a backend is asked about: a local GPU, or a node's agent (a resolved node is one). */
export interface CardTarget {
  readonly isLocal: boolean;
  readonly gpuIndex: number;
  /** The node's giul-agent, or null. */
  readonly powerEndpoint: string | null;
  /** Timeout of a request to the agent (ms). */
  readonly timeoutMs: number;
}

/** What a local card offers, as probed once (src/select/capabilities.ts). */
export interface LocalCapabilities {
  /** The addon loaded and NVML initialised. */
  readonly nvml: boolean;
  /** nvmlDeviceGetTotalEnergyConsumption answers on this card. */
  readonly energyCounter: boolean;
  /** NVML reads power on this card (field 186 or nvmlDeviceGetPowerUsage). */
  readonly nvmlPower: boolean;
  /** An nvidia-smi that reads this card's power was found. */
  readonly smi: boolean;
  /** The card is an AMD card that AMD SMI reads (then `energyCounter` is its counter's). */
  readonly amdsmi?: boolean;
  /** AMD SMI reads this card's socket power. */
  readonly amdPower?: boolean;
  /** An amd-smi tool was found (GIUL_AMD_SMI, PATH, /opt/rocm/bin). */
  readonly amdCli?: boolean;
  /**
   * AMD SMI's index of the card whose counter counts this card's energy, where that is another
   * card's (an MI250 die whose partner's counter counts both), and what records say of it.
   */
  readonly counterAt?: number;
  readonly counterNote?: string;
}

/** One local card, probed: what it offers, its state, and why NVML cannot read it. */
export interface CardCapabilities extends LocalCapabilities {
  /** The card's state as read when probed, or null when NVML could not read it. */
  readonly info: DeviceInfo | null;
  /** Why NVML cannot read this card (no addon, no NVML, no such index, read failed), or null. */
  readonly reason: string | null;
  /** The driver's version as NVML reported it when probed, or null (absent: not probed through NVML). */
  readonly driverVersion?: string | null;
  /** The key the card is shared by, where not its own UUID (both dies of an MI250 pair: the counter's die's). */
  readonly cardKey?: string;
  /** Whose card it is: NVIDIA's (read through NVML) or AMD's (through AMD SMI). */
  readonly vendor?: "nvidia" | "amd";
  /** The host has both vendors' cards and the card was named by index: why that cannot be. */
  readonly ambiguousIndex?: string;
}
