import { describe, expect, it } from "vitest";
import { type Node, resolveNode } from "../src/rules/node.js";
import { GiulError } from "../src/vocabulary/errors.js";

const base: Node = { name: "iris", gpuIndex: 0, idleW: 38 };

function fieldOf(node: unknown): string | undefined {
  try {
    resolveNode(node as Node);
  } catch (error) {
    expect(error).toBeInstanceOf(GiulError);
    expect((error as GiulError).code).toBe("INVALID_NODE");
    expect((error as GiulError).message).toContain((error as GiulError).field ?? "<no field>");
    return (error as GiulError).field;
  }
  return undefined;
}

describe("Node validation", () => {
  it("fills in defaults", () => {
    expect(resolveNode({ name: "iris", idleW: 0 })).toEqual({
      name: "iris",
      gpuIndex: 0,
      idleW: 0,
      cards: [{ gpuIndex: 0, gpuUuid: null, idleW: 0 }],
      isLocal: true,
      powerEndpoint: null,
      timeoutMs: 500,
      servingMatch: null,
      contentionIgnore: [],
      contentionFloorMib: 0,
      contentionIntervalMs: 100,
    });
  });

  it("takes several cards, with one idle floor for all or one per card", () => {
    expect(resolveNode({ name: "tp", gpuIndex: [2, 3], idleW: 40 }).cards).toEqual([
      { gpuIndex: 2, gpuUuid: null, idleW: 40 },
      { gpuIndex: 3, gpuUuid: null, idleW: 40 },
    ]);
    const n = resolveNode({ name: "tp", gpuIndex: [2, 3], idleW: [40, 45] });
    expect([n.gpuIndex, n.idleW, n.cards[1]]).toEqual([2, 40, { gpuIndex: 3, gpuUuid: null, idleW: 45 }]);
  });

  it("takes cards by UUID instead, found when a window opens; a remote one named so to its agent", () => {
    const u = ["GPU-aaaa-1", "GPU-bbbb-2"];
    const n = resolveNode({ name: "tp", gpuUuid: u, idleW: [40, 45] });
    expect(n.cards).toEqual([
      { gpuIndex: -1, gpuUuid: u[0], idleW: 40 },
      { gpuIndex: -1, gpuUuid: u[1], idleW: 45 },
    ]);
    const remote = resolveNode({
      name: "r",
      gpuUuid: u[1] as string,
      idleW: 40,
      isLocal: false,
      powerEndpoint: "http://10.0.0.7:9402",
    });
    expect(new URL(remote.powerEndpoint as string).searchParams.get("gpu")).toBe(u[1] as string);
  });

  it("requires idleW, finite and ≥ 0, and never guesses it", () => {
    expect(fieldOf({ name: "iris" })).toBe("node.idleW");
    expect(fieldOf({ ...base, idleW: -1 })).toBe("node.idleW");
    expect(fieldOf({ ...base, idleW: Number.NaN })).toBe("node.idleW");
    expect(fieldOf({ ...base, idleW: Number.POSITIVE_INFINITY })).toBe("node.idleW");
    expect(fieldOf({ ...base, idleW: "38" })).toBe("node.idleW");
  });

  it("names each bad field", () => {
    expect(fieldOf(null)).toBe("node");
    expect(fieldOf({ ...base, name: "" })).toBe("node.name");
    expect(fieldOf({ ...base, gpuIndex: 1.5 })).toBe("node.gpuIndex");
    expect(fieldOf({ ...base, gpuIndex: -1 })).toBe("node.gpuIndex");
    expect(fieldOf({ ...base, isLocal: "yes" })).toBe("node.isLocal");
    expect(fieldOf({ ...base, powerEndpoint: "not a url" })).toBe("node.powerEndpoint");
    expect(fieldOf({ ...base, powerEndpoint: "ftp://x" })).toBe("node.powerEndpoint");
    expect(fieldOf({ ...base, servingMatch: 3 })).toBe("node.servingMatch");
    expect(fieldOf({ ...base, contentionIgnore: "Xorg" })).toBe("node.contentionIgnore");
    expect(fieldOf({ ...base, contentionIgnore: ["Xorg", ""] })).toBe("node.contentionIgnore[1]");
    expect(fieldOf({ ...base, contentionFloorMib: -5 })).toBe("node.contentionFloorMib");
    expect(fieldOf({ ...base, contentionIntervalMs: 0 })).toBe("node.contentionIntervalMs");
  });

  it("reports unknown keys, pointing Python names at their camelCase", () => {
    expect(fieldOf({ ...base, idle_w: 38 })).toBe("node.idle_w");
    expect(() => resolveNode({ ...base, idle_w: 38 } as Node)).toThrow(/did you mean "idleW"/);
    expect(fieldOf({ ...base, gpu: 1 })).toBe("node.gpu");
  });

  it("accepts a RegExp or a string for servingMatch", () => {
    expect(resolveNode({ ...base, servingMatch: /vllm/i }).servingMatch).toEqual(/vllm/i);
    expect(resolveNode({ ...base, servingMatch: "vllm" }).servingMatch).toBe("vllm");
  });

  it("refuses an idleW no card draws (1e308 W), naming the field", () => {
    const e = (() => {
      try {
        resolveNode({ ...base, idleW: 1e308 });
      } catch (error) {
        return error as GiulError;
      }
      throw new Error("did not throw");
    })();
    expect(e).toBeInstanceOf(GiulError);
    expect(e.code).toBe("INVALID_NODE");
    expect(e.field).toBe("node.idleW");
    expect(e.message).toMatch(/more than any card draws/);
  });

  it("refuses a global or sticky servingMatch, naming the field and the RegExp to give instead", () => {
    for (const [re, fixed] of [
      [/vllm/g, "/vllm/"],
      [/vllm/gy, "/vllm/"],
      [/vllm/y, "/vllm/"],
      [/vllm/gi, "/vllm/i"],
    ] as const) {
      expect(fieldOf({ ...base, servingMatch: re })).toBe("node.servingMatch");
      expect(() => resolveNode({ ...base, servingMatch: re })).toThrow(
        new RegExp(`keeps lastIndex.*\\(${fixed.replace(/\//g, "\\/")}\\)$`),
      );
    }
  });

  it("refuses null where the field has no null (isLocal: null is not true), and -0 for a card or a floor", () => {
    for (const key of [
      "isLocal",
      "timeoutMs",
      "contentionIgnore",
      "contentionFloorMib",
      "contentionIntervalMs",
    ])
      expect(fieldOf({ ...base, [key]: null })).toBe(`node.${key}`);
    expect(() => resolveNode({ ...base, isLocal: null } as unknown as Node)).toThrow(/got null/);
    expect(fieldOf({ ...base, idleW: -0 })).toBe("node.idleW");
    expect(() => resolveNode({ ...base, idleW: -0 })).toThrow(/got -0/);
    expect(fieldOf({ ...base, gpuIndex: -0 })).toBe("node.gpuIndex");
    expect(fieldOf({ ...base, gpuIndex: [1, -0] })).toBe("node.gpuIndex[1]");
    expect(fieldOf({ ...base, idleW: [30, -0], gpuIndex: [0, 1] })).toBe("node.idleW[1]");
    // What the fields take still passes: null where null is allowed, +0 as a card and a floor.
    const ok = resolveNode({ ...base, idleW: 0, gpuIndex: 0, servingMatch: null, powerEndpoint: null });
    expect([ok.idleW, ok.gpuIndex, ok.isLocal, ok.servingMatch]).toEqual([0, 0, true, null]);
  });
});
