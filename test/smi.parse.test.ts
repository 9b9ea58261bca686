/**
 * The nvidia-smi output parser, on literal lines restated from real outputs
 * (shared/nvml-facts.md §3.2, test/fakes/smi/captures): every line is one kind, and nothing that
 * is not a plain number of watts is ever a reading.
 */
import { describe, expect, it } from "vitest";
import {
  choosePower,
  MAX_LINE,
  parseCell,
  parseLine,
  parseStamp,
  SMI_ERROR,
  type SmiLine,
  smiArgs,
  summarizeRows,
} from "../src/sources/smi/parse.js";
import { LineSplitter } from "../src/sources/smi/supervisor.js";

function row(line: SmiLine): Extract<SmiLine, { kind: "row" }> {
  if (line.kind !== "row") throw new Error(`expected a row, got ${JSON.stringify(line)}`);
  return line;
}

describe("smiArgs", () => {
  it("asks for the index, both powers and the query time, without header or units, looping every period", () => {
    expect(smiArgs("instant", 100)).toEqual([
      "--query-gpu=index,power.draw.instant,power.draw,timestamp",
      "--format=csv,noheader,nounits",
      "-lms",
      "100",
    ]);
    expect(smiArgs("averaged", null)).toEqual([
      "--query-gpu=index,power.draw,timestamp",
      "--format=csv,noheader,nounits",
    ]);
  });
});

describe("parseStamp", () => {
  it("reads nvidia-smi's timestamp as the wall-clock reading it prints, in ms (zone left out)", () => {
    // 2025/11/24 14:08:55.751 (nvml-facts.md §3.2, 5) = 1763993335 s as UTC (date -u -d): whatever the TZ
    expect(parseStamp("2025/11/24 14:08:55.751")).toEqual({ ok: true, wallMs: 1_763_993_335_751 });
    expect(parseStamp(" 2024/02/29 00:00:00.000 ")).toEqual({ ok: true, wallMs: 1_709_164_800_000 });
    expect(parseStamp("1999/12/31 23:59:59.999")).toEqual({ ok: true, wallMs: 946_684_799_999 });
    // a difference of two stamps is the time between them, across midnight and a month's end
    const a = parseStamp("2024/01/31 23:59:59.950");
    const b = parseStamp("2024/02/01 00:00:00.050");
    if (!a.ok || !b.ok) throw new Error("stamps did not parse");
    expect(b.wallMs - a.wallMs).toBe(100);
  });

  it("refuses tokens and anything not exactly YYYY/MM/DD HH:MM:SS.mmm, or not a real date", () => {
    for (const text of [
      "[N/A]",
      "N/A",
      "[Unknown Error]",
      "",
      "2025/11/24 14:08:55",
      "2025/11/24 14:08:55.75",
      "2025/11/24 14:08:55.7510",
      "2025-11-24 14:08:55.751",
      "2025/11/24T14:08:55.751",
      "25/11/24 14:08:55.751",
      "2025/13/01 00:00:00.000",
      "2025/02/29 00:00:00.000",
      "2025/04/31 00:00:00.000",
      "2025/11/24 24:00:00.000",
      "2025/11/24 23:60:00.000",
      "2025/11/24 23:59:60.000",
      "0024/11/24 23:59:59.000",
      "2025/11/24 14:08:55.751 extra",
    ]) {
      expect(parseStamp(text), text).toEqual({ ok: false, text: text.trim() });
    }
  });
});

describe("parseCell", () => {
  it("reads watts with two decimals, with or without the unit", () => {
    expect(parseCell("69.62")).toEqual({ ok: true, watts: 69.62 });
    expect(parseCell(" 631.95 ")).toEqual({ ok: true, watts: 631.95 });
    expect(parseCell("39.32 W")).toEqual({ ok: true, watts: 39.32 });
    expect(parseCell("0.00")).toEqual({ ok: true, watts: 0 });
    expect(parseCell("120")).toEqual({ ok: true, watts: 120 });
  });

  it("maps every token to its code, never to a number", () => {
    const cases: [string, number][] = [
      ["[N/A]", SMI_ERROR.NOT_AVAILABLE],
      ["N/A", SMI_ERROR.NOT_AVAILABLE],
      ["[Not Supported]", SMI_ERROR.NOT_SUPPORTED],
      ["[Unknown Error]", SMI_ERROR.UNKNOWN_ERROR],
      ["[GPU is lost]", SMI_ERROR.GPU_LOST],
      ["[GPU requires reset]", SMI_ERROR.RESET_REQUIRED],
      ["[Insufficient Permissions]", SMI_ERROR.NO_PERMISSION],
      ["[Requested functionality has been deprecated]", SMI_ERROR.OTHER_TOKEN],
      ["[Function Not Found]", SMI_ERROR.OTHER_TOKEN],
    ];
    for (const [text, code] of cases) expect(parseCell(text)).toEqual({ ok: false, code, text });
  });

  it("refuses what is not a plain, plausible number of watts", () => {
    for (const text of [
      "",
      "-5.00",
      "1e3",
      "12.5.1",
      "0x10",
      "NaN",
      "Infinity",
      "12,5",
      "99999.00",
      "631.9W",
      "W",
    ]) {
      const cell = parseCell(text);
      expect(cell.ok, text).toBe(false);
      if (!cell.ok) expect(cell.code, text).toBe(SMI_ERROR.MALFORMED);
    }
  });
});

describe("parseLine", () => {
  it("reads a row of the instant query", () => {
    const r = row(parseLine("0, 625.68, 631.95, 2025/11/24 14:08:55.751", "instant"));
    expect(r.index).toBe(0);
    expect(r.instant).toEqual({ ok: true, watts: 625.68 });
    expect(r.average).toEqual({ ok: true, watts: 631.95 });
    expect(r.stamp).toEqual({ ok: true, wallMs: 1_763_993_335_751 });
    expect(choosePower(r)).toBe("instant");
    expect(row(parseLine("3, 69.62, 69.85, 2025/11/24 14:08:55.751\r", "instant")).index).toBe(3);
  });

  it("reads a row of the averaged-only query", () => {
    const r = row(parseLine("1, 433.78, 2025/11/24 14:08:55.751", "averaged"));
    expect(r).toEqual({
      kind: "row",
      index: 1,
      instant: null,
      average: { ok: true, watts: 433.78 },
      stamp: { ok: true, wallMs: 1_763_993_335_751 },
    });
    expect(choosePower(r)).toBe("averaged");
  });

  it("keeps a row whose timestamp is missing, [N/A] or garbled, with the stamp absent or marked bad", () => {
    // Without the column (a capture replayed, a driver that dropped it): no stamp at all.
    const bare = row(parseLine("0, 625.68, 631.95", "instant"));
    expect(bare.stamp).toBeNull();
    expect(bare.instant).toEqual({ ok: true, watts: 625.68 });
    expect(row(parseLine("1, 433.78", "averaged")).stamp).toBeNull();
    // With the column but not a timestamp: the power is still read, the stamp is refused.
    const na = row(parseLine("0, 625.68, 631.95, [N/A]", "instant"));
    expect(na.stamp).toEqual({ ok: false, text: "[N/A]" });
    expect(na.instant).toEqual({ ok: true, watts: 625.68 });
    expect(row(parseLine("0, 625.68, 631.95, 2025/11/24 14:08", "instant")).stamp).toEqual({
      ok: false,
      text: "2025/11/24 14:08",
    });
    expect(row(parseLine("0, 1.00, 2.00, 3.00", "instant")).stamp).toEqual({ ok: false, text: "3.00" });
    expect(row(parseLine("2, 433.78, 2025/02/30 10:00:00.000", "averaged")).stamp).toMatchObject({
      ok: false,
    });
  });

  it("falls back to power.draw for a card whose instant power is [N/A], and to nothing when both fail", () => {
    expect(choosePower(row(parseLine("0, [N/A], 39.32", "instant")))).toBe("averaged");
    const none = row(parseLine("0, [Not Supported], [Not Supported]", "instant"));
    expect(choosePower(none)).toBeNull();
    expect(none.instant).toEqual({ ok: false, code: SMI_ERROR.NOT_SUPPORTED, text: "[Not Supported]" });
    const lost = row(parseLine("2, [GPU is lost], [GPU is lost]", "instant"));
    expect(lost.index).toBe(2);
    expect(lost.average).toEqual({ ok: false, code: SMI_ERROR.GPU_LOST, text: "[GPU is lost]" });
  });

  it("tells blank lines, headers, a rejected field and messages apart", () => {
    expect(parseLine("", "instant")).toEqual({ kind: "blank" });
    expect(parseLine("   \r", "instant")).toEqual({ kind: "blank" });
    expect(parseLine("index, power.draw.instant [W], power.draw [W]", "instant")).toEqual({ kind: "header" });
    expect(parseLine("index, power.draw.instant [W], power.draw [W], timestamp", "instant")).toEqual({
      kind: "header",
    });
    expect(parseLine('Field "power.draw.instant" is not a valid field to query.', "instant")).toEqual({
      kind: "invalid-field",
      field: "power.draw.instant",
    });
    const failure =
      "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.";
    expect(parseLine(failure, "instant")).toEqual({ kind: "message", text: failure });
    expect(parseLine("Failed to initialize NVML: Driver/library version mismatch", "averaged")).toEqual({
      kind: "message",
      text: "Failed to initialize NVML: Driver/library version mismatch",
    });
    expect(parseLine("No devices were found", "instant").kind).toBe("message");
  });

  it("calls a truncated or garbled row malformed, keeping its index when it has one", () => {
    expect(parseLine("0, 631.9", "instant")).toEqual({ kind: "malformed", index: 0, text: "0, 631.9" });
    expect(parseLine("0, 1.00, 2.00, 3.00, 2025/11/24 14:08:55.751", "instant")).toMatchObject({
      kind: "malformed",
      index: 0,
    });
    expect(parseLine("0, 1.00, 2.00, 2025/11/24 14:08:55.751", "averaged")).toMatchObject({
      kind: "malformed",
      index: 0,
    });
    expect(parseLine("0, 1.00, 2.00, 2025/11/24 14:08:55.751, x", "averaged")).toMatchObject({
      kind: "malformed",
    });
    expect(parseLine("0x, 1.00, 2.00", "instant")).toMatchObject({ kind: "malformed", index: null });
    expect(parseLine("1.5, 1.00, 2.00", "instant")).toMatchObject({ kind: "malformed", index: null });
    // A row may be well-formed with garbled cells: those are errors of the cell, not readings.
    const r = row(parseLine("0, 6 9.62, 69.85", "instant"));
    expect(r.instant).toMatchObject({ ok: false, code: SMI_ERROR.MALFORMED });
  });
});

describe("LineSplitter", () => {
  it("joins lines split across chunks and keeps the unterminated end as truncated", () => {
    const s = new LineSplitter(MAX_LINE);
    expect(s.push("0, 1.00, 2.00\n1, 3.")).toEqual(["0, 1.00, 2.00"]);
    expect(s.push("00, 4.00\n")).toEqual(["1, 3.00, 4.00"]);
    expect(s.push("")).toEqual([]);
    expect(s.push("0, 631.9")).toEqual([]);
    expect(s.rest()).toBe("0, 631.9");
    expect(s.rest()).toBe("");
  });

  it("drops a line longer than any row without holding it in memory", () => {
    const s = new LineSplitter(MAX_LINE);
    expect(s.push("x".repeat(MAX_LINE + 10))).toEqual([]);
    expect(s.overlong).toBe(1);
    expect(s.push("yyyy\n0, 1.00, 2.00\n")).toEqual(["0, 1.00, 2.00"]);
  });
});

describe("summarizeRows", () => {
  it("says per card which power the sampler would read, and why not", () => {
    const lines = [
      "0, 625.68, 631.95",
      "1, [N/A], 39.32",
      "2, [Not Supported], [Not Supported]",
      "0, 1.00, 1.00",
    ].map((l) => parseLine(l, "instant"));
    expect(summarizeRows(lines)).toEqual([
      { index: 0, power: "instant", watts: 625.68, reason: null },
      { index: 1, power: "averaged", watts: 39.32, reason: null },
      { index: 2, power: null, watts: null, reason: "nvidia-smi printed [Not Supported]" },
    ]);
  });
});
