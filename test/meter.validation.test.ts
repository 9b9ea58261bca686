import { afterAll, describe, expect, it } from "vitest";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// Bad input, consistently: every option, mark and result argument is checked like a Node field —
// unknown keys reported with the name meant, values quoted, whole numbers where counts are meant —
// and is a GiulError naming the field, never a raw TypeError. And the sync hook is bounded.

const sc = scenarioForThisProcess({ devices: [{ power: 200 }] });
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
});
