import { execFile } from "node:child_process";
import type { CardReader } from "../../track/card.js";
import {
  type CardInfo,
  type CardState,
  fail,
  ok,
  type ProcessInfo,
  type ProcessRead,
  type Result,
} from "../../vocabulary/measurement.js";

/**
 * Contention checks and probeNode through nvidia-smi: one short run per read (the reads are
 * coalesced by the ProcessWatcher, so at most one a card per interval), off the JS thread.
 * Every unreadable value (`[N/A]`, `[Insufficient Permissions]`, …) is null, never 0.
 */

const TIMEOUT_MS = 5_000;

function run(
  path: string,
  args: readonly string[],
): Promise<{ ok: true; out: string } | { ok: false; reason: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      path,
      args,
      { timeout: TIMEOUT_MS, killSignal: "SIGKILL", maxBuffer: 1 << 20, env: process.env, windowsHide: true },
      (error, stdout, stderr) => {
        if (error) {
          const said = `${stdout}\n${stderr}`.trim().split("\n")[0] ?? "";
          resolve({
            ok: false,
            reason: `nvidia-smi failed (${error.code ?? error.signal ?? "error"})${said ? `: ${said}` : ""}`,
          });
        } else resolve({ ok: true, out: stdout });
      },
    );
    child.unref();
  });
}

/** A number, or null for a bracketed token, `N/A` or anything that is not plainly a number. */
function num(cell: string | undefined): number | null {
  if (cell === undefined) return null;
  const t = cell.trim();
  if (!/^-?\d+(\.\d+)?$/.test(t)) return null;
  return Number(t);
}

function text(cell: string | undefined): string | null {
  if (cell === undefined) return null;
  const t = cell.trim();
  return t === "" || t.startsWith("[") || t === "N/A" ? null : t;
}

/** Parses `--query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid` (noheader,nounits). */
export function parseComputeApps(out: string, uuid: string | null): Result<ProcessInfo[]> {
  const apps: ProcessInfo[] = [];
  for (const line of out.split("\n")) {
    if (line.trim() === "") continue;
    const cells = line.split(", ");
    if (cells.length < 4)
      return fail(`unexpected line from nvidia-smi: ${JSON.stringify(line.slice(0, 120))}`);
    // The process name may itself hold ", ": the pid is first, the memory and uuid last.
    const pid = num(cells[0]);
    const gpu = text(cells[cells.length - 1]);
    const usedMib = num(cells[cells.length - 2]);
    const name = text(cells.slice(1, -2).join(", "));
    if (pid === null) return fail(`unreadable pid from nvidia-smi: ${JSON.stringify(line.slice(0, 120))}`);
    if (uuid !== null && gpu !== null && gpu !== uuid) continue;
    apps.push({ pid, name, usedMib });
  }
  return ok(apps);
}

/** One card's row of `--query-gpu`: every unreadable value null. */
export interface SmiGpuState {
  readonly uuid: string | null;
  readonly name: string | null;
  readonly memoryTotalMib: number | null;
  readonly memoryUsedMib: number | null;
  readonly memoryFreeMib: number | null;
  readonly utilizationPct: number | null;
}

/** Reads card `index`'s uuid, memory, utilization and name with one nvidia-smi run. Never rejects. */
export async function readSmiGpu(
  path: string,
  index: number,
): Promise<{ ok: true; gpu: SmiGpuState } | { ok: false; reason: string }> {
  const r = await run(path, [
    "-i",
    String(index),
    "--query-gpu=uuid,memory.total,memory.used,memory.free,utilization.gpu,name",
    "--format=csv,noheader,nounits",
  ]);
  if (!r.ok) return r;
  const line = r.out.split("\n").find((l) => l.trim() !== "");
  if (line === undefined) return { ok: false, reason: "nvidia-smi printed no row for the card" };
  const cells = line.split(", ");
  if (cells.length < 6)
    return { ok: false, reason: `unexpected line from nvidia-smi: ${JSON.stringify(line.slice(0, 120))}` };
  return {
    ok: true,
    gpu: {
      uuid: text(cells[0]),
      memoryTotalMib: num(cells[1]),
      memoryUsedMib: num(cells[2]),
      memoryFreeMib: num(cells[3]),
      utilizationPct: num(cells[4]),
      // The name is last: it is the one cell that could hold ", ".
      name: text(cells.slice(5).join(", ")),
    },
  };
}

export function smiCardReader(path: string, index: number): CardReader {
  let uuid: string | null = null;
  const readGpu = async (): Promise<{ ok: true; gpu: SmiGpuState } | { ok: false; reason: string }> => {
    const r = await readSmiGpu(path, index);
    if (r.ok) uuid = r.gpu.uuid;
    return r;
  };
  const readProcesses = async (): Promise<ProcessRead> => {
    const tNs = process.hrtime.bigint();
    if (uuid === null) {
      const g = await readGpu();
      if (!g.ok) return { ok: false, tNs, reason: g.reason };
    }
    const r = await run(path, [
      "-i",
      String(index),
      "--query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid",
      "--format=csv,noheader,nounits",
    ]);
    if (!r.ok) return { ok: false, tNs, reason: r.reason };
    const apps = parseComputeApps(r.out, uuid);
    return apps.ok ? { ok: true, tNs, processes: apps.value } : { ...apps, tNs };
  };
  return {
    readProcesses,
    async readInfo(): Promise<Result<CardInfo>> {
      const g = await readGpu();
      return g.ok ? ok(infoOf(g.gpu)) : fail(g.reason);
    },
    async readState(): Promise<Result<CardState>> {
      const g = await readGpu();
      if (!g.ok) return g;
      const procs = await readProcesses();
      if (!procs.ok) return fail(procs.reason);
      return ok({ ...infoOf(g.gpu), computeApps: procs.processes });
    },
  };
}

/** The row's values; the power is the sampler's to read, not this row's. */
function infoOf(g: SmiGpuState): CardInfo {
  return {
    name: g.name,
    memoryTotalMib: g.memoryTotalMib,
    memoryUsedMib: g.memoryUsedMib,
    memoryFreeMib: g.memoryFreeMib,
    utilizationPct: g.utilizationPct,
    powerW: null,
  };
}
