#!/usr/bin/env node
/**
 * giul-report: one self-contained HTML page (or, --json, one summary object) from NDJSON logs of
 * giul records (giul-proxy --log, or JSON.stringify(energy) lines). Streams the logs. Exits 2 for
 * bad arguments or a file that cannot be read, 1 when the logs hold no giul record.
 */
import { writeFileSync } from "node:fs";
import { renderReport } from "../report/html.js";
import { readLogs } from "../report/read.js";
import { ReportBuilder } from "../report/summary.js";
import { type Flag, helpOrVersion, readCommandLine } from "./args.js";

const USAGE = `Usage: giul-report [--json] [-o report.html] LOG.ndjson [LOG.ndjson …]

Reads NDJSON logs of giul records (giul-proxy --log, or lines your code writes with
JSON.stringify(energy)) and writes one self-contained HTML page: totals, J per answer,
J per 1k tokens by model, prefill against decode, the requests over time. Sampled and
estimated figures are kept apart; unknown answers are counted, never given a figure.

Options:
  -o, --out FILE   where the page goes (default report.html; - for standard output)
  -j, --json       print the summary as one JSON object instead
  -h, --help       print this help
      --version    print giul's version
`;

const FLAGS: Readonly<Record<string, Flag>> = {
  out: { type: "string", short: "o" },
  json: { type: "boolean", short: "j" },
};

export async function main(args: readonly string[]): Promise<number> {
  const line = readCommandLine(args, FLAGS, true);
  if (line.kind === "help" || line.kind === "version") return helpOrVersion(line.kind, "giul-report", USAGE);
  if (line.kind === "bad") return bad(line.message);
  const json = line.on("json");
  const out = line.text("out") ?? "report.html";
  if (out === "") return bad("--out needs a file name (or - for standard output)");
  const files = line.positionals;
  if (files.length === 0) return bad("no log given: giul-report LOG.ndjson");
  const builder = new ReportBuilder();
  let read: Awaited<ReturnType<typeof readLogs>>;
  try {
    read = await readLogs(files, (record) => builder.add(record));
  } catch (error) {
    process.stderr.write(
      `giul-report: cannot read ${error instanceof Error ? error.message : String(error)}\n`,
    );
    return 2;
  }
  const summary = builder.summary(files, read);
  const s = read.skipped;
  const skipped = s.unreadable + s.truncated + s.notGiul;
  if (skipped > 0)
    process.stderr.write(
      `giul-report: skipped ${skipped} line(s): ${s.unreadable} unreadable, ${s.truncated} truncated last line(s), ${s.notGiul} not giul 0.2 records\n`,
    );
  if (read.records === 0) {
    process.stderr.write(`giul-report: no giul records in ${files.join(", ")} (${read.lines} lines)\n`);
    return 1;
  }
  if (json) {
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    return 0;
  }
  const html = renderReport(summary);
  if (out === "-") process.stdout.write(html);
  else {
    writeFileSync(out, html);
    process.stderr.write(`giul-report: ${read.records} records → ${out}\n`);
  }
  return 0;
}

function bad(message: string): number {
  process.stderr.write(`giul-report: ${message}\n\n${USAGE}`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(
      `giul-report: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
