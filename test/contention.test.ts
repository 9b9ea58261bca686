import { describe, expect, it } from "vitest";
import { classify, isIgnored, matchesServing, ProcessWatcher, tenantsOf } from "../src/contention.js";
import { resolveNode } from "../src/rules/node.js";
import type { CardReader } from "../src/track/card.js";
import type { ProcessRead } from "../src/vocabulary/measurement.js";

const shared = resolveNode({
  name: "iris",
  idleW: 16,
  servingMatch: "vllm",
  contentionIgnore: ["chrome", "Xorg"],
  contentionFloorMib: 512,
});

describe("classifying resident processes", () => {
  it("ours, ignored by name, under the floor, or a tenant", () => {
    expect(classify(shared, { pid: 1, name: "VLLM::EngineCore", usedMib: 70_000 })).toBe("ours");
    expect(classify(shared, { pid: 2, name: "/usr/lib/xorg/Xorg", usedMib: 594 })).toBe("ignored");
    expect(classify(shared, { pid: 3, name: "/opt/google/chrome/chrome", usedMib: 300 })).toBe("ignored");
    expect(classify(shared, { pid: 4, name: "python3", usedMib: 200 })).toBe("small");
    expect(classify(shared, { pid: 5, name: "python3", usedMib: 9000 })).toBe("tenant");
  });

  it("ignores a display by name whatever its size (300 MiB one hour, 594 the next)", () => {
    for (const usedMib of [300, 594, 4000]) {
      expect(tenantsOf(shared, [{ pid: 9, name: "Xorg", usedMib }])).toEqual([]);
    }
    // a floor alone would have admitted it the second hour
    const floorOnly = resolveNode({ name: "n", idleW: 1, servingMatch: "vllm", contentionFloorMib: 512 });
    expect(tenantsOf(floorOnly, [{ pid: 9, name: "Xorg", usedMib: 594 }])).toEqual([
      { pid: 9, name: "Xorg", usedMib: 594 },
    ]);
  });

  it("two processes matching servingMatch are contention: none can be assumed ours", () => {
    const tenants = tenantsOf(shared, [
      { pid: 10, name: "VLLM::EngineCore", usedMib: 60_000 },
      { pid: 11, name: "VLLM::EngineCore", usedMib: 12_000 },
    ]);
    expect(tenants.map((t) => t.pid).sort()).toEqual([10, 11]);
    expect(tenantsOf(shared, [{ pid: 10, name: "VLLM::EngineCore", usedMib: 60_000 }])).toEqual([]);
  });

  it("an unknown size is not a small one", () => {
    expect(classify(shared, { pid: 6, name: "python3", usedMib: null })).toBe("tenant");
  });

  it("a dedicated node (no servingMatch) has no tenants by definition", () => {
    const dedicated = resolveNode({ name: "d", idleW: 1 });
    expect(tenantsOf(dedicated, [{ pid: 5, name: "python3", usedMib: 9000 }])).toEqual([]);
  });

  it("matches a RegExp as given and a string case-insensitively", () => {
    expect(matchesServing(/^vllm$/, "VLLM")).toBe(false);
    expect(matchesServing(/^vllm$/i, "VLLM")).toBe(true);
    expect(matchesServing(/vllm/g, "vllm")).toBe(true);
    expect(matchesServing(/vllm/g, "vllm")).toBe(true); // lastIndex does not leak between calls
    expect(matchesServing("LLaMA-server", "/app/llama-server")).toBe(true);
    expect(isIgnored(["xorg"], "/usr/lib/xorg/Xorg")).toBe(true);
    expect(isIgnored([], "Xorg")).toBe(false);
    expect(isIgnored(["Xorg"], null)).toBe(false);
  });
});

describe("ProcessWatcher coalesces reads", () => {
  function countingReader(delayMs: number) {
    const reads: bigint[] = [];
    const reader: CardReader = {
      readProcesses: async (): Promise<ProcessRead> => {
        const tNs = process.hrtime.bigint();
        reads.push(tNs);
        await new Promise((r) => setTimeout(r, delayMs));
        return { ok: true, tNs, processes: [{ pid: reads.length, name: "x", usedMib: 1 }] };
      },
      readInfo: async () => ({ ok: false, reason: "unused" }),
      readState: async () => ({ ok: false, reason: "unused" }),
    };
    return { reader, reads };
  }

  it("gives each edge the first snapshot taken at or after it", async () => {
    const { reader } = countingReader(5);
    const w = new ProcessWatcher(reader, 50);
    for (let i = 0; i < 20; i++) {
      const edge = process.hrtime.bigint();
      const snap = await w.after(edge);
      expect(snap.tNs >= edge).toBe(true);
      await new Promise((r) => setTimeout(r, i % 3));
    }
  });

  it("reads at most once per interval however many edges ask", async () => {
    const { reader, reads } = countingReader(2);
    const w = new ProcessWatcher(reader, 100);
    const t0 = Date.now();
    const pending: Promise<ProcessRead>[] = [];
    while (Date.now() - t0 < 1000) {
      for (let i = 0; i < 10; i++) pending.push(w.after(process.hrtime.bigint()));
      await new Promise((r) => setTimeout(r, 5));
    }
    await Promise.all(pending);
    expect(pending.length).toBeGreaterThan(500);
    // 1 s of asking: about 10 reads (one per 100 ms), plus the last one the final edges wait for
    expect(reads.length).toBeLessThanOrEqual(12);
    for (let i = 1; i < reads.length; i++) {
      const gapMs = Number((reads[i] as bigint) - (reads[i - 1] as bigint)) / 1e6;
      expect(gapMs).toBeGreaterThanOrEqual(95);
    }
  });

  it("a read that never answers is a failed snapshot within the read timeout, so close() cannot hang on it", async () => {
    let calls = 0;
    const stuck: CardReader = {
      // nvidia-smi stuck in the driver, or an NVML call that never returns
      readProcesses: () => {
        calls += 1;
        return new Promise<ProcessRead>(() => {});
      },
      readInfo: async () => ({ ok: false, reason: "unused" }),
      readState: async () => ({ ok: false, reason: "unused" }),
    };
    const w = new ProcessWatcher(stuck, 20, 150);
    const t0 = performance.now();
    const snap = await w.after(process.hrtime.bigint());
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(snap.ok).toBe(false);
    if (!snap.ok) expect(snap.reason).toMatch(/did not come within 150 ms/);
    // and the next edge reads again rather than joining the stuck read
    const edge = process.hrtime.bigint();
    const next = await w.after(edge);
    expect(next.ok).toBe(false);
    expect(next.tNs >= edge).toBe(true);
    expect(calls).toBe(2);
  });

  it("a reader that throws is a failed snapshot, not a rejection", async () => {
    const throwing: CardReader = {
      readProcesses: () => {
        throw new Error("boom");
      },
      readInfo: async () => ({ ok: false, reason: "unused" }),
      readState: async () => ({ ok: false, reason: "unused" }),
    };
    const snap = await new ProcessWatcher(throwing, 20, 150).after(process.hrtime.bigint());
    expect(snap.ok).toBe(false);
    if (!snap.ok) expect(snap.reason).toMatch(/boom/);
  });
});
