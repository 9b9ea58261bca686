/**
 * The addon's exact surface (build/Release/giul.node, prebuilds/<platform>-<arch>/giul.node).
 *
 * This is the one contract between native/ and src/: src/sources/native/binding.ts loads the addon and casts it
 * to {@link GiulBinding} once; nothing else in src/ touches the addon. The addon knows nothing of
 * idle power, stages, tokens or methods: it loads NVML, answers questions about devices off the JS
 * thread, and runs one sampling thread per device that writes timestamped samples into a ring that
 * TypeScript reads without a call per sample.
 *
 * Failures are values, never exceptions: every method resolves (or returns) either its result with
 * `ok: true` or a {@link NativeFailure}. Only a call with arguments of the wrong type throws a
 * TypeError, and src/ never makes one.
 */

/** Stable failure codes, one per cause; mirrored as a union in src/vocabulary/errors.ts. */
export type NativeFailureCode =
  /** dlopen of libnvidia-ml.so.1 (or GIUL_NVML_LIBRARY) failed: no driver installed. */
  | "NVML_LIBRARY_NOT_FOUND"
  /** A symbol the feature needs is missing from the library. */
  | "NVML_SYMBOL_NOT_FOUND"
  /** nvmlInit returned DRIVER_NOT_LOADED (9). */
  | "NVML_DRIVER_NOT_LOADED"
  /** nvmlInit returned another error. */
  | "NVML_INIT_FAILED"
  /** No device at that index, or its handle cannot be taken. */
  | "NVML_DEVICE_NOT_FOUND"
  /** GPU_IS_LOST (15) or GPU requires reset (16). */
  | "NVML_GPU_LOST"
  /** NOT_SUPPORTED (3) for the feature asked for. */
  | "NVML_NOT_SUPPORTED"
  /** Any other NVML error. */
  | "NVML_CALL_FAILED"
  /** The sampler cannot be started (thread creation failed, or out of memory). */
  | "SAMPLER_FAILED"
  /** AMD SMI's counterparts of the NVML_ codes, from amdInit, amdDeviceInfo, amdProcesses. */
  | "AMDSMI_LIBRARY_NOT_FOUND"
  | "AMDSMI_SYMBOL_NOT_FOUND"
  | "AMDSMI_DRIVER_NOT_LOADED"
  | "AMDSMI_INIT_FAILED"
  | "AMDSMI_DEVICE_NOT_FOUND"
  | "AMDSMI_NOT_SUPPORTED"
  | "AMDSMI_CALL_FAILED"
  /** libamd_smi is of a major version whose struct layouts giul does not read (before 26). */
  | "AMDSMI_VERSION_REFUSED";

export interface NativeFailure {
  readonly ok: false;
  readonly code: NativeFailureCode;
  /** The nvmlReturn_t value, when an NVML call produced the failure. */
  readonly nvmlReturn: number | null;
  /** The amdsmi_status_t value, when an AMD SMI call produced the failure. */
  readonly amdsmiStatus?: number | null;
  /** For a person: what failed and, where known, how to fix it. */
  readonly reason: string;
}

/** AMD SMI loaded and initialised for AMD GPUs. */
export interface AmdInfo {
  readonly ok: true;
  /** What dlopen was given (GIUL_AMDSMI_LIBRARY, or the candidate that loaded). */
  readonly library: string;
  /** "26.1.0", as amdsmi_get_lib_version reports it. */
  readonly version: string;
  /** AMD GPUs, numbered as `amd-smi list` numbers them. */
  readonly deviceCount: number;
}

/** NVML loaded and initialised. */
export interface NvmlInfo {
  readonly ok: true;
  /** What dlopen was given ("libnvidia-ml.so.1" or the GIUL_NVML_LIBRARY path). */
  readonly library: string;
  /** nvmlSystemGetDriverVersion, or null when it failed. */
  readonly driverVersion: string | null;
  /** nvmlSystemGetNVMLVersion, or null. */
  readonly nvmlVersion: string | null;
  /** nvmlDeviceGetCount_v2 (or v1). */
  readonly deviceCount: number;
  /**
   * For each feature, the symbol that serves it, or null when the library lacks every candidate.
   * Keys: init, count, handle, name, uuid, energy, power, fieldValues, memory, utilization,
   * processes, processName, driverVersion.
   */
  readonly symbols: Readonly<Record<string, string | null>>;
}

/** One device's state, read off the JS thread. Each field is null when its read failed. */
export interface DeviceInfo {
  readonly ok: true;
  readonly index: number;
  readonly name: string | null;
  readonly uuid: string | null;
  readonly memoryTotalMib: number | null;
  readonly memoryUsedMib: number | null;
  readonly memoryFreeMib: number | null;
  readonly utilizationPct: number | null;
  /** nvmlDeviceGetTotalEnergyConsumption answered. */
  readonly energyCounter: boolean;
  /** Field 186 (instantaneous power) answered. */
  readonly instantPower: boolean;
  /** nvmlDeviceGetPowerUsage answered (on recent cards a 1 s trailing average). */
  readonly powerUsage: boolean;
  /** Power now in watts (instantaneous where offered), or null. */
  readonly powerW: number | null;
  /** The power limit the card enforces (nvmlDeviceGetEnforcedPowerLimit), in watts, or null. */
  readonly powerLimitW: number | null;
  /** Why a field is null or a feature false, per field name, for diagnosis. */
  readonly notes: Readonly<Record<string, string>>;
  /**
   * AMD: this card is one of several whose energy one counter counts (an MI250 die pair; the
   * partitions of a partitioned MI300X socket): the card whose counter it is, all of them, and
   * which kind (absent otherwise).
   */
  readonly sharedCounter?: {
    readonly at: number;
    readonly cards: readonly number[];
    readonly kind: "pair" | "partition";
  };
}

export interface NativeProcess {
  readonly pid: number;
  /** null when NVML reports NVML_VALUE_NOT_AVAILABLE. */
  readonly usedMib: number | null;
  /** nvmlSystemGetProcessName, or null when it failed. */
  readonly name: string | null;
  /** The MIG GPU instance it runs on (a card in MIG mode; v2 process entries and newer). */
  readonly gpuInstanceId?: number;
}

/** One MIG device (slice) of a card in MIG mode; unreadable values are null. */
export interface NativeMigSlice {
  /** Its slot (nvmlDeviceGetMigDeviceHandleByIndex). */
  readonly slot: number;
  readonly uuid: string | null;
  /** nvmlDeviceGetName on the slice: the card's name and " MIG <profile>". */
  readonly name: string | null;
  readonly gpuInstanceId: number | null;
  readonly computeInstanceId: number | null;
  /** Its GPU instance's slices of the card (nvmlDeviceGetAttributes_v2: a 3g profile has 3). */
  readonly slices: number | null;
  readonly memoryTotalMib: number | null;
  readonly memoryUsedMib: number | null;
}

/** A card's MIG mode and slices (migDevices). */
export interface MigInfo {
  readonly ok: true;
  readonly index: number;
  /** The card answered nvmlDeviceGetMigMode. */
  readonly supported: boolean;
  readonly enabled: boolean;
  /** nvmlDeviceGetMaxMigDeviceCount: the card's slices (7 on A100, H100, H200), or null. */
  readonly cardSlices: number | null;
  /** Why MIG is not known (no MIG calls, the card refused), or null. */
  readonly note: string | null;
  readonly slices: readonly NativeMigSlice[];
}

export interface ProcessList {
  readonly ok: true;
  /** CLOCK_MONOTONIC ns at which the list was read (the midpoint of the call). */
  readonly tNs: bigint;
  readonly processes: readonly NativeProcess[];
}

/**
 * Layout of the sampler ring, in Float64 slots (index into a Float64Array over the buffer).
 *
 * Header (slots 0..HEADER_SLOTS-1). Slot 0 holds two uint32 words: word 0 is the seqlock
 * generation (odd while the thread writes, incremented twice per sample), word 1 the layout
 * version. A consistent read: g = Atomics.load(u32, 0); g even; read; Atomics.load(u32, 0) === g.
 * A write section writes only the next sample and the header, and opens with a release store of
 * the generation: while g is odd, a sample a reader already knew complete (below a head it read
 * consistently) that is not the oldest is read all the same, g unchanged after it
 * (src/sources/native/seqlock.ts).
 *
 * Sample k (k = 0, 1, 2, … counted since the sampler started) lives at
 * HEADER_SLOTS + (k % capacity) * SAMPLE_SLOTS.
 */
export interface RingLayout {
  readonly version: number;
  readonly headerSlots: number;
  readonly sampleSlots: number;
  /** Header slot: number of samples written so far (the next k). */
  readonly hHead: number;
  /** Header slot: ring capacity in samples. */
  readonly hCapacity: number;
  /** Header slot: current period in ns. */
  readonly hPeriodNs: number;
  /** Header slot: 0 starting, 1 running, 2 failed (no read has succeeded yet; the thread keeps retrying, at most every 100 ms), 3 stopped. */
  readonly hState: number;
  /** Header slot: the last nvmlReturn_t that failed a read (0 when none). */
  readonly hLastError: number;
  /** Header slot: 1 once the energy counter has answered on some tick. */
  readonly hCounter: number;
  /** Header slot: power source: 0 none, 1 field 186 (instant), 2 nvmlDeviceGetPowerUsage. */
  readonly hPowerSource: number;
  /**
   * Header slot: the counter's update step estimated from above, ns (0 until two changes are seen):
   * the smallest interval from the last read before a change to the read that saw the next change.
   * Never below the true step, however late the thread ran; about one period above it.
   */
  readonly hCounterStepNs: number;
  /**
   * Header slot: the power readings' resolution in mW (1 for NVML; 1000 for AMD SMI, whose socket
   * power is whole watts). Absent from an addon built before AMD support (then 1).
   */
  readonly hPowerQuantumMw?: number;
  /**
   * Sample slot: CLOCK_MONOTONIC ns minus epochNs, at the midpoint of the counter read when the
   * counter answered, else of the tick's reads (see sReadNs).
   */
  readonly sT: number;
  /** Sample slot: energy counter in mJ, NaN when the read failed or is unsupported. */
  readonly sEnergyMj: number;
  /** Sample slot: power in mW, NaN when the read failed. */
  readonly sPowerMw: number;
  /** Sample slot: running trapezoid integral of power in mJ since the sampler started. */
  readonly sIntegralMj: number;
  /** Sample slot: flags, see SampleFlag. */
  readonly sFlags: number;
  /** Sample slot: nvmlReturn_t of a failed read on this tick (0 when none). */
  readonly sError: number;
  /** Sample slot: count of faulty samples (any FAULT flag) up to and including this one. */
  readonly sFaults: number;
  /**
   * Sample slot: duration (ns) of the read that `sT` stamps (the counter read when the counter
   * answered, else the whole tick). The value belongs to some instant in that interval.
   */
  readonly sReadNs: number;
  /**
   * Sample slot: CLOCK_MONOTONIC ns minus epochNs at the midpoint of the power read (NaN when power
   * was not read on this tick). The power read follows the counter read in the same tick.
   */
  readonly sPowerT: number;
  /** Sample slot: duration (ns) of the power read: its value belongs to some instant in it. */
  readonly sPowerReadNs: number;
}

/** Bits of the sFlags slot. */
export interface SampleFlags {
  /** The energy counter read succeeded. */
  readonly ENERGY_OK: number;
  /** The power read succeeded. */
  readonly POWER_OK: number;
  /** The counter went backwards since the previous good read (driver reload). FAULT. */
  readonly COUNTER_BACKWARDS: number;
  /** The counter rose faster than 5 kW since its previous change. FAULT. */
  readonly COUNTER_JUMP: number;
  /** A read that had succeeded before failed on this tick (GPU lost, …). FAULT. */
  readonly READ_FAILED: number;
}

/**
 * Layout of a card's event log, in Float64 slots (index into a Float64Array over
 * {@link NativeCardLog.buffer}).
 *
 * Windows (requests being metered) open, close, change weight and mark stages on a card from every
 * process of this user on the host, every JavaScript environment and every copy of giul in each;
 * each appends its events here through {@link NativeCardLog.append}, so that every one of them sees
 * every window's events in time order, with the host-wide count and weight of the card's windows.
 *
 * Header (slots 0..headerSlots-1). Slot 0 holds two uint32 words: word 0 is the seqlock generation
 * (odd while an append writes, incremented twice per append), word 1 the layout version — the same
 * protocol as the ring's, including its reads of entries known complete while an append writes.
 * A consistent read: g = Atomics.load(u32, 0); g even; read; Atomics.load(u32, 0) === g. The log
 * may be shared with other processes: every value read is to be checked before it is used.
 *
 * Entry k (k = 0, 1, 2, … the sequence number append returned) lives at
 * headerSlots + (k % capacity) * entrySlots while hPublished - capacity <= k < hPublished.
 */
export interface CardLogLayout {
  /** The layout version, also stored as uint32 word 1 of the buffer. */
  readonly version: number;
  /** Slots before entry 0. */
  readonly headerSlots: number;
  /** Slots per entry. */
  readonly entrySlots: number;
  /** Header slot: entries appended so far (the next sequence number). */
  readonly hPublished: number;
  /** Header slot: capacity in entries (entry k lives at headerSlots + (k % capacity) * entrySlots). */
  readonly hCapacity: number;
  /** Header slot: the idle floor (W) charged for the card while windows are open, NaN while none is. */
  readonly hIdleW: number;
  /** Header slot: windows open on the card, host-wide. */
  readonly hOpen: number;
  /** Header slot: their total weight (exactly 0 when none is open). */
  readonly hWeight: number;
  /** Entry slot: CLOCK_MONOTONIC ns minus {@link NativeCardLog.epochNs}, stamped under the log's lock (sequence order is time order). */
  readonly eT: number;
  /** Entry slot: total weight open on the card just before the event. */
  readonly eWeightBefore: number;
  /** Entry slot: total weight open on the card just after the event (exactly 0 when eCountAfter is 0). */
  readonly eWeightAfter: number;
  /** Entry slot: windows open on the card just after the event. */
  readonly eCountAfter: number;
  /**
   * Entry slot: the idle floor charged for the card after the event (NaN when none is open): the
   * idleW of the open that found the card empty, kept until it empties again.
   */
  readonly eIdleAfter: number;
  /** Entry slot: the appending process's pid. */
  readonly ePid: number;
  /** Entry slot: the appending participant's slot in the process table ({@link NativeCardLog.slot}). */
  readonly eSlot: number;
  /**
   * Entry slot: what the event is: 1 open, 2 close, 3 weight change, 4 stage mark, 5 the windows
   * a dropped reference left open closed, 6 the windows of a process that died closed.
   */
  readonly eKind: number;
}

/**
 * One environment's hold on a card's event log ({@link GiulBinding.openCardLog}): shared by every
 * process of this user on the host (`scope` "host"), or, where that could not be had, by the
 * environments of this process alone (`scope` "process", with the reason).
 */
export interface NativeCardLog {
  readonly ok: true;
  readonly scope: "host" | "process";
  /** Why the log is not shared host-wide; null when it is. */
  readonly reason: string | null;
  /** The log (see CardLogLayout). */
  readonly buffer: ArrayBuffer;
  /** CLOCK_MONOTONIC ns that entries' eT count from. */
  readonly epochNs: bigint;
  /** This process's participant slot (the eSlot of what it appends). */
  readonly slot: number;
  /**
   * Appends one event and returns its sequence number (≥ 0): a window opens (deltaCount 1, its
   * weight as deltaWeight, the idle floor its node charges as idleW, kind 1), closes (−1, −its
   * weight, kind 2), changes weight (0, the change, kind 3), or marks a stage (0, 0, kind 4). An
   * open that finds windows open keeps the card's idle floor (eIdleAfter tells which). Returns −2
   * after release(), −3 when the log's lock could not be had within 20 ms, −4 when the log holds
   * values no giul wrote; nothing is appended then. Never calls NVML, never blocks longer than that.
   *
   * This reference remembers the weight and count it appended; when it is dropped (release(), its
   * finaliser, its environment's teardown) with windows still open, one event closing them is
   * appended for it (kind 5). Throws a TypeError (src/ never makes one) on arguments of the wrong
   * kind.
   */
  append(deltaWeight: number, deltaCount: number, idleW: number, kind: number): number;
  /**
   * Closes the windows of every participant whose process is gone (pid and start time, from
   * /proc): one entry (kind 6) each. How many were reaped; at most every 200 ms, else 0.
   */
  reap(): number;
  /** The pids of the processes holding the log (this one included). */
  pids(): number[];
  /** Drops this reference (see append). Idempotent. */
  release(): void;
}

/** openCardLog's answer where the card's segment has another layout (another version of giul). */
export interface CardLogRefused {
  readonly ok: false;
  readonly reason: string;
}

/** A reference to the process-wide sampling thread of one device. */
export interface NativeSampler {
  readonly ok: true;
  /** The ring (see RingLayout), written by the thread, read by TypeScript. */
  readonly buffer: ArrayBuffer;
  /** CLOCK_MONOTONIC ns that sample times are relative to. */
  readonly epochNs: bigint;
  readonly device: number;
  /**
   * Ask for a period (ms, 1..1000). The thread runs at the shortest period any live reference
   * asked for. Takes effect on the next tick.
   */
  setPeriod(periodMs: number): void;
  /**
   * Installs this reference's doorbell (replacing any earlier one): `callback` runs on this
   * environment's thread after the sampling thread's next published tick following a wake(), once
   * per wake however many were made in between. It never keeps the process alive (whoever waits
   * holds a timer of its own), and is not called after release() or the environment's teardown.
   * Throws a TypeError when `callback` is not a function.
   */
  doorbell(callback: () => void): void;
  /**
   * Arms the doorbell (it rings after the thread's next tick); with `read` true, also asks the
   * thread for a read now: it reads as soon as it can, but never sooner than a quarter of its
   * period (0.5 to 2.5 ms) after its previous read began (however many windows ask, at most 4 reads
   * per period), and its next
   * periodic read comes a period after this one (asked reads take the place of periodic ones rather
   * than adding to them). With `counterOnly` true, the doorbell rings only after a tick whose
   * energy counter read changed or failed (edges waiting for the counter's next update), not after
   * every tick. Never calls NVML on this thread, never blocks.
   */
  wake(read?: boolean, counterOnly?: boolean): void;
  /**
   * Asks the thread for a read now, as wake(true) does, without arming the doorbell: what a
   * window's edge asks for, so that every edge has a sample right after it. Never blocks.
   */
  read(): void;
  /**
   * Drop this reference. When the last reference in the process goes, the thread is told to
   * stop (it exits after the NVML call in progress, if any; release never waits for it) and is
   * joined once it has returned; the ring is freed when the last buffer over it is collected. References are also dropped by an environment's cleanup hook and by this
   * object's finaliser. Idempotent. The buffer stays readable (a final snapshot, hState 3 once
   * stopped) after release.
   */
  release(): void;
}

/**
 * Options of the calls that run NVML off the JS thread. They run on the addon's own threads, never
 * libuv's pool, so a call stuck in the driver does not hold the process's exit.
 */
export interface NativeCallOptions {
  /**
   * Whether the pending call keeps the event loop alive, as libuv work does (default true). With
   * false a process with nothing else to do exits without waiting for the driver to answer (and the
   * promise never settles).
   */
  readonly keepAlive?: boolean;
}

export interface GiulBinding {
  readonly layout: RingLayout;
  readonly flags: SampleFlags;
  /** Layout of each card's event log (NativeCardLog.buffer). */
  readonly cardLogLayout: CardLogLayout;
  /**
   * The event log of the card `key` (its UUID; [A-Za-z0-9._-], at most 96 characters) among the
   * processes of sharing group `group` (same characters, may be empty): the host's shared-memory
   * segment (/dev/shm/giul.<uid>.<group>.<key>, mode 0600, made by the first to open it), or,
   * where it cannot be had or `processOnly`, this process's own, with why. Refused where the
   * segment holds another layout. Synchronous: opens, maps and joins the segment (no NVML).
   * Throws a TypeError when key or group is not a string; refuses an invalid one.
   */
  openCardLog(key: string, group: string, processOnly?: boolean): NativeCardLog | CardLogRefused;
  /**
   * Loads and initialises NVML off the JS thread. Once a load has succeeded, later calls share it
   * for the life of the process; while loads fail, each call tries again (a driver loaded since is
   * then found).
   */
  nvmlInit(options?: NativeCallOptions): Promise<NvmlInfo | NativeFailure>;
  /** Reads one device's state off the JS thread. Loads NVML first when it is not loaded. */
  deviceInfo(index: number, options?: NativeCallOptions): Promise<DeviceInfo | NativeFailure>;
  /** Reads the compute processes of a device (with names) off the JS thread. */
  computeProcesses(index: number, options?: NativeCallOptions): Promise<ProcessList | NativeFailure>;
  /**
   * Reads a card's MIG mode and its MIG devices off the JS thread. Absent from an addon built
   * before MIG support (its cards are then metered whole).
   */
  migDevices?(index: number, options?: NativeCallOptions): Promise<MigInfo | NativeFailure>;
  /**
   * Takes a reference to the sampling thread of a device, starting it if none runs. Makes no NVML
   * call on the calling thread. Needs nvmlInit to have succeeded (vendor "amd": amdInit), and
   * numbers cards as that vendor's library does.
   */
  openSampler(index: number, periodMs: number, vendor?: "nvidia" | "amd"): NativeSampler | NativeFailure;
  /**
   * Loads libamd_smi (GIUL_AMDSMI_LIBRARY, else libamd_smi.so.26) and initialises it for AMD GPUs,
   * off the JS thread; as nvmlInit, a failed load is tried again by each call. Absent from an addon
   * built before AMD support.
   */
  amdInit?(options?: NativeCallOptions): Promise<AmdInfo | NativeFailure>;
  /**
   * Reads one AMD card's state (deviceInfo's shape). Its `energyCounter` is true only once the
   * counter has agreed with integrated power over 0.5 s, checked once per card per process.
   */
  amdDeviceInfo?(index: number, options?: NativeCallOptions): Promise<DeviceInfo | NativeFailure>;
  /** Reads the processes on an AMD card (amdsmi_get_gpu_process_list). */
  amdProcesses?(index: number, options?: NativeCallOptions): Promise<ProcessList | NativeFailure>;
  /** Sampler threads alive in this process (for tests and diagnostics). */
  samplerThreads(): number;
  /** clock_gettime(CLOCK_MONOTONIC) in ns, the clock of process.hrtime.bigint(). */
  monotonicNs(): bigint;
}
