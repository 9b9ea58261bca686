/**
 * The layout check (scripts/layout.mjs, run by `npm run lint`): it finds an import circle and an
 * import against the layout's direction in graphs made to have them, and none in src/ today.
 */
import { describe, expect, it } from "vitest";

type Graph = Map<string, string[]>;
const layout = (await import("../scripts/layout.mjs" as string)) as {
  importGraph(): Graph;
  circles(graph: Graph): string[][];
  wrongWay(graph: Graph): string[];
  partOf(file: string): string;
};

const graph = (edges: Record<string, string[]>): Graph => new Map(Object.entries(edges));

describe("scripts/layout.mjs", () => {
  it("finds each circle, of two files or more, and a file that imports itself", () => {
    const g = graph({
      "rules/a.ts": ["rules/b.ts"],
      "rules/b.ts": ["vocabulary/c.ts", "rules/a.ts"],
      "vocabulary/c.ts": [],
      "edges/x.ts": ["edges/y.ts"],
      "edges/y.ts": ["edges/z.ts"],
      "edges/z.ts": ["edges/x.ts"],
      "meter/self.ts": ["meter/self.ts"],
    });
    expect(layout.circles(g).sort()).toEqual([
      ["edges/x.ts", "edges/y.ts", "edges/z.ts"],
      ["meter/self.ts"],
      ["rules/a.ts", "rules/b.ts"],
    ]);
    expect(layout.circles(graph({ "rules/a.ts": ["vocabulary/c.ts"], "vocabulary/c.ts": [] }))).toEqual([]);
  });

  it("finds an import up the layout, between two sources, and a part the layout does not name", () => {
    const g = graph({
      "vocabulary/errors.ts": ["rules/energy.ts"],
      "sources/smi/a.ts": ["sources/native/b.ts", "ring/c.ts"],
      "meter/m.ts": ["ledger/l.ts", "rules/energy.ts"],
      "gadgets/g.ts": ["vocabulary/errors.ts"],
    });
    const wrong = layout.wrongWay(g);
    expect(wrong).toHaveLength(3);
    expect(wrong[0]).toMatch(/^vocabulary\/errors\.ts → rules\/energy\.ts: vocabulary may not import rules/);
    expect(wrong[1]).toMatch(
      /^sources\/smi\/a\.ts → sources\/native\/b\.ts: a source of samples imports another/,
    );
    expect(wrong[2]).toMatch(/src\/gadgets is not in the layout/);
    expect(layout.partOf("sources/native/nvml.ts")).toBe("sources/native");
    expect(layout.partOf("index.ts")).toBe("index.ts");
  });

  it("src/ has no circle and no import against the layout", () => {
    const g = layout.importGraph();
    expect(g.size).toBeGreaterThan(100);
    // The graph is read from the text: a file known to import another is seen to.
    expect(g.get("rules/energy.ts")).toContain("vocabulary/measurement.ts");
    expect(layout.circles(g)).toEqual([]);
    expect(layout.wrongWay(g)).toEqual([]);
  });
});
