import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { built, ROOT } from "./fakes/paths.js";
import { writeKnownLog } from "./fakes/report-log.js";

// giul-report against a log whose totals are known (test/fakes/report-log.ts): the summary says
// them, keeps sampled and estimated apart, counts every line it skips, and never crashes.

const CLI = join(ROOT, "dist", "cli", "report.js");
const dir = mkdtempSync(join(tmpdir(), "giul-report-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const report = (args: string[]) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", cwd: dir });

describe.runIf(built([CLI], "giul-report (dist/cli/report.js)"))("giul-report", () => {
  it("--json: the known totals, sampled and estimated apart, every skipped line counted", () => {
    const log = join(dir, "energy.ndjson");
    const known = writeKnownLog(log);
    const r = report(["--json", log]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /skipped 4 line\(s\): 1 unreadable, 1 truncated last line\(s\), 2 not giul 0\.2 records/,
    );
    const s = JSON.parse(r.stdout);
    expect(s.records).toBe(60);
    expect(s.skipped).toEqual({ unreadable: 1, truncated: 1, notGiul: 2, blank: 1 });
    expect(s.answers).toBe(60);
    expect(s.sampled.answers).toBe(known.sampledAnswers);
    expect(s.sampled.joules).toBeCloseTo(known.sampledJoules, 9);
    expect(s.sampled.uncertaintyJoules).toBeCloseTo(known.sampledUncertainty, 9);
    expect(s.estimated).toMatchObject({ answers: known.estimatedAnswers, uncertaintyJoules: null });
    expect(s.estimated.joules).toBeCloseTo(known.estimatedJoules, 9);
    expect(s.unknown).toBe(known.unknownAnswers);
    expect(s.contended).toBe(known.contended);
    // No total that mixes measured and estimated figures.
    expect(Object.keys(s)).not.toContain("joules");
    const llama = s.byModel.find((m: { model: string }) => m.model === "llama-70b");
    expect(llama.sampledJoulesPer1kTokens).toBeCloseTo(known.llamaPer1k, 9);
    const stage = (name: string) => s.stages.find((st: { name: string }) => st.name === name);
    expect(stage("prefill").sampledJoules).toBeCloseTo(known.prefillJoules, 9);
    expect(stage("decode").sampledJoules).toBeCloseTo(known.decodeJoules, 9);
    const counted = (s.histogram.sampled as number[]).reduce((a, b) => a + b, 0);
    expect(counted).toBe(known.sampledAnswers);
    expect(s.timeline.bands).toHaveLength(60);
  });

  it("writes one self-contained page: no script, no network, the figures in it", () => {
    const log = join(dir, "page.ndjson");
    const known = writeKnownLog(log, 60, false);
    const r = report(["--out", join(dir, "page.html"), log]);
    expect(r.status, r.stderr).toBe(0);
    const html = readFileSync(join(dir, "page.html"), "utf8");
    expect(html).not.toMatch(/<script|https?:\/\/|<link|@import|src=/i);
    expect(html).toContain(`id="sampled-answers">${known.sampledAnswers}<`);
    expect(html).toContain('<svg id="histogram"');
    expect(html).toContain('<svg id="timeline"');
  });

  it("an empty log, a file that is not there, bad flags: a clear message, never a crash", () => {
    writeFileSync(join(dir, "empty.ndjson"), "");
    const empty = report(["empty.ndjson"]);
    expect(empty.status).toBe(1);
    expect(empty.stderr).toMatch(/^giul-report: no giul records in empty\.ndjson \(0 lines\)$/m);
    const missing = report(["nope.ndjson"]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/^giul-report: cannot read nope\.ndjson: ENOENT/m);
    const flag = report(["--bogus", "x"]);
    expect(flag.status).toBe(2);
    expect(flag.stderr).toMatch(/unknown option --bogus/);
    expect(report([]).stderr).toMatch(/no log given/);
    expect(report(["--help"]).stdout).toMatch(/^Usage: giul-report/);
  });
});
