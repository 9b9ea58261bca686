import { afterAll, describe, expect, it, vi } from "vitest";
import type { Accounted } from "../src/ledger/ledger.js";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// A fault of giul's own while a close settles: the card's ledger throws after it has taken the
// close's waiter. The window says so, once; the settling that still completes afterwards and tells
// the waiter changes nothing of it, and the card is let go once (a window open throughout keeps
// it, and the next window measures).

const sc = scenarioForThisProcess({ devices: [{ power: 300, counterStepMs: 1 }] });
const { Meter } = await import("../src/index.js");
const { CardLedger } = await import("../src/ledger/ledger.js");

const ready = nativeReady();
afterAll(() => sc.remove());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const node = { name: "close-fault", idleW: 50 };

describe.runIf(ready)("a close whose settling throws", () => {
  it("is reported failed once, and the waiter told later changes nothing", async () => {
    const warm = await Meter.forNode(node).open();
    await sleep(50);
    await warm.close();
    expect(warm.result().method).toBe("sampled");

    let told = 0;
    const settleThen = CardLedger.prototype.settleThen;
    const spy = vi.spyOn(CardLedger.prototype, "settleThen").mockImplementationOnce(function (
      this: InstanceType<typeof CardLedger>,
      waiter: Accounted,
    ) {
      // The ledger keeps the waiter (it will be told when the edges settle), then fails.
      settleThen.call(this, {
        event: waiter.event,
        accounted: (thrown) => {
          told += 1;
          waiter.accounted(thrown);
        },
      });
      throw new Error("injected");
    });
    // Another window holds the card throughout: the faulty one must let go of it once, not twice.
    const other = await Meter.forNode(node).open();
    const users = (): number =>
      (other as unknown as { cards: { track: { users: number } }[] }).cards[0]?.track.users ?? -1;
    expect(users()).toBe(1);
    try {
      const m = await Meter.forNode(node, { joulesPer1kHint: 1000 }).open();
      expect(users()).toBe(2);
      await sleep(30);
      await m.close();
      const first = m.result({ tokens: 2 });
      expect(first.method).toBe("estimated");
      expect(first.joules).toBe(2);
      expect(first.reason).toMatch(/evaluating the window failed: Error: injected/);
      // The close's edges settle on the next samples: the ledger tells the waiter it took.
      for (let i = 0; i < 100 && told === 0; i++) await sleep(10);
      expect(told).toBe(1);
      const again = m.result({ tokens: 2 });
      expect(again.method).toBe("estimated");
      expect(again.reason).toBe(first.reason);
      expect(users()).toBe(1);
    } finally {
      spy.mockRestore();
    }
    await other.close();
    expect(other.result().method).toBe("sampled");
    const next = await Meter.forNode(node).open();
    await sleep(30);
    await next.close();
    expect(next.result().method).toBe("sampled");
  });
});
