import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import type { CardLedger, LedgerWindow } from "../src/ledger/ledger.js";
import { AbandonedWindows, Leftovers } from "../src/meter/abandoned.js";
import type { Track } from "../src/track/track.js";

// Windows are registered with the FinalizationRegistry only once open across a whole sweep (the
// registry's cells cost every window ~0.6 µs and the collector more): checked here with the
// sweeps run by hand (the watch's own timer set an hour off), and real collections.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A window's leftovers whose track counts its releases. */
function leftovers(): { held: Leftovers; releases: () => number } {
  let released = 0;
  const track = {
    release: () => {
      released += 1;
    },
  } as unknown as Track;
  // A window whose weight is already off the card (nothing to close in the ledger).
  const ledger = {} as unknown as CardLedger;
  const entries = { weight: 0 } as unknown as LedgerWindow;
  return { held: new Leftovers(track, null, ledger, entries), releases: () => released };
}

/** A window's Meter, added to the watch: only a weak reference to it is kept here. */
function opened(watch: AbandonedWindows, held: Leftovers): WeakRef<object> {
  const meter = {};
  watch.add(meter, held);
  return new WeakRef(meter);
}

/** Collects until `done()` or about 2 s have passed. */
async function collectUntil(done: () => boolean): Promise<void> {
  for (let i = 0; i < 40; i++) {
    // A job of its own: a WeakRef's deref() keeps its target alive to the end of the job it ran in.
    await sleep(25);
    gc();
    await sleep(25);
    if (done()) return;
  }
}

describe("AbandonedWindows", () => {
  it("keeps nothing of a window that closed before a whole sweep, and never releases its leftovers", async () => {
    const watch = new AbandonedWindows(3_600_000);
    const { held, releases } = leftovers();
    const ref = opened(watch, held);
    expect(watch.listed).toBe(1);
    watch.remove(held);
    watch.remove(held); // idempotent
    expect(watch.listed).toBe(0);
    await collectUntil(() => ref.deref() === undefined);
    expect(ref.deref()).toBeUndefined();
    watch.sweep();
    watch.sweep();
    await collectUntil(() => false);
    expect(releases()).toBe(0);
  });

  it("registers a window only once it has been open across a whole sweep, and releases it when collected", async () => {
    const watch = new AbandonedWindows(3_600_000);
    const a = leftovers();
    const b = leftovers();
    watch.add({}, a.held);
    // Opened since the last sweep: this one only starts its whole sweep.
    watch.sweep();
    expect(watch.listed).toBe(1);
    watch.add({}, b.held);
    // a has been open across a whole sweep now (registered, held no more by the list); b has not.
    watch.sweep();
    expect(watch.listed).toBe(1);
    await collectUntil(() => a.releases() > 0);
    expect(a.releases()).toBe(1);
    expect(b.releases()).toBe(0);
    // The list still holds b: not collected, not released, until the next sweep registers it.
    watch.sweep();
    expect(watch.listed).toBe(0);
    await collectUntil(() => b.releases() > 0);
    expect(b.releases()).toBe(1);
  });

  it("a registered window that closes is unregistered: collected, nothing is released", async () => {
    const watch = new AbandonedWindows(3_600_000);
    const { held, releases } = leftovers();
    const ref = opened(watch, held);
    watch.sweep();
    watch.sweep();
    expect(watch.listed).toBe(0);
    watch.remove(held);
    await collectUntil(() => ref.deref() === undefined);
    expect(ref.deref()).toBeUndefined();
    await collectUntil(() => false);
    expect(releases()).toBe(0);
  });

  it("windows closing in any order leave the others listed", () => {
    const watch = new AbandonedWindows(3_600_000);
    const all = Array.from({ length: 50 }, () => leftovers().held);
    for (const held of all) watch.add({}, held);
    // Close every third, from the middle out: each close moves the last entry into its slot.
    const closed = all.filter((_, i) => i % 3 === 0);
    for (const held of [...closed.slice(8), ...closed.slice(0, 8).reverse()]) watch.remove(held);
    expect(watch.listed).toBe(50 - closed.length);
    for (const held of all) watch.remove(held);
    expect(watch.listed).toBe(0);
  });
});
