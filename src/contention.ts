import { readFileSync } from "node:fs";
import type { ResolvedNode } from "./rules/node.js";
import type { CardReader } from "./track/card.js";
import type { ContendingProcess, Partition, ProcessInfo, ProcessRead } from "./vocabulary/measurement.js";

/** A process-list read that has not answered in this long counts as failed (ms). */
export const DEFAULT_READ_TIMEOUT_MS = 5_000;

/**
 * A shared card is witnessed, not measured: board power is per card and no driver attributes
 * watts to a process, so a foreign process's draw lands on whatever request is in flight.
 *
 * Each resident compute process is ours (matches `servingMatch`), ignored by name
 * (`contentionIgnore`, never by size), under the floor (`contentionFloorMib`), or a tenant. Two or
 * more processes matching `servingMatch` are all tenants: when more than one is resident, none can
 * be assumed ours.
 */

export type ProcessClass = "ours" | "ignored" | "small" | "tenant";

function basename(name: string): string {
  const slash = Math.max(name.lastIndexOf("/"), name.lastIndexOf("\\"));
  return slash >= 0 ? name.slice(slash + 1) : name;
}

/** Whether a process name is ours: a RegExp is tested as given, a string matched case-insensitively. */
export function matchesServing(match: string | RegExp, name: string | null): boolean {
  if (name === null) return false;
  if (match instanceof RegExp) {
    match.lastIndex = 0;
    return match.test(name);
  }
  return name.toLowerCase().includes(match.toLowerCase());
}

/** Whether a process name is on the ignore list: the entry matches the name or its last path part. */
export function isIgnored(ignore: readonly string[], name: string | null): boolean {
  if (name === null || ignore.length === 0) return false;
  const full = name.toLowerCase();
  const base = basename(full);
  return ignore.some((entry) => {
    const e = entry.toLowerCase();
    return base === e || full === e || base.includes(e);
  });
}

/**
 * Classifies the processes of one snapshot; returns the tenants (empty when none). On a MIG slice
 * (`partition`), a process on another slice of the card is a tenant unless it matches
 * `servingMatch` (a server on that slice) or is ignored or small, whether or not the node sets
 * `servingMatch`: a slice never has the card alone. On its own slice, as on a card.
 */
export function tenantsOf(
  node: ResolvedNode,
  processes: readonly ProcessInfo[],
  partition: Partition | null = null,
  slices: SliceTenancy | null = null,
): ContendingProcess[] {
  const match = node.servingMatch;
  if (match === null && partition === null) return [];
  const ours: ProcessInfo[] = [];
  const tenants: ContendingProcess[] = [];
  for (const p of processes) {
    const elsewhere =
      partition !== null && p.gpuInstanceId !== undefined && p.gpuInstanceId !== partition.gpuInstanceId;
    if (match === null && !elsewhere) continue;
    // On another slice, one of the card's giul processes (the card's log knows their pids) is not a
    // tenant; one whose pid cannot be matched here is neither, and said.
    if (elsewhere && slices !== null && !(match !== null && matchesServing(match, p.name))) {
      const mine = slices.giul(p);
      if (mine === true) continue;
      if (mine === null) {
        slices.unmatched.push(p);
        continue;
      }
    }
    const cls = classify(node, p);
    if (cls === "ours" && !elsewhere) ours.push(p);
    else if (cls === "tenant") tenants.push(tenant(p));
  }
  if (ours.length > 1) for (const p of ours) tenants.push(tenant(p));
  return tenants;
}

/** A tenant as a record names it: its pid, name and memory, and its MIG instance where known. */
function tenant(p: ProcessInfo): ContendingProcess {
  const t = { pid: p.pid, name: p.name, usedMib: p.usedMib };
  return p.gpuInstanceId === undefined ? t : { ...t, gpuInstanceId: p.gpuInstanceId };
}

/**
 * On a MIG slice, whether a process on another slice is one of the card's giul processes: true,
 * false, or null where its pid cannot be matched here; those are collected in `unmatched`.
 */
export interface SliceTenancy {
  giul(p: ProcessInfo): boolean | null;
  readonly unmatched: ProcessInfo[];
}

/**
 * A SliceTenancy over the card log's pids: a pid NVML reports is matched where this process sees
 * it as the same process (/proc/<pid>/comm begins its name); else (a container sees other pids
 * than NVML reports, or the process is gone) it cannot be told.
 */
export function sliceTenancy(giulPids: readonly number[]): SliceTenancy {
  const pids = new Set(giulPids);
  // Each pid is looked up once per window, however many snapshots list it (a synchronous read).
  const seen = new Map<number, boolean | null>();
  const lookUp = (p: ProcessInfo): boolean | null => {
    let comm: string;
    try {
      comm = readFileSync(`/proc/${p.pid}/comm`, "utf8").trim();
    } catch {
      return null;
    }
    const name = basename(p.name ?? "");
    if (comm === "" || !(name.startsWith(comm) || comm.startsWith(name.slice(0, 15)))) return null;
    return pids.has(p.pid);
  };
  return {
    unmatched: [],
    giul(p: ProcessInfo): boolean | null {
      let mine = seen.get(p.pid);
      if (mine === undefined) {
        mine = lookUp(p);
        seen.set(p.pid, mine);
      }
      return mine;
    },
  };
}

/** The class of one process on a node that sets `servingMatch`. */
export function classify(node: ResolvedNode, p: ProcessInfo): ProcessClass {
  if (node.servingMatch !== null && matchesServing(node.servingMatch, p.name)) return "ours";
  if (isIgnored(node.contentionIgnore, p.name)) return "ignored";
  // An unknown size is not a small one: only a known size can be under the floor.
  if (p.usedMib !== null && p.usedMib < node.contentionFloorMib) return "small";
  return "tenant";
}

/**
 * Coalesces process-list reads of one card: however many windows open and close, at most one read
 * per `intervalMs` (reads serialise on the driver and can take milliseconds). An edge uses the
 * first snapshot whose read started at or after it. Also keeps recent snapshots for windows that
 * watch for contention during their span.
 *
 * Every snapshot settles within `readTimeoutMs`: a read that has not answered by then (nvidia-smi
 * stuck in the driver, an NVML call that never returns) is a failed read, so a window's close()
 * never waits on it longer than that.
 */
export class ProcessWatcher {
  private readonly reader: CardReader;
  private readonly intervalMs: number;
  private readonly readTimeoutMs: number;
  private last: ProcessRead | null = null;
  private inflight: { startNs: bigint; promise: Promise<ProcessRead> } | null = null;
  private scheduled: { promise: Promise<ProcessRead> } | null = null;
  private lastStartMs = Number.NEGATIVE_INFINITY;
  private readonly history: ProcessRead[] = [];
  private watchers = 0;
  private watchTimer: NodeJS.Timeout | null = null;
  /** Reads started so far (for tests and diagnostics). */
  reads = 0;

  constructor(reader: CardReader, intervalMs = 100, readTimeoutMs = DEFAULT_READ_TIMEOUT_MS) {
    this.reader = reader;
    this.intervalMs = intervalMs;
    this.readTimeoutMs = readTimeoutMs;
  }

  /** The first snapshot taken at or after `tNs`. Never rejects; settles within the read timeout. */
  after(tNs: bigint): Promise<ProcessRead> {
    if (this.last !== null && this.last.tNs >= tNs) return Promise.resolve(this.last);
    if (this.inflight !== null && this.inflight.startNs >= tNs) return this.inflight.promise;
    // A read that has not started yet will start after tNs: join it.
    if (this.scheduled !== null) return this.scheduled.promise;
    const wait = this.lastStartMs + this.intervalMs - performance.now();
    if (wait <= 0 && this.inflight === null) return this.start();
    const promise = new Promise<ProcessRead>((resolve) => {
      // Not unref'd: a caller awaiting close() is waiting on this read.
      setTimeout(
        () => {
          this.scheduled = null;
          resolve(this.start());
        },
        Math.max(1, wait),
      );
    });
    this.scheduled = { promise };
    return promise;
  }

  /** Starts a read; its snapshot is stamped with when the read started, the instant it witnesses. */
  private start(): Promise<ProcessRead> {
    const startNs = process.hrtime.bigint();
    this.lastStartMs = performance.now();
    this.reads += 1;
    const promise = new Promise<ProcessRead>((resolve) => {
      // Not unref'd either: it ends a wait that a close() may be in.
      const timer = setTimeout(
        () =>
          resolve({
            ok: false,
            tNs: startNs,
            reason: `the process list did not come within ${this.readTimeoutMs} ms`,
          }),
        this.readTimeoutMs,
      );
      let read: Promise<ProcessRead>;
      try {
        read = this.reader.readProcesses();
      } catch (error) {
        read = Promise.reject(error);
      }
      read.then(
        (r) => {
          clearTimeout(timer);
          resolve(
            r.ok
              ? { ok: true, tNs: startNs, processes: r.processes }
              : { ok: false, tNs: startNs, reason: r.reason },
          );
        },
        (error: unknown) => {
          clearTimeout(timer);
          resolve({ ok: false, tNs: startNs, reason: String(error) });
        },
      );
    });
    const entry = { startNs, promise };
    this.inflight = entry;
    void promise.then((stamped) => {
      if (this.inflight === entry) this.inflight = null;
      if (this.last === null || this.last.tNs < startNs) this.last = stamped;
      if (this.watchers > 0) {
        this.history.push(stamped);
        if (this.history.length > 256) this.history.shift();
      }
    });
    return promise;
  }

  /** A window starts watching: the card is read every interval while any window watches. */
  watch(): void {
    this.watchers += 1;
    if (this.watchTimer !== null) return;
    this.watchTimer = setInterval(() => {
      void this.after(process.hrtime.bigint());
    }, this.intervalMs);
    this.watchTimer.unref();
  }

  unwatch(): void {
    this.watchers = Math.max(0, this.watchers - 1);
    if (this.watchers === 0 && this.watchTimer !== null) {
      clearInterval(this.watchTimer);
      this.watchTimer = null;
      this.history.length = 0;
    }
  }

  /** Snapshots whose reads started in [fromNs, toNs], kept while windows watch. */
  seenBetween(fromNs: bigint, toNs: bigint): ProcessRead[] {
    return this.history.filter((r) => r.tNs >= fromNs && r.tNs <= toNs);
  }
}

const watchers = new WeakMap<CardReader, ProcessWatcher>();

/** The one watcher of a card (its reader), created on first use with the node's interval. */
export function watcherFor(reader: CardReader, intervalMs: number): ProcessWatcher {
  let w = watchers.get(reader);
  if (w === undefined) {
    w = new ProcessWatcher(reader, intervalMs);
    watchers.set(reader, w);
  }
  return w;
}

/** Who contended a window's card: the tenants seen, or why that could not be checked. */
export interface WindowContention {
  readonly contendedBy: readonly ContendingProcess[] | null;
  readonly unchecked: string | null;
}

/**
 * Tenants of a window's card at its two edges (and, when `watching`, in between), from `watcher`'s
 * snapshots (`atOpen`: the one taken for the opening edge, if any). Never rejects.
 */
export async function contentionOver(
  node: ResolvedNode,
  watcher: ProcessWatcher,
  atOpen: Promise<ProcessRead> | null,
  watching: boolean,
  openNs: bigint,
  closeNs: bigint,
  partition: Partition | null = null,
  giulPids: (() => readonly number[]) | null = null,
): Promise<WindowContention> {
  try {
    const [opened, closed] = await Promise.all([atOpen ?? watcher.after(openNs), watcher.after(closeNs)]);
    const seen = watching ? watcher.seenBetween(openNs, closeNs) : [];
    if (watching) watcher.unwatch();
    const byPid = new Map<number, ContendingProcess>();
    const unreadable: string[] = [];
    const slices = partition !== null && giulPids !== null ? sliceTenancy(giulPids()) : null;
    for (const [label, read] of [
      ["opening edge", opened],
      ...seen.map((r) => ["window", r] as const),
      ["closing edge", closed],
    ] as const) {
      if (!read.ok) {
        if (label !== "window") unreadable.push(`at the ${label}: ${read.reason}`);
        continue;
      }
      for (const t of tenantsOf(node, read.processes, partition, slices))
        if (!byPid.has(t.pid)) byPid.set(t.pid, t);
    }
    const unmatched = [...new Set(slices?.unmatched.map((p) => `pid ${p.pid} (${p.name ?? "?"})`) ?? [])];
    if (unmatched.length > 0)
      unreadable.push(
        `on the card's other MIG slices: ${unmatched.join(", ")}, as NVML reports it, is not that process here (a container sees other pids), so whether it is one of the card's giul processes cannot be told`,
      );
    return {
      contendedBy: [...byPid.values()],
      unchecked: unreadable.length > 0 ? `contention could not be checked ${unreadable.join("; ")}` : null,
    };
  } catch (error) {
    return { contendedBy: null, unchecked: `contention could not be checked: ${String(error)}` };
  }
}
