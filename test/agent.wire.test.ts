import { describe, expect, it } from "vitest";
import { parseEnergy, parsePower } from "../src/vocabulary/wire.js";

// The client side of /power, as the remote backend reads either agent (this one or Python's).

const python02 = {
  watts: 212.5,
  name: "NVIDIA H100 80GB HBM3",
  memory_used_mib: 20000,
  memory_total_mib: 81559,
  memory_free_mib: 61559,
  utilization_pct: 87,
  compute_apps: [{ pid: 4242, used_mib: 19000, name: "VLLM::EngineCore" }],
};

/** Why parsePower refused a body (undefined when it accepted it). */
function reasonOf(body: unknown): string | undefined {
  const r = parsePower(body);
  return r.ok ? undefined : r.reason;
}

describe("parsePower", () => {
  it("reads a giul 0.2 agent's /power, field for field", () => {
    expect(parsePower(python02)).toEqual({
      ok: true,
      value: {
        watts: 212.5,
        name: "NVIDIA H100 80GB HBM3",
        memoryUsedMib: 20000,
        memoryTotalMib: 81559,
        memoryFreeMib: 61559,
        utilizationPct: 87,
        computeApps: [{ pid: 4242, usedMib: 19000, name: "VLLM::EngineCore" }],
        exact: false,
      },
    });
  });

  it("meters an older agent that sends fewer fields: what is absent is null, never 0", () => {
    const r = parsePower({ watts: 75.25, name: "Tesla T4" });
    expect(r).toEqual({
      ok: true,
      value: {
        watts: 75.25,
        name: "Tesla T4",
        memoryUsedMib: null,
        memoryTotalMib: null,
        memoryFreeMib: null,
        utilizationPct: null,
        computeApps: null,
        exact: false,
      },
    });
  });

  it("refuses a body without watts, or with a field of the wrong type, naming it", () => {
    expect(reasonOf({ name: "x" })).toBe("the field watts is missing");
    expect(reasonOf({ ...python02, watts: "212" })).toBe("watts is not a number or null");
    expect(reasonOf({ ...python02, memory_free_mib: "lots" })).toBe(
      "memory_free_mib is not a number or null",
    );
    expect(reasonOf({ ...python02, compute_apps: [{ used_mib: 3 }] })).toMatch(/without a pid/);
    expect(reasonOf([1, 2])).toBe("the body is not a JSON object");
  });

  it("tells this agent (cumulative energy) from Python's", () => {
    const ours = { ...python02, agent: "giul-node/0.1.0", energy_j: 12.5, monotonic_ns: "123" };
    const r = parsePower(ours);
    expect(r.ok && r.value.exact).toBe(true);
  });
});

describe("parseEnergy", () => {
  const reading = {
    agent: "giul-node/0.1.0",
    gpu: 0,
    backend: "nvml_counter",
    energy_source: "counter",
    energy_series: "s-1",
    monotonic_ns: "123456789",
    energy_j: 1000.5,
    power_w: 250,
    interp_err_j: 0.02,
    read_ns: 30_000,
    sample_index: 42,
    faults_before: 0,
    faults_after: 0,
    counter_step_ns: 100e6,
    period_ns: 10e6,
    averaged_power: false,
    wait_ns: 5e6,
    power_min_w: 240,
    power_max_w: 260,
    power_range_ns: 2e9,
  };

  it("reads integral_unbounded, and takes an agent without it for one that says nothing of it", () => {
    const why = "its power sensor holds each reading";
    const held = parseEnergy({ ...reading, energy_source: "integral", integral_unbounded: why });
    expect(held.ok && held.value.integral_unbounded).toBe(why);
    const older = parseEnergy(reading);
    expect(older.ok && older.value.integral_unbounded).toBeNull();
  });

  it("reads integral_spread_j and integral_spread_ahead_j: absent is null, another type an error naming the field", () => {
    const integral = {
      ...reading,
      energy_source: "integral",
      integral_spread_j: 12.5,
      integral_spread_ahead_j: 0.75,
    };
    const r = parseEnergy(integral);
    expect(r.ok && [r.value.integral_spread_j, r.value.integral_spread_ahead_j]).toEqual([12.5, 0.75]);
    const older = parseEnergy(reading);
    expect(older.ok && [older.value.integral_spread_j, older.value.integral_spread_ahead_j]).toEqual([
      null,
      null,
    ]);
    expect(parseEnergy({ ...integral, integral_spread_ahead_j: null }).ok).toBe(true);
    const bad = parseEnergy({ ...integral, integral_spread_j: "12.5" });
    expect(bad.ok ? "" : bad.reason).toBe("integral_spread_j is not a number or null");
  });

  it("reads where an integral's reads were and their lag: absent is null, another type an error naming the field", () => {
    const integral = {
      ...reading,
      energy_source: "integral",
      integral_read_before_ns: 2_500_000,
      integral_read_after_ns: 1_000_000,
      integral_lag_ns: 10_000_000,
    };
    const r = parseEnergy(integral);
    expect(
      r.ok && [r.value.integral_read_before_ns, r.value.integral_read_after_ns, r.value.integral_lag_ns],
    ).toEqual([2_500_000, 1_000_000, 10_000_000]);
    const older = parseEnergy(reading);
    expect(
      older.ok && [
        older.value.integral_read_before_ns,
        older.value.integral_read_after_ns,
        older.value.integral_lag_ns,
      ],
    ).toEqual([null, null, null]);
    const bad = parseEnergy({ ...integral, integral_read_after_ns: "1000000" });
    expect(bad.ok ? "" : bad.reason).toBe("integral_read_after_ns is not a number or null");
  });

  it("reads edge_counter_only and counter_mj: absent is false and null, another type an error naming the field", () => {
    const placed = parseEnergy({ ...reading, edge_counter_only: true, counter_mj: 123456 });
    expect(placed.ok && [placed.value.edge_counter_only, placed.value.counter_mj]).toEqual([true, 123456]);
    const older = parseEnergy(reading);
    expect(older.ok && [older.value.edge_counter_only, older.value.counter_mj]).toEqual([false, null]);
    const bad = parseEnergy({ ...reading, edge_counter_only: "yes" });
    expect(bad.ok ? "" : bad.reason).toBe("edge_counter_only is not a boolean");
    const badMj = parseEnergy({ ...reading, counter_mj: "123456" });
    expect(badMj.ok ? "" : badMj.reason).toBe("counter_mj is not a number or null");
  });

  it("reads edge_bounded, and takes an agent without it for one that bounds the interpolation alone", () => {
    const fused = parseEnergy({ ...reading, edge_bounded: true });
    expect(fused.ok && fused.value.edge_bounded).toBe(true);
    const older = parseEnergy(reading);
    expect(older.ok).toBe(true);
    expect(older.ok && older.value.edge_bounded).toBe(false);
  });
});
