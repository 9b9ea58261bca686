import { describe, expect, it } from "vitest";
import { type ChargeContext, charge, Energy } from "../src/rules/energy.js";

const ctx = (over: Partial<ChargeContext> = {}): ChargeContext => ({
  backend: "nvml_counter",
  seconds: 2,
  idleW: 38,
  tokens: null,
  joulesPer1kHint: null,
  contendedBy: null,
  contentionUnchecked: null,
  shared: false,
  stages: {},
  attribution: "exclusive",
  concurrency: null,
  ...over,
});
const measured = (grossJoules: number) =>
  ({ ok: true, grossJoules, samples: 200, maxGapMs: 11, uncertaintyJoules: 1.5, caveat: null }) as const;

describe("the rules", () => {
  it("charges above idle: joules = measured − idleW × seconds", () => {
    const e = charge(measured(500), ctx());
    expect(e.method).toBe("sampled");
    expect(e.joules).toBeCloseTo(500 - 38 * 2, 9);
    expect(e.measuredJoules).toBeCloseTo(424, 9);
    expect(e.uncertaintyJoules).toBe(1.5);
    expect(e.reason).toBeNull();
  });

  it("never reports a sampled zero: ≤ 0 above idle is estimated from the hint", () => {
    const e = charge(measured(76), ctx({ joulesPer1kHint: 4100, tokens: 412 }));
    expect(e.method).toBe("estimated");
    expect(e.joules).toBeCloseTo((4100 * 412) / 1000, 9);
    expect(e.reason).toMatch(/failed measurement/);
    expect(e.measuredJoules).toBeCloseTo(0, 9);
  });

  it("…or unknown when there is no hint or no token count, with the reason", () => {
    const noHint = charge(measured(60), ctx({ tokens: 10 }));
    expect(noHint.method).toBe("unknown");
    expect(noHint.joules).toBeNull();
    expect(noHint.reason).toMatch(/no joulesPer1kHint/);
    const noTokens = charge(measured(60), ctx({ joulesPer1kHint: 4100 }));
    expect(noTokens.method).toBe("unknown");
    expect(noTokens.reason).toMatch(/no token count/);
  });

  it("labels a failed measurement and keeps the reason", () => {
    const e = charge(
      { ok: false, reason: "closing edge: GPU is lost" },
      ctx({ joulesPer1kHint: 1000, tokens: 3 }),
    );
    expect(e.method).toBe("estimated");
    expect(e.joules).toBe(3);
    expect(e.reason).toMatch(/^closing edge: GPU is lost; estimated/);
    expect(e.measuredJoules).toBeNull();
  });

  it("demotes a contended window out of sampled, keeping what was measured", () => {
    const tenant = { pid: 4242, name: "python3", usedMib: 9000 };
    const e = charge(measured(500), ctx({ contendedBy: [tenant] }));
    expect(e.method).toBe("unknown");
    expect(e.contended).toBe(true);
    expect(e.contendedBy).toEqual([tenant]);
    expect(e.measuredJoules).toBeCloseTo(424, 9);
    expect(e.reason).toMatch(/python3 \(pid 4242\)/);
  });

  it("gives the fleet record in snake_case, stages included", () => {
    const stage = charge(measured(100), ctx({ seconds: 1 }));
    const e = charge(measured(500), ctx({ tokens: 424, stages: { generate: stage } }));
    const json = JSON.parse(JSON.stringify(e));
    expect(Object.keys(json)).toEqual([
      "joules",
      "method",
      "backend",
      "seconds",
      "idle_w",
      "tokens",
      "joules_per_1k_tokens",
      "stages",
      "contended",
      "contention_checked",
      "contended_by",
      "reason",
      "measured_joules",
      "uncertainty_joules",
      "samples",
      "max_gap_ms",
      "attribution",
      "concurrency_mean",
      "concurrency_max",
      "card_joules",
    ]);
    expect(json.joules_per_1k_tokens).toBeCloseTo(1000, 9);
    expect(json.stages.generate.joules).toBeCloseTo(62, 9);
    expect(json.contended_by).toEqual([]);
    expect(e).toBeInstanceOf(Energy);
    expect(Object.isFrozen(e)).toBe(true);
  });
});
