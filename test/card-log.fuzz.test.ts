/**
 * The card's event log against what a hostile or broken process of the same user could leave in
 * it (fast-check): garbage segments of any size and content before it is opened, and garbage
 * written over it while it is in use. Nothing crashes or hangs, no entry read is one no giul
 * could have written, and a window on such a log is never a sampled figure from garbage.
 */
import { closeSync, openSync, rmSync, writeSync } from "node:fs";
import { createRequire } from "node:module";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import type { GiulBinding, NativeCardLog } from "../binding.js";
import { NativeCardEventLog, plausible } from "../src/sources/native/card-log.js";
import { emptyLogEntry } from "../src/track/track.js";
import { ADDON, built } from "./fakes/paths.js";

let b: GiulBinding;
const GROUP = process.env.GIUL_SHARE_GROUP ?? "";
const UID = process.getuid?.() ?? 0;
let keys = 0;
const freshKey = () => `GPU-fuzz-${process.pid}-${keys++}`;
const segment = (key: string) => `/dev/shm/giul.${UID}.${GROUP}.${key}`;
const LOG_OFFSET = 4096;

/** Every entry the reader accepts is plausible; the appends answer a sequence number or a code. */
function exercise(log: NativeCardLog): void {
  for (const [dw, dc, kind] of [
    [1, 1, 1],
    [0.5, 0, 3],
    [0, 0, 4],
    [-1.5, -1, 2],
  ] as const) {
    const k = log.append(dw, dc, 40, kind);
    expect(Number.isInteger(k)).toBe(true);
    expect(k >= 0 || k === -3 || k === -4).toBe(true);
  }
  expect(Number.isInteger(log.reap())).toBe(true);
  const reader = new NativeCardEventLog(log, b.cardLogLayout);
  const published = reader.published();
  expect(Number.isInteger(published) && published >= 0).toBe(true);
  const e = emptyLogEntry();
  for (let k = Math.max(0, published - 64); k < published + 2; k++) {
    if (reader.read(k, e)) expect(plausible(e)).toBe(true);
  }
}

describe.runIf(built([ADDON], "the addon"))("the card's event log against garbage", () => {
  beforeAll(() => {
    b = createRequire(import.meta.url)(ADDON) as GiulBinding;
  });

  it("a garbage segment of any size found at open: refused or a log of this process, never a crash", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ minLength: 0, maxLength: 256 }),
          // A giul header (magic, this layout, ready) followed by garbage.
          fc
            .uint8Array({ minLength: 0, maxLength: 5000 })
            .map((tail) => Uint8Array.from([0x47, 0x49, 0x55, 0x4c, 1, 0, 0, 0, 2, 0, 0, 0, ...tail])),
        ),
        (bytes) => {
          const key = freshKey();
          const fd = openSync(segment(key), "w", 0o600);
          if (bytes.length > 0) writeSync(fd, bytes);
          closeSync(fd);
          const log = b.openCardLog(key, GROUP);
          if (log.ok) exercise(log);
          else expect(log.reason).toMatch(/cannot account|giul/);
          rmSync(segment(key), { force: true });
        },
      ),
      { numRuns: 40 },
    );
  });

  it("garbage written over a log in use: appends refuse or go on, reads never return garbage", () => {
    const key = freshKey();
    const log = b.openCardLog(key, GROUP);
    if (!log.ok) throw new Error(log.reason);
    expect(log.scope).toBe("host");
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            at: fc.oneof(
              fc.integer({ min: 0, max: 4095 }),
              fc.integer({ min: LOG_OFFSET, max: LOG_OFFSET + 4096 }),
            ),
            bytes: fc.oneof(
              fc.uint8Array({ minLength: 1, maxLength: 64 }),
              fc.double().map((d) => new Uint8Array(Float64Array.of(d).buffer)),
            ),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        (writes) => {
          const fd = openSync(segment(key), "r+");
          for (const w of writes) writeSync(fd, w.bytes, 0, w.bytes.length, w.at);
          closeSync(fd);
          exercise(log);
          // The lock word left free, as a live process would leave it between appends.
          const fd2 = openSync(segment(key), "r+");
          writeSync(fd2, new Uint8Array(4), 0, 4, 16);
          closeSync(fd2);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("the reader over random memory: false or a plausible entry, never a throw", () => {
    const L = b.cardLogLayout;
    fc.assert(
      fc.property(
        fc.float64Array({ minLength: 8 + 8 * 4, maxLength: 8 + 8 * 4 }),
        fc.integer({ min: -2, max: 40 }),
        (slots, k) => {
          const handle = {
            buffer: slots.buffer,
            epochNs: 0n,
            slot: 0,
            scope: "host",
            reason: null,
            append: () => -4,
          };
          const reader = new NativeCardEventLog(handle as unknown as NativeCardLog, L);
          const e = emptyLogEntry();
          expect(Number.isFinite(reader.published())).toBe(true);
          if (reader.read(k, e)) expect(plausible(e)).toBe(true);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
