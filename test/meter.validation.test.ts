import { afterAll, describe, expect, it } from "vitest";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// Bad input, consistently: every option, mark and result argument is checked like a Node field —
// unknown keys reported with the name meant, values quoted, whole numbers where counts are meant —
// and is a GiulError naming the field, never a raw TypeError. And the sync hook is bounded.

// Device 1 enforces a 300 W power limit: an idle floor above it is a mistake.
const sc = scenarioForThisProcess({ devices: [{ power: 200 }, { power: 200, enforcedLimitW: 300 }] });
afterAll(() => sc.remove());
const { Meter, isGiulError } = await import("../src/index.js");

const node = { name: "iris", idleW: 50 };

function thrown(fn: () => unknown): { code?: string; field?: string; message: string } {
  try {
    fn();
  } catch (e) {
    return e as { code?: string; field?: string; message: string };
  }
  throw new Error("did not throw");
}

describe("validation of options, marks and results", () => {
  it("reports unknown option keys with the name meant", () => {
    const caseSlip = thrown(() => Meter.forNode(node, { periodMS: 5 } as never));
    expect(isGiulError(caseSlip, "INVALID_OPTION")).toBe(true);
    expect(caseSlip.field).toBe("periodMS");
    expect(caseSlip.message).toMatch(/did you mean "periodMs"\?/);
    const python = thrown(() => Meter.forNode(node, { joules_per_1k_hint: 4100 } as never));
    expect(python.field).toBe("joules_per_1k_hint");
    expect(python.message).toMatch(/did you mean "joulesPer1kHint"\? \(giul for Node\.js uses camelCase\)/);
    const typo = thrown(() => Meter.forNode(node, { wieght: 2 } as never));
    expect(typo.message).toMatch(/did you mean "weight"/);
    const far = thrown(() => Meter.forNode(node, { colour: "red" } as never));
    expect(far.message).toMatch(/known keys are joulesPer1kHint, sync, periodMs/);
  });

  it("quotes string values in messages", () => {
    expect(thrown(() => Meter.forNode(node, { joulesPer1kHint: "4100" as never })).message).toMatch(
      /got "4100"/,
    );
    expect(thrown(() => Meter.forNode(node, { joulesPer1kHint: "" as never })).message).toMatch(/got ""$/);
    expect(thrown(() => Meter.forNode(node, { sync: "yes" as never })).message).toMatch(/got "yes"/);
    expect(thrown(() => Meter.forNode(node, 5 as never)).field).toBe("options");
  });

  it("wants whole numbers of tokens, and no unknown keys in marks and results", async () => {
    const m = await Meter.forNode(node).open();
    expect(thrown(() => m.mark("a", { tokens: 1.5 })).message).toMatch(
      /tokens: expected a whole number of tokens ≥ 0, got 1\.5/,
    );
    expect(thrown(() => m.mark("a", { token: 3 } as never)).message).toMatch(/did you mean "tokens"/);
    expect(thrown(() => m.mark("a", 7 as never)).field).toBe("options");
    m.mark("a", null as never); // null is no options
    await m.close();
    expect(m.result(null as never).method).toBeDefined();
    expect(thrown(() => m.result({ tokens: -1 })).field).toBe("tokens");
    expect(thrown(() => m.result({ tokens: "12" as never })).message).toMatch(/got "12"/);
  });

  it("never throws a raw TypeError, whatever the stage name is", async () => {
    const m = await Meter.forNode(node).open();
    await m.close();
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    for (const name of [10n, circular, Symbol("s"), undefined]) {
      const e = thrown(() => m.mark(name as never));
      expect(isGiulError(e, "WINDOW_STATE")).toBe(true);
    }
    const open = await Meter.forNode(node).open();
    for (const name of [10n, circular, Symbol("s"), ""]) {
      const e = thrown(() => open.mark(name as never));
      expect(isGiulError(e, "INVALID_OPTION")).toBe(true);
      expect(e.field).toBe("name");
    }
    await open.close();
  });

  it("a sync hook that never settles is cut off at syncTimeoutMs, and the window says so", async () => {
    const m = await Meter.forNode(node, { sync: () => new Promise(() => {}), syncTimeoutMs: 150 }).open();
    const t0 = performance.now();
    await m.close();
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(140);
    expect(waited).toBeLessThan(2_000);
    const e = m.result();
    expect(e.method).toBe("unknown");
    expect(e.reason).toMatch(/the sync hook did not finish within syncTimeoutMs \(150 ms\)/);
    expect(thrown(() => Meter.forNode(node, { syncTimeoutMs: 0 })).field).toBe("syncTimeoutMs");
  });

  it("a remote node without a powerEndpoint is refused, naming the field", () => {
    const e = thrown(() => Meter.forNode({ name: "far", idleW: 40, isLocal: false }));
    expect(isGiulError(e, "INVALID_NODE")).toBe(true);
    expect(e.field).toBe("node.powerEndpoint");
  });

  it("caps a stage name at 256 characters, naming the field", async () => {
    const m = await Meter.forNode(node).open();
    const long = thrown(() => m.mark("x".repeat(1_000_000)));
    expect(isGiulError(long, "INVALID_OPTION")).toBe(true);
    expect(long.field).toBe("name");
    expect(long.message).toMatch(/at most 256 characters, got 1000000/);
    m.mark("y".repeat(256));
    await m.close();
    expect(Object.keys(m.result().stages)).toEqual(["y".repeat(256)]);
  });

  it("refuses at open an idleW above the power limit the card enforces, naming the field", async () => {
    const hot = { name: "hot", gpuIndex: 1, idleW: 400 };
    const refused = await Meter.forNode(hot)
      .open()
      .then(
        () => null,
        (e: unknown) => e as { code?: string; field?: string; message: string },
      );
    expect(refused).not.toBeNull();
    expect(isGiulError(refused, "INVALID_NODE")).toBe(true);
    expect(refused?.field).toBe("idleW");
    expect(refused?.message).toMatch(/400 W is above the 300 W power limit/);
    // At the limit it is a floor like any other.
    const m = await Meter.forNode({ ...hot, idleW: 300 }).open();
    await m.close();
    expect(m.result().method).not.toBe("sampled"); // 200 W drawn is below a 300 W floor
  });

  it("warns once, and meters, where an idleW above any card's idle cannot be checked against a limit", async () => {
    const { simulateCard } = await import("../src/testing.js");
    const card = simulateCard({ gpuIndex: 7, watts: 2600 });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    try {
      const big = { name: "unchecked", gpuIndex: 7, idleW: 2000 };
      for (let i = 0; i < 2; i++) {
        const m = await Meter.forNode(big).open();
        await m.close();
        expect(m.result().backend).toBe("simulated");
      }
      await new Promise((r) => setImmediate(r));
      const ours = warnings.filter((w) => (w as { code?: string }).code === "GIUL_IDLE_UNCHECKED");
      expect(ours).toHaveLength(1);
      expect(ours[0]?.message).toMatch(/"unchecked" has idleW 2000 W/);
    } finally {
      process.off("warning", onWarning);
      card.close();
    }
  });
});
