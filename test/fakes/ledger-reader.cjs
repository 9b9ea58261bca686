// A reader of a device's event log (binding.d.ts LedgerLayout) under its seqlock, the protocol of
// NativeRing in src/sources/native/descriptor.ts. Plain CommonJS so that worker_threads started with
// `eval: true` can require it as well as the test files (test/native.ledger-log.test.ts).
"use strict";

/**
 * How long a read keeps trying before it gives up (ms). An append holds the seqlock odd for well
 * under a microsecond, but a writer preempted inside its section holds it for as long as the
 * scheduler keeps it off the core: on a loaded 2-core host, longer than a million tries (about
 * 20 ms), which failed test/native.ledger-log.test.ts now and then.
 */
const PATIENCE_MS = 5_000;

class LedgerReader {
  /**
   * @param {ArrayBuffer} buffer NativeSampler.ledger
   * @param {import("../../binding.js").LedgerLayout} layout GiulBinding.ledgerLayout
   */
  constructor(buffer, layout) {
    this.L = layout;
    this.f64 = new Float64Array(buffer);
    this.u32 = new Uint32Array(buffer);
    this.capacity = this.f64[layout.hCapacity];
    /** Reads that found the seqlock odd or changed, and were retried. */
    this.retries = 0;
  }

  /** The layout version stored as uint32 word 1. */
  version() {
    return this.u32[1];
  }

  /** Runs `read` until the generation is even before and unchanged after it. */
  consistent(read) {
    let deadline = 0;
    for (let tries = 0; ; tries++) {
      const g = Atomics.load(this.u32, 0);
      if ((g & 1) === 0) {
        const value = read();
        if (Atomics.compareExchange(this.u32, 0, g, g) === g) return value;
      }
      this.retries++;
      if ((tries & 1023) === 1023) {
        const now = Date.now();
        if (deadline === 0) deadline = now + PATIENCE_MS;
        else if (now > deadline) break;
      }
    }
    throw new Error(`the ledger's seqlock never held still in ${PATIENCE_MS} ms`);
  }

  header() {
    const { f64: f, L } = this;
    return this.consistent(() => ({
      published: f[L.hPublished],
      capacity: f[L.hCapacity],
      idleW: f[L.hIdleW],
      open: f[L.hOpen],
      weight: f[L.hWeight],
    }));
  }

  /** Entry k, or null when it is not in the log (not appended yet, or overwritten). */
  entry(k) {
    const { f64: f, L, capacity } = this;
    const base = L.headerSlots + (k % capacity) * L.entrySlots;
    return this.consistent(() => {
      const published = f[L.hPublished];
      if (k < 0 || k >= published || k < published - capacity) return null;
      return {
        k,
        t: f[base + L.eT],
        ringHead: f[base + L.eRingHead],
        weightBefore: f[base + L.eWeightBefore],
        weightAfter: f[base + L.eWeightAfter],
        countAfter: f[base + L.eCountAfter],
        ref: f[base + L.eRef],
        owner: f[base + L.eOwner],
        own: f[base + L.eOwn],
        kind: f[base + L.eKind],
        idleW: f[base + L.eIdleW],
      };
    });
  }

  /** Every entry still in the log, oldest first, each read consistently. */
  entries() {
    const { published } = this.header();
    const out = [];
    for (let k = Math.max(0, published - this.capacity); k < published; k++) {
      const e = this.entry(k);
      if (e !== null) out.push(e);
    }
    return out;
  }
}

module.exports = { LedgerReader };
