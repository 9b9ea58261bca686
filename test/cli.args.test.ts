/**
 * The four command-line tools read their arguments one way (src/cli/args.ts, on util.parseArgs):
 * the parser against what each kind of argument must give, then each installed tool (dist/cli/*.js)
 * for -h/--help, --version, an unknown option, a missing value, a value given to a switch, a
 * stray argument (exit 2, one line naming it, then the usage) and its short options.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readCommandLine } from "../src/cli/args.js";
import { built, ROOT } from "./fakes/paths.js";
import { writeKnownLog } from "./fakes/report-log.js";

const FLAGS = {
  out: { type: "string", short: "o" },
  json: { type: "boolean", short: "j" },
  gpu: { type: "string", short: "g" },
} as const;

describe("readCommandLine", () => {
  const read = (args: string[], positionals = false) => readCommandLine(args, FLAGS, positionals);
  const parsed = (args: string[], positionals = false) => {
    const line = read(args, positionals);
    if (line.kind !== "parsed") throw new Error(`not parsed: ${JSON.stringify(line)}`);
    return line;
  };

  it("takes --name value, --name=value and -n value alike; the last of a repeated option wins", () => {
    for (const args of [["--out", "a.html"], ["--out=a.html"], ["-o", "a.html"], ["-oa.html"]])
      expect(parsed(args).text("out"), args.join(" ")).toBe("a.html");
    expect(parsed(["-o", "a", "--out=b"]).text("out")).toBe("b");
    expect(parsed(["-o", "-"]).text("out")).toBe("-");
    expect(parsed(["--gpu=-1"]).text("gpu")).toBe("-1");
    const both = parsed(["-j", "-g", "3"]);
    expect([both.on("json"), both.text("gpu"), both.on("gpu"), both.text("json")]).toEqual([
      true,
      "3",
      false,
      undefined,
    ]);
    expect(parsed([]).on("json")).toBe(false);
    expect(parsed(["-g", "1", "-j"]).order).toEqual(["gpu", "json"]);
  });

  it("keeps arguments that are not options only where the tool takes them, and after --", () => {
    expect(parsed(["a.ndjson", "-j", "b.ndjson"], true).positionals).toEqual(["a.ndjson", "b.ndjson"]);
    expect(parsed(["--", "--json"], true).positionals).toEqual(["--json"]);
    expect(read(["a.ndjson"])).toEqual({ kind: "bad", message: 'unexpected argument "a.ndjson"' });
  });

  it("names what is wrong, as it was written", () => {
    const bad = (args: string[]) => {
      const line = read(args, true);
      return line.kind === "bad" ? line.message : `not bad: ${line.kind}`;
    };
    expect(bad(["--frobnicate"])).toBe("unknown option --frobnicate");
    expect(bad(["-x"])).toBe("unknown option -x");
    expect(bad(["--out"])).toBe("--out needs a value");
    expect(bad(["x", "-o"])).toBe("-o needs a value");
    expect(bad(["--json=yes"])).toBe("--json takes no value");
    expect(bad(["--gpu", "--json"])).toMatch(/^--gpu needs a value, got the option --json .*--gpu=--json/);
    // The first problem is the one named.
    expect(bad(["--nope", "--out"])).toBe("unknown option --nope");
  });

  it("answers -h, --help and --version before anything else", () => {
    expect(read(["-h"]).kind).toBe("help");
    expect(read(["--nope", "--help"]).kind).toBe("help");
    expect(read(["--version", "--out"]).kind).toBe("version");
  });
});

const TOOLS = ["probe", "agent", "proxy", "report"] as const;
const cli = (tool: string) => join(ROOT, "dist", "cli", `${tool}.js`);
const dir = mkdtempSync(join(tmpdir(), "giul-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(tool: string, args: string[]) {
  // No card and no addon: nothing here needs one, and a tool that started would say so.
  const env = { ...process.env, GIUL_DISABLE_ADDON: "1", GIUL_NVIDIA_SMI: "/nonexistent" };
  return spawnSync(process.execPath, [cli(tool), ...args], { encoding: "utf8", cwd: dir, env });
}

const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;

describe.runIf(built(TOOLS.map(cli), "the command-line tools (dist/cli/)"))("the four tools", () => {
  it.each(TOOLS)("giul-%s: -h and --help print the usage, --version the version; exit 0", (tool) => {
    for (const flag of ["-h", "--help"]) {
      const r = run(tool, [flag]);
      expect(r.status, flag).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^Usage: giul-${tool}`));
      // Every option the usage lists with a short form is one the tool takes.
      expect(r.stdout).toMatch(/^ {2}-h, --help/m);
      expect(r.stdout).toMatch(/^ {6}--version/m);
    }
    const v = run(tool, ["--version"]);
    expect([v.status, v.stdout]).toEqual([0, `giul-${tool} ${VERSION}\n`]);
  });

  const BAD: Record<(typeof TOOLS)[number], [string[], string][]> = {
    probe: [
      [["--frobnicate"], "unknown option --frobnicate"],
      [["-g"], "-g needs a value"],
      [["--json=1"], "--json takes no value"],
      [["extra"], 'unexpected argument "extra"'],
      [["--idle", "--seconds", "--json"], "--seconds needs a value, got the option --json"],
    ],
    agent: [
      [["--frobnicate"], "unknown option --frobnicate"],
      [["-p"], "-p needs a value"],
      [["--port=x"], '--port needs an integer, got "x"'],
      [["-p", "9402", "extra"], 'unexpected argument "extra"'],
    ],
    proxy: [
      [["--frobnicate"], "unknown option --frobnicate"],
      [["-u"], "-u needs a value"],
      [["-u", "http://127.0.0.1:1", "--idle-w", "60", "--inject-usage=yes"], "--inject-usage takes no value"],
      [["-u", "http://127.0.0.1:1", "--idle-w", "60", "-g", "x"], '--gpu needs an integer, got "x"'],
    ],
    report: [
      [["--frobnicate", "x.ndjson"], "unknown option --frobnicate"],
      [["x.ndjson", "-o"], "-o needs a value"],
      [["--json=no", "x.ndjson"], "--json takes no value"],
    ],
  };

  it.each(TOOLS)("giul-%s: a bad argument is exit 2, one line naming it, then the usage", (tool) => {
    for (const [args, message] of BAD[tool]) {
      const r = run(tool, args);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stdout).toBe("");
      const [first, blank, usage] = r.stderr.split("\n");
      expect(first, args.join(" ")).toContain(`giul-${tool}: ${message}`);
      expect([blank, usage?.startsWith(`Usage: giul-${tool}`)]).toEqual(["", true]);
    }
  });

  it("giul-report -o and -j: the short options write the page and print the summary", () => {
    const log = join(dir, "energy.ndjson");
    const known = writeKnownLog(log);
    const page = join(dir, "page.html");
    const r = run("report", [log, "-o", page]);
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(page, "utf8")).toMatch(/^<!doctype html>/i);
    const j = run("report", ["-j", log]);
    expect(j.status, j.stderr).toBe(0);
    const summary = JSON.parse(j.stdout);
    expect(summary.records).toBe(60);
    expect(summary.sampled.joules).toBeCloseTo(known.sampledJoules, 6);
  });

  it("giul-probe --demo -j: the short switch gives the records as JSON", () => {
    const r = run("probe", ["--demo", "-j"]);
    expect(r.status, r.stderr).toBe(0);
    const records = JSON.parse(r.stdout) as { method: string }[];
    expect(records.map((e) => e.method)).toEqual(["sampled", "sampled", "sampled"]);
  });
});
