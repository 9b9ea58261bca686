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

const USAGE = `Usage: giul-report [--json] [--out report.html] LOG.ndjson [LOG.ndjson …]

Reads NDJSON logs of giul records (giul-proxy --log, or lines your code writes with
JSON.stringify(energy)) and writes one self-contained HTML page: totals, J per answer,
J per 1k tokens by model, prefill against decode, the requests over time. Sampled and
estimated figures are kept apart; unknown answers are counted, never given a figure.

Options:
  --out FILE   where the page goes (default report.html; - for standard output)
  --json       print the summary as one JSON object instead
  -h, --help   print this help
`;

export async function main(args: readonly string[]): Promise<number> {
  let json = false;
  let out = "report.html";
  const files: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "-h" || arg === "--help") {
      process.stdout.write(USAGE);
      return 0;
    }
    if (arg === "--json") json = true;
    else if (arg === "--out" || arg.startsWith("--out=")) {
      const v = arg === "--out" ? args[++i] : arg.slice("--out=".length);
      if (v === undefined || v === "") return bad("--out needs a file name (or - for standard output)");
      out = v;
    } else if (arg.startsWith("--")) return bad(`unknown option ${JSON.stringify(arg)}`);
    else files.push(arg);
  }
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
  process.stderr.write(`giul-report: ${message}\n${USAGE}`);
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
