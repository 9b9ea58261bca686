// The fused counter on a real card, under a known load: the same windows measured three ways —
// fused (counter + instantaneous power, nvml_counter), the counter alone as Zeus reads it (two
// counter reads at the edges) and the integral of power (nvml_sampler) — with what the samples
// showed of the card: the counter's update step and cadence lock, the power sensor's refresh and
// gain. Run through bench/fusion-hw.js by scripts/gpu-check.sh:
//
//   node bench/fusion-hw.js [--gpu 0] [--seconds 60] [--load ./gpu-load] [--json out.json]
//
// --load runs bench/gpu-load.c's program (150 ms busy / 250 ms idle) during the windows; without
// it, or where it cannot run (no CUDA driver), the card is metered as it is and the report says so.
// Without a GPU it runs against whatever GIUL_NVML_LIBRARY points at (the NVML double: a dry run).
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import type { RingEdge } from "../src/ring/edge.js";
import { loadBinding } from "../src/sources/native/binding.js";
import { nvmlTrack } from "../src/sources/native/descriptor.js";

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(name);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
};
const gpu = Number(arg("--gpu", "0"));
const seconds = Number(arg("--seconds", "60"));
const loadPath = arg("--load", "");
const jsonOut = arg("--json", "");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const out: Record<string, unknown> = { gpu, seconds };

function fail(reason: string): never {
  console.log(`fusion check: ${reason}`);
  out.skipped = reason;
  if (jsonOut) writeFileSync(jsonOut, JSON.stringify(out, null, 2));
  process.exit(0);
}

const loaded = loadBinding();
if (!loaded.ok) fail(`no addon: ${loaded.reason}`);
const b = loaded.binding;
const init = await b.nvmlInit();
if (!init.ok) fail(`NVML: ${init.reason}`);
const info = await b.deviceInfo(gpu);
if (!info.ok) fail(`card ${gpu}: ${info.reason}`);
out.card = { name: info.name, energyCounter: info.energyCounter, instantPower: info.instantPower };
console.log(
  `card ${gpu}: ${info.name}; energy counter ${info.energyCounter}; instantaneous power (field 186) ${info.instantPower}`,
);
if (!info.energyCounter) fail("the card has no energy counter: nothing to fuse");

// The load: busy/idle phases, logged with their CLOCK_MONOTONIC instants.
let load: ChildProcess | null = null;
const phases: { kind: string; from: bigint; to: bigint }[] = [];
let loadNote = "none asked (--load)";
if (loadPath !== "") {
  const child = spawn(loadPath, ["--device", String(gpu), "--seconds", String(seconds + 15)], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  load = child;
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += String(d);
  });
  const ready = await new Promise<string | null>((done) => {
    let buf = "";
    const timer = setTimeout(() => done(null), 30_000);
    child.stdout.on("data", (d) => {
      buf += String(d);
      for (;;) {
        const nl = buf.indexOf("\n");
        if (nl < 0) break;
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const [kind, a, c] = line.split(" ");
        if (kind === "ready") {
          clearTimeout(timer);
          done(line);
        } else if ((kind === "busy" || kind === "idle") && a && c)
          phases.push({ kind, from: BigInt(a), to: BigInt(c) });
      }
    });
    child.on("exit", () => {
      clearTimeout(timer);
      done(null);
    });
  });
  if (ready === null) {
    loadNote = `could not run: ${stderr.trim() || "no ready line"} (the card is metered idle)`;
    load = null;
  } else loadNote = `${ready} (150 ms busy / 250 ms idle)`;
}
out.load = loadNote;
console.log(`load: ${loadNote}`);

// Two tracks over the one sampling thread of the card: the fused counter and the power integral.
const instantPower = info.instantPower;
const fused = nvmlTrack(b, gpu, { counter: true, instantPower });
const integral = nvmlTrack(b, gpu, { counter: false, instantPower });
fused.retain(10);
integral.retain(10);
const warm = await fused.ready();
if (!warm.ok) fail(`sampler: ${warm.reason}`);
// Enough counter updates to lock onto their cadence (48 changes: about 5 s at 100 ms).
await sleep(7_000);

interface Row {
  ms: number;
  fusedJ: number | null;
  fusedBarJ: number;
  fusedReason: string | null;
  integralJ: number | null;
  integralBarJ: number;
  zeusJ: number;
}
const rows: Row[] = [];
const DURATIONS = [20, 50, 100, 200, 400, 1000];
const end = Date.now() + seconds * 1000;
let i = 0;
let pMin = Number.POSITIVE_INFINITY;
let pMax = 0;
while (Date.now() < end) {
  const ms = DURATIONS[(i * 7) % DURATIONS.length] as number;
  i++;
  const a1 = fused.edge();
  const a2 = integral.edge();
  await sleep(ms);
  const z1 = fused.edge();
  const z2 = integral.edge();
  await Promise.all([fused.settle([a1, z1]), integral.settle([a2, z2])]);
  const f = fused.span(a1, z1);
  const g = integral.span(a2, z2);
  const ea = a1 as RingEdge;
  const ez = z1 as RingEdge;
  rows.push({
    ms,
    fusedJ: f.ok ? f.grossJoules : null,
    fusedBarJ: f.ok ? f.uncertaintyJoules : Number.NaN,
    fusedReason: f.ok ? f.caveat : f.reason,
    integralJ: g.ok ? g.grossJoules : null,
    integralBarJ: g.ok ? g.uncertaintyJoules : Number.NaN,
    // Zeus: the counter as read just before each edge.
    zeusJ: (ez.counterA - ea.counterA) / 1000,
  });
  const last = fused.latest();
  if (last !== null && Number.isFinite(last.powerMw)) {
    pMin = Math.min(pMin, last.powerMw / 1000);
    pMax = Math.max(pMax, last.powerMw / 1000);
  }
}
const report = fused.fusionReport();
fused.release();
integral.release();
load?.kill("SIGTERM");

const f2 = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : "—");
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1] ?? Number.NaN;
const mean = (xs: number[]) => (xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : Number.NaN);
console.log(
  `\npower seen during the windows: ${f2(pMin, 1)}–${f2(pMax, 1)} W; load phases logged: ${phases.length}`,
);
if (report !== null) {
  const c = report.counter;
  console.log(
    `counter: update period ${c.periodNs ? `${f2(c.periodNs[0] / 1e6, 3)}–${f2(c.periodNs[1] / 1e6, 3)} ms (locked)` : c.irregular ? "irregular (no lock)" : "not locked"}; ` +
      `read interval ${f2(c.readIntervalNs / 1e6)} ms, update instant known to ${f2(c.lockedNs / 1e6, 3)} ms; ` +
      `changes at every read: ${c.changeEveryRead}; updates at most every ` +
      `${c.updateAtMostNs === null ? "— (not yet bounded)" : `${f2(c.updateAtMostNs / 1e6, 3)} ms`}; ` +
      `update intervals ${c.updateIntervalNs ? `${f2(c.updateIntervalNs.least / 1e6, 3)} / ${f2(c.updateIntervalNs.median / 1e6, 3)} / ${f2(c.updateIntervalNs.most / 1e6, 3)} ms (least / median / most of ${c.updateIntervalNs.count})` : "—"}`,
  );
  console.log(
    `power sensor: ${report.basis}; readings that changed from the one before ${f2(100 * report.powerChangedShare, 1)} %; ` +
      `refresh ≤ ${f2(report.refreshUpperNs / 1e6)} ms (shortest run of one value ${f2(report.shortestRunNs / 1e6)} ms); ` +
      `gain against the counter ${report.gain ? `${f2(report.gain[0], 4)}–${f2(report.gain[1], 4)}` : "—"}; steps checked ${report.steps}; ` +
      `bars bounded by: ${report.bounding}; estimate's lag ${f2(report.shapeLagNs / 1e6, 1)} ms`,
  );
}
console.log(
  "\n| window ms | windows | fused sampled | fused median bar J (%) | fused − counter (Zeus) mean / max % | fused − integral mean / max % | |fused − integral| ≤ both bars |",
);
console.log("|---:|---:|---:|---:|---:|---:|---:|");
const table: Record<string, unknown>[] = [];
for (const ms of DURATIONS) {
  const rs = rows.filter((r) => r.ms === ms);
  const ok = rs.filter((r) => r.fusedJ !== null && r.fusedJ > 0);
  const bar = ok.map((r) => r.fusedBarJ);
  const barPct = ok.map((r) => (100 * r.fusedBarJ) / (r.fusedJ as number));
  const dz = ok.map((r) => (100 * Math.abs(r.zeusJ - (r.fusedJ as number))) / (r.fusedJ as number));
  const both = ok.filter((r) => r.integralJ !== null);
  const di = both.map(
    (r) => (100 * Math.abs((r.integralJ as number) - (r.fusedJ as number))) / (r.fusedJ as number),
  );
  const within = both.filter(
    (r) => Math.abs((r.integralJ as number) - (r.fusedJ as number)) <= r.fusedBarJ + r.integralBarJ,
  ).length;
  console.log(
    `| ${ms} | ${rs.length} | ${ok.length} | ${f2(median(bar), 3)} (${f2(median(barPct), 1)}) | ${f2(mean(dz), 1)} / ${f2(Math.max(0, ...dz), 1)} | ${f2(mean(di), 2)} / ${f2(Math.max(0, ...di), 2)} | ${within} of ${both.length} |`,
  );
  table.push({ ms, windows: rs.length, sampled: ok.length, medianBarJ: median(bar), dz, di, within });
}
const failed = rows.filter((r) => r.fusedJ === null);
if (failed.length > 0) console.log(`\nnot measured: ${failed.length} (e.g. ${failed[0]?.fusedReason})`);
Object.assign(out, { report, rows, table, phases: phases.length, powerW: [pMin, pMax] });
if (jsonOut)
  writeFileSync(
    jsonOut,
    JSON.stringify(out, (_k, v) => (typeof v === "bigint" ? String(v) : v), 2),
  );
process.exit(0);
