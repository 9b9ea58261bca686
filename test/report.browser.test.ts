import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { built, program, ROOT } from "./fakes/paths.js";
import { writeKnownLog } from "./fakes/report-log.js";

// giul-report's page as a person sees it: opened in a real headless Chromium (Debian's, which
// .ci/run installs), its figures read back from the rendered DOM against the log's known totals,
// a screenshot taken, and no console error.

const CLI = join(ROOT, "dist", "cli", "report.js");
const CHROMIUM = built([CLI], "giul-report (dist/cli/report.js)")
  ? program(["chromium", "chromium-browser", "google-chrome"], "GIUL_CHROMIUM", "Chromium")
  : null;
const dir = mkdtempSync(join(tmpdir(), "giul-report-browser-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs headless Chromium on the page with `args`; its output and its log. */
function chromium(page: string, args: string[]) {
  const run = spawnSync(
    CHROMIUM as string,
    [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      `--user-data-dir=${join(dir, "profile")}`,
      "--enable-logging=stderr",
      "--v=0",
      ...args,
      `file://${page}`,
    ],
    { encoding: "utf8", timeout: 60_000 },
  );
  expect(run.error, String(run.error)).toBeUndefined();
  return run;
}

/** "1.23 kJ" → 1230: a figure as the page shows it, in joules. */
function joulesOf(text: string): number {
  const m = /^(-?[\d.]+(?:e-?\d+)?) (mJ|J|kJ|MJ)$/.exec(text.trim());
  expect(m, `a figure in joules: ${JSON.stringify(text)}`).not.toBeNull();
  const scale = { mJ: 1e-3, J: 1, kJ: 1e3, MJ: 1e6 }[m?.[2] as "J"];
  return Number(m?.[1]) * scale;
}

describe.runIf(CHROMIUM !== null)("giul-report in a real browser", () => {
  it("renders the log's known totals, and a screenshot, with no console error", () => {
    const log = join(dir, "energy.ndjson");
    const known = writeKnownLog(log, 60, false);
    const page = join(dir, "report.html");
    const made = spawnSync(process.execPath, [CLI, "--out", page, log], { encoding: "utf8" });
    expect(made.status, made.stderr).toBe(0);

    const dom = chromium(page, ["--dump-dom"]);
    expect(dom.status, dom.stderr).toBe(0);
    const byId = (id: string) => {
      const m = new RegExp(`id="${id}"[^>]*>([^<]*)<`).exec(dom.stdout);
      expect(m, `#${id} in the rendered page`).not.toBeNull();
      return m?.[1] as string;
    };
    expect(Number(byId("answers"))).toBe(60);
    expect(Number(byId("sampled-answers"))).toBe(known.sampledAnswers);
    expect(Number(byId("estimated-answers"))).toBe(known.estimatedAnswers);
    expect(Number(byId("unknown-answers"))).toBe(known.unknownAnswers);
    // Three significant digits on the page.
    const near = (shown: string, exact: number) =>
      expect(Math.abs(joulesOf(shown) - exact) / exact, `${shown} against ${exact} J`).toBeLessThan(0.005);
    near(byId("sampled-joules"), known.sampledJoules);
    near(byId("sampled-uncertainty"), known.sampledUncertainty);
    near(byId("estimated-joules"), known.estimatedJoules);
    // Drawn: one bar pair per bin, one band per request, the models' rows.
    expect(dom.stdout.match(/class="band /g)).toHaveLength(60);
    expect(dom.stdout).toMatch(/<tr class="model" data-model="llama-70b">/);
    const llama = /data-model="llama-70b">.*?class="jper1k">([^<]*)</.exec(dom.stdout)?.[1] as string;
    near(llama, known.llamaPer1k);
    // No console message of any kind (the page has no script to fail).
    expect(dom.stderr).not.toMatch(/CONSOLE|Uncaught|SyntaxError/);

    const shot = join(dir, "report.png");
    const pic = chromium(page, [`--screenshot=${shot}`, "--window-size=860,1800", "--hide-scrollbars"]);
    expect(pic.status, pic.stderr).toBe(0);
    const png = readFileSync(shot);
    expect(png.subarray(1, 4).toString()).toBe("PNG");
    expect(png.readUInt32BE(16)).toBe(860); // IHDR width
    expect(png.length).toBeGreaterThan(10_000);
  });
});
