/**
 * Helpers of the event-log suites (test/native.ledger-log*.test.ts): a typed LedgerReader over
 * NativeSampler.ledger (test/fakes/ledger-reader.cjs, which workers require too), and workers that
 * hold their own reference to a device's sampler.
 */
import { createRequire } from "node:module";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import type { LedgerLayout, NativeSampler } from "../../binding.js";
import { ADDON, ROOT } from "./paths.js";

export interface LedgerHeader {
  readonly published: number;
  readonly capacity: number;
  readonly idleW: number;
  readonly open: number;
  readonly weight: number;
}

export interface LedgerEntry {
  readonly k: number;
  readonly t: number;
  readonly ringHead: number;
  readonly weightBefore: number;
  readonly weightAfter: number;
  readonly countAfter: number;
  readonly ref: number;
  readonly owner: number;
  readonly own: number;
  readonly kind: number;
  readonly idleW: number;
}

/** Reads under the log's seqlock (the protocol of NativeRing in src/sources/native/descriptor.ts). */
export interface LedgerReader {
  readonly capacity: number;
  /** Reads that found the seqlock odd or moved, and were retried. */
  readonly retries: number;
  /** The layout version stored as uint32 word 1. */
  version(): number;
  header(): LedgerHeader;
  /** Entry k, or null when it is not in the log (not appended yet, or overwritten). */
  entry(k: number): LedgerEntry | null;
  /** Every entry still in the log, oldest first. */
  entries(): LedgerEntry[];
}

/** The reader's CommonJS source, for workers to require. */
export const LEDGER_READER = join(ROOT, "test", "fakes", "ledger-reader.cjs");

const { LedgerReader: Reader } = createRequire(import.meta.url)(LEDGER_READER) as {
  LedgerReader: new (buffer: ArrayBuffer, layout: LedgerLayout) => LedgerReader;
};

export function ledgerReader(s: NativeSampler, layout: LedgerLayout): LedgerReader {
  return new Reader(s.ledger, layout);
}

/**
 * A worker running `body` (CommonJS) with `b` the addon, `s` its own sampler of workerData.device
 * and `log` a LedgerReader over that sampler's ledger; it posts { ready: true } after `body`.
 */
export function ledgerWorker(body: string, data: Record<string, unknown>): Worker {
  const code = `
    const { parentPort, workerData } = require("node:worker_threads");
    const b = require(workerData.addon);
    const { LedgerReader } = require(workerData.reader);
    b.nvmlInit().then((info) => {
      if (!info.ok) throw new Error(info.reason);
      const s = b.openSampler(workerData.device, 1000);
      if (!s.ok) throw new Error(s.reason);
      const log = new LedgerReader(s.ledger, b.ledgerLayout);
      ${body}
      parentPort.postMessage({ ready: true });
    });
  `;
  return new Worker(code, { eval: true, workerData: { addon: ADDON, reader: LEDGER_READER, ...data } });
}

/** The worker's next message; rejects when the worker fails first. */
export function nextMessage<T>(w: Worker): Promise<T> {
  return new Promise((done, fail) => {
    const onMessage = (m: T): void => {
      w.off("error", onError);
      done(m);
    };
    const onError = (error: Error): void => {
      w.off("message", onMessage);
      fail(error);
    };
    w.once("message", onMessage);
    w.once("error", onError);
  });
}

/** Posts `question` and waits for the worker's answer (its next message). */
export function ask<T>(w: Worker, question: string): Promise<T> {
  const answer = nextMessage<T>(w);
  w.postMessage(question);
  return answer;
}

export async function waitFor(what: string, ok: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 5));
  }
}
