import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counterAdvanceBounds } from "./fakes/card-energy.js";
import { nativeReady } from "./fakes/paths.js";
import { scenarioForThisProcess } from "./fakes/scenario.js";

// giul/prometheus with prom-client: the registry's text output scraped and checked against the
// records and the NVML double's ground truth.

const POWER_W = 280;
const UUID = "GPU-7a7a0000-0000-4000-8000-0000000000bb";
const sc = scenarioForThisProcess({
  driverVersion: "575.51.03",
  devices: [{ name: "NVIDIA H100 80GB HBM3", uuid: UUID, power: POWER_W, counterStepMs: 10 }],
});
const { Meter } = await import("../src/index.js");
const { collectGiulMetrics } = await import("../src/exporters/prometheus.js");
const { cardInUse } = await import("../src/select/in-use.js");

const ready = nativeReady();
afterAll(() => sc.remove());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const node = { name: "iris", gpuIndex: 0, idleW: 60 };

interface Scraped {
  types: Map<string, string>;
  /** `name{labels}` → value, labels as printed. */
  samples: Map<string, number>;
}

/** Parses the text exposition format, failing on any line it does not understand. */
function parse(text: string): Scraped {
  const types = new Map<string, string>();
  const samples = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("# HELP ")) continue;
    const typed = /^# TYPE (\w+) (\w+)$/.exec(line);
    if (typed) {
      types.set(typed[1] as string, typed[2] as string);
      continue;
    }
    const m = /^(\w+)(\{.*\})? (\S+)$/.exec(line);
    if (m === null) throw new Error(`unparseable line: ${line}`);
    samples.set(`${m[1]}${m[2] ?? ""}`, Number(m[3]));
  }
  return { types, samples };
}

function value(s: Scraped, key: string): number {
  const v = s.samples.get(key);
  if (v === undefined) throw new Error(`no sample ${key} in:\n${[...s.samples.keys()].join("\n")}`);
  return v;
}

describe.runIf(ready)("giul/prometheus with prom-client", () => {
  const registry = new Registry();
  let collection: ReturnType<typeof collectGiulMetrics>;
  beforeAll(async () => {
    const warm = await Meter.forNode(node).open();
    await warm.close();
    collection = collectGiulMetrics(registry);
  });
  afterAll(() => collection.disable());

  it("registers a per-request histogram and every window, by card, energy_method, backend and node", async () => {
    const records = await Promise.all(
      Array.from({ length: 5 }, async (_, i) => {
        const { energy } = await Meter.forNode(node).measure(() => sleep(40 + 20 * i));
        return energy;
      }),
    );
    const unmeterable = {
      name: "far",
      idleW: 10,
      isLocal: false,
      powerEndpoint: "http://127.0.0.1:9",
      timeoutMs: 50,
    };
    const unknown = await Meter.forNode(unmeterable).open();
    await unknown.close();
    unknown.result();

    const s = parse(await registry.metrics());
    expect(s.types.get("giul_request_energy_joules")).toBe("histogram");
    expect(s.types.get("giul_requests_total")).toBe("counter");
    const labels = `hw_id="${UUID}",hw_type="gpu",energy_method="sampled",backend="nvml_counter",node="iris"`;
    const joules = records.map((e) => e.joules as number);
    const sum = joules.reduce((a, b) => a + b, 0);
    expect(records.every((e) => e.method === "sampled")).toBe(true);
    expect(value(s, `giul_request_energy_joules_count{${labels}}`)).toBe(5);
    expect(value(s, `giul_request_energy_joules_sum{${labels}}`)).toBeCloseTo(sum, 9);
    expect(value(s, `giul_requests_total{${labels}}`)).toBe(5);
    expect(
      value(
        s,
        'giul_requests_total{hw_id="far",hw_type="gpu",energy_method="unknown",backend="remote_agent",node="far"}',
      ),
    ).toBe(1);
    // Buckets 0.1 J … 10 kJ, each counting the records at or below it.
    for (const le of [0.1, 1, 10, 100, 1000, 10000]) {
      expect(value(s, `giul_request_energy_joules_bucket{le="${le}",${labels}}`)).toBe(
        joules.filter((j) => j <= le).length,
      );
    }
    expect(value(s, `giul_request_energy_joules_bucket{le="+Inf",${labels}}`)).toBe(5);
  });

  it("reports hw_energy_joules_total and hw_power_watts for the card, advancing by the scenario's energy", async () => {
    const m = await Meter.forNode(node).open();
    try {
      const readings = cardInUse(0)?.readings;
      const at = () => readings?.latest()?.tNs as bigint;
      const b1 = at();
      const first = parse(await registry.metrics());
      const a1 = at();
      await sleep(800);
      const b2 = at();
      const second = parse(await registry.metrics());
      const a2 = at();
      expect(second.types.get("hw_energy_joules_total")).toBe("counter");
      expect(second.types.get("hw_power_watts")).toBe("gauge");
      const hw =
        `hw_id="${UUID}",hw_type="gpu",hw_name="NVIDIA H100 80GB HBM3",hw_vendor="NVIDIA",` +
        'hw_driver_version="575.51.03"';
      const advanced =
        value(second, `hw_energy_joules_total{${hw}}`) - value(first, `hw_energy_joules_total{${hw}}`);
      const { lo, hi } = counterAdvanceBounds(
        sc,
        0,
        { before: b1, after: a1 },
        { before: b2, after: a2 },
        POWER_W * 0.01,
      );
      expect(lo).toBeGreaterThan(180);
      expect(advanced).toBeGreaterThanOrEqual(lo);
      expect(advanced).toBeLessThanOrEqual(hi);
      expect(value(second, `hw_power_watts{${hw}}`)).toBeCloseTo(POWER_W, 6);
    } finally {
      await m.close();
    }
  });

  it("removes its metrics and stops when disabled", async () => {
    const other = new Registry();
    const c = collectGiulMetrics(other, { cardMetrics: false, buckets: [1, 10] });
    const before = parse(await other.metrics());
    expect([...before.types.keys()]).toEqual(["giul_request_energy_joules", "giul_requests_total"]);
    c.disable();
    c.disable();
    await Meter.forNode(node).measure(() => sleep(30));
    expect(await other.metrics()).toBe("\n");
  });
});
