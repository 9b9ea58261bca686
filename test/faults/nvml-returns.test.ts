import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ADDON, built, DIST, FAKE_NVML } from "../fakes/paths.js";
import { NVML, Scenario } from "../fakes/scenario.js";
import { report, SLACK_MS, sleep } from "./bounds.js";

// Fault matrix, item 5: NVML comes back. The driver is absent when the process starts (the library
// is not there yet, or nvmlInit answers Driver Not Loaded) and appears later: the card's re-probe
// (5 s after the failure, then with back-off) loads NVML again and windows are measured. Before,
// the failed load was kept for the life of the process (std::call_once), so the card stayed `none`.
// And a card lost mid-run (GPU is lost) is opened again when it answers again.

const ready = built([FAKE_NVML, ADDON, DIST]);
const cleanups: (() => void)[] = [];
afterAll(() => {
  for (const c of cleanups) c();
});

/** Re-probe delay after the first failure (select/'s back-off). */
const REPROBE_MS = 5_000;

/**
 * A child that meters a window every 200 ms and prints each record, until one is measured (or
 * 25 s); `ready` is printed after the first window, the cue for the parent to bring the driver in.
 */
function meterUntilMeasured(env: Record<string, string>, onFirst: () => void) {
  const script = `
import { Meter } from ${JSON.stringify(DIST)};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = performance.now();
for (let i = 0; performance.now() - t0 < 25_000; i++) {
  const m = await Meter.forNode({ name: "late-driver", idleW: 20 }).open();
  await sleep(20);
  await m.close();
  const e = m.result();
  console.log(JSON.stringify({ t: String(process.hrtime.bigint()), backend: e.backend, method: e.method, reason: e.reason }));
  if (i === 0) console.log("ready");
  if (e.method === "sampled") break;
  await sleep(200);
}
`;
  return new Promise<{
    records: { t: bigint; backend: string; method: string; reason: string | null }[];
    code: number | null;
  }>((resolve) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      env: { ...process.env, GIUL_NVIDIA_SMI: "/nonexistent/nvidia-smi", ...env },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    let cued = false;
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (!cued && out.includes("ready\n")) {
        cued = true;
        onFirst();
      }
    });
    child.on("exit", (code) => {
      const records = out
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => {
          const r = JSON.parse(l) as { t: string; backend: string; method: string; reason: string | null };
          return { ...r, t: BigInt(r.t) };
        });
      resolve({ records, code });
    });
  });
}

describe.runIf(ready)("NVML that is not there at start and comes later", () => {
  it("the library appears (GIUL_NVML_LIBRARY named a file that did not exist yet)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "giul-late-nvml-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const library = join(dir, "libnvidia-ml.so.1");
    const sc = new Scenario({ devices: [{ power: 150 }] });
    cleanups.push(() => sc.remove());
    let appeared = 0n;
    const run = await meterUntilMeasured(sc.env({ GIUL_NVML_LIBRARY: library }), () => {
      symlinkSync(FAKE_NVML, library);
      appeared = process.hrtime.bigint();
    });
    expect(run.code).toBe(0);
    const first = run.records[0];
    expect(first?.backend).toBe("none");
    expect(first?.reason).toMatch(/dlopen\(".*libnvidia-ml\.so\.1"\) failed/);
    const measured = run.records.find((r) => r.method === "sampled");
    expect(measured?.backend).toBe("nvml_counter");
    const afterMs = Number((measured?.t ?? 0n) - appeared) / 1e6;
    report(`NVML library appearing later: measured ${afterMs.toFixed(0)} ms after it appeared`);
    expect(afterMs).toBeLessThan(REPROBE_MS + 2 * SLACK_MS + 500);
  }, 40_000);

  it("the driver loads (nvmlInit answered Driver Not Loaded until then)", async () => {
    const sc = new Scenario({ initError: NVML.ERROR_DRIVER_NOT_LOADED, devices: [{ power: 150 }] });
    cleanups.push(() => sc.remove());
    let loaded = 0n;
    const run = await meterUntilMeasured(sc.env(), () => {
      sc.update({ devices: [{ power: 150 }] });
      loaded = process.hrtime.bigint();
    });
    expect(run.code).toBe(0);
    expect(run.records[0]?.backend).toBe("none");
    expect(run.records[0]?.reason).toMatch(/Driver Not Loaded \(9\)/);
    const measured = run.records.find((r) => r.method === "sampled");
    expect(measured?.backend).toBe("nvml_counter");
    const afterMs = Number((measured?.t ?? 0n) - loaded) / 1e6;
    report(`driver loaded later: measured ${afterMs.toFixed(0)} ms after it loaded`);
    expect(afterMs).toBeLessThan(REPROBE_MS + 2 * SLACK_MS + 500);
  }, 40_000);
});

describe.runIf(ready)("a GPU lost while windows are metered", () => {
  it("fails the windows with the reason, and opens the card again once it answers", async () => {
    const calls = join(mkdtempSync(join(tmpdir(), "giul-lost-")), "calls.txt");
    cleanups.push(() => rmSync(join(calls, ".."), { recursive: true, force: true }));
    const sc = new Scenario({ devices: [{ power: 180 }] });
    cleanups.push(() => sc.remove());
    const script = `
import { Meter } from ${JSON.stringify(DIST)};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const node = { name: "lost", idleW: 20 };
const say = (what, m) => console.log(JSON.stringify({ what, method: m.result().method, reason: m.result().reason }));
async function window(what) { const m = await Meter.forNode(node).open(); await sleep(40); await m.close(); say(what, m); }
await window("before");
console.log("lose");
await new Promise((r) => process.stdin.once("data", r));
await sleep(100);
await window("lost");
console.log("answer");
await new Promise((r) => process.stdin.once("data", r));
for (let i = 0; i < 40; i++) {
  const m = await Meter.forNode(node).open(); await sleep(40); await m.close();
  if (m.result().method === "sampled") { say("again", m); break; }
  await sleep(100);
}
process.exit(0);
`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      env: { ...process.env, ...sc.env() },
      stdio: ["pipe", "pipe", "inherit"],
    });
    let out = "";
    const seen = (what: string) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (out.includes(`${what}\n`)) {
            child.stdout.off("data", check);
            resolve();
          }
        };
        child.stdout.on("data", check);
        check();
      });
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    await seen("lose");
    sc.update({
      callsFile: calls,
      devices: [{ power: 180, errors: [{ fromMs: 0, code: NVML.ERROR_GPU_IS_LOST }] }],
    });
    child.stdin.write("go\n");
    await seen("answer");
    await sleep(100);
    // Counted before the card answers again: the sampler, still lingering, may ask for it again
    // within its own retry period, before this line would run after the update.
    const answered = readFileSync(calls, "utf8").split("\n").length;
    sc.update({ callsFile: calls, devices: [{ power: 180 }] });
    child.stdin.write("go\n");
    const code = await new Promise((r) => child.on("exit", r));
    expect(code).toBe(0);
    const records = out
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { what: string; method: string; reason: string | null });
    expect(records.find((r) => r.what === "before")?.method).toBe("sampled");
    const lost = records.find((r) => r.what === "lost");
    expect(lost?.method).toBe("unknown");
    expect(lost?.reason).toMatch(/GPU is lost/);
    expect(records.find((r) => r.what === "again")?.method).toBe("sampled");
    // The sampling thread asked for the device again once it answered (a lost card's handle is
    // not trusted again), and read it with the new handle.
    const after = readFileSync(calls, "utf8")
      .split("\n")
      .slice(answered - 1);
    const reopened = after.findIndex((l) => l.startsWith("nvmlDeviceGetHandleByIndex"));
    expect(reopened).toBeGreaterThanOrEqual(0);
    expect(after.slice(reopened).some((l) => l.startsWith("nvmlDeviceGetTotalEnergyConsumption"))).toBe(true);
  }, 40_000);
});
