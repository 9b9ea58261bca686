import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { built, DIST, ROOT } from "./fakes/paths.js";

// giul's published types check in a TypeScript project that has neither @types/node nor the
// esnext.disposable library (a browser-less, Node-less types setup), and `await using` works
// where that library is present.

const dir = mkdtempSync(join(tmpdir(), "giul-types-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function check(lib: string[], source: string): { status: number | null; out: string } {
  const project = mkdtempSync(join(dir, "p-"));
  mkdirSync(join(project, "node_modules"));
  symlinkSync(ROOT, join(project, "node_modules", "giul"));
  writeFileSync(join(project, "index.ts"), source);
  writeFileSync(
    join(project, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        types: [],
        lib,
        noEmit: true,
      },
      files: ["index.ts"],
    }),
  );
  const r = spawnSync(
    process.execPath,
    [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", project],
    {
      encoding: "utf8",
    },
  );
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe.runIf(built([DIST], "dist/"))("published types", () => {
  it("check without @types/node and without the esnext.disposable library", () => {
    const r = check(
      ["ES2022"],
      `import { Meter, measureIdle, type Energy, type Node } from "giul";
const node: Node = { name: "x", idleW: 40 };
export async function f(): Promise<Energy> {
  const m = await Meter.forNode(node, { attribution: "shared", weight: 2 }).open();
  m.mark("generate");
  await m.close();
  await measureIdle({ seconds: 1 });
  return m.result({ tokens: 3 });
}
`,
    );
    expect(r.out).toBe("");
    expect(r.status).toBe(0);
  });

  it("support await using where the library is present", () => {
    const r = check(
      ["ES2022", "esnext.disposable"],
      `import { Meter } from "giul";
export async function g() {
  await using m = await Meter.forNode({ name: "x", idleW: 40 }).open();
  m.mark("a");
}
`,
    );
    expect(r.out).toBe("");
    expect(r.status).toBe(0);
  });
});
