/**
 * Every TypeScript example in README.md runs as a user would paste it into an ES module, on the Node
 * running the suite (the release workflow runs the suite on Node 20, 22, 24 and 26): its types
 * stripped (TypeScript's transpileModule with target esnext, which leaves every other piece of syntax
 * as written, `await using` included), importing the built package by its own name (dist/), against
 * the NVML double, with stand-ins for what is the user's own (retrieve, generate, work, log, llm,
 * prompt, refuse, and a `node` where an example uses one it does not declare). An example continues
 * the ones before it, as a reader reads them: what giul exports and an example uses without importing
 * is imported for it.
 *
 * An example marked `<!-- readme-test: node>=N -->` runs from Node N on; below N it must be the
 * SyntaxError the README says it is.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { built, DIST, FAKE_NVML, ROOT } from "./fakes/paths.js";
import { writeScenario } from "./fakes/scenario.js";

interface Example {
  readonly title: string;
  readonly code: string;
  readonly minNode: number;
}

/** The files under examples/: the README shows them verbatim, and test/examples.test.ts runs them. */
const EXAMPLE_FILES = new Set(
  readdirSync(join(ROOT, "examples"))
    .filter((f) => f.endsWith(".mjs"))
    .map((f) => readFileSync(join(ROOT, "examples", f), "utf8")),
);

/** Every page whose examples run: the README, then docs/ in name order. */
const PAGES = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
];

function examples(): Example[] {
  return PAGES.flatMap((page) => examplesOf(page));
}

function examplesOf(page: string): Example[] {
  const readme = readFileSync(join(ROOT, page), "utf8");
  const found: Example[] = [];
  const pattern = /(?:<!-- readme-test: node>=(\d+) -->\n)?```(ts|js)\n([\s\S]*?)```/g;
  for (const match of readme.matchAll(pattern)) {
    // A copy of a file under examples/ is run as that file, by test/examples.test.ts.
    if (EXAMPLE_FILES.has(match[3] ?? "")) continue;
    const before = readme.slice(0, match.index);
    // The nearest heading outside a code block (a shell comment starts with # too).
    const prose = before.replace(/```[\s\S]*?```/g, "");
    const heading = [...prose.matchAll(/^#+ (.+)$/gm)].at(-1)?.[1] ?? page;
    const line = before.split("\n").length + (match[1] === undefined ? 1 : 2);
    found.push({
      title: `${heading} (${page}:${line})`,
      code: match[3] ?? "",
      minNode: Number(match[1] ?? 0),
    });
  }
  return found;
}

/** Stand-ins for what the examples leave to the user, as globals a declaration of theirs shadows. */
const PRELUDE = `
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
Object.assign(globalThis, {
  node: { name: "readme", gpuIndex: 0, idleW: 30 },
  retrieve: () => sleep(20),
  generate: () => sleep(20),
  work: () => sleep(20),
  log: { info: (o) => JSON.stringify(o) },
  llm: { complete: async () => { await sleep(20); return { usage: { completion_tokens: 12 } }; } },
  prompt: "What did this answer cost?",
  refuse: () => {},
});
`;

/** `import { … } from "giul"` for what `code` uses of giul's exports without importing it. */
function continuation(code: string, exported: readonly string[]): string {
  const imported = new Set(
    [...code.matchAll(/import\s*\{([^}]*)\}\s*from\s*"giul"/g)].flatMap((m) =>
      (m[1] ?? "").split(",").map((name) => name.replace(/^\s*type\s+/, "").trim()),
    ),
  );
  const used = exported.filter((name) => !imported.has(name) && new RegExp(`\\b${name}\\b`).test(code));
  return used.length === 0 ? "" : `import { ${used.join(", ")} } from "giul";\n`;
}

const NODE_MAJOR = Number(process.versions.node.split(".")[0]);
const DIR = join(ROOT, "build", "readme-examples");
const all = examples();

afterAll(() => rmSync(DIR, { recursive: true, force: true }));

describe.runIf(built([DIST, FAKE_NVML], "dist/ and the NVML double"))(
  "README.md and docs/ examples",
  async () => {
    const exported = Object.keys(await import(DIST));

    it("there are examples to run", () => {
      expect(all.length).toBeGreaterThanOrEqual(6);
    });

    it.each(all.map((e, i) => [e.title, i] as const))("%s", (_title, index) => {
      const example = all[index] as Example;
      const js = ts.transpileModule(example.code, {
        compilerOptions: { target: ts.ScriptTarget.ESNext, module: ts.ModuleKind.ESNext },
      }).outputText;
      // Inside the package, so that `import … from "giul"` resolves to it by name (self-reference).
      mkdirSync(DIR, { recursive: true });
      const file = join(DIR, `example-${index}.mjs`);
      writeFileSync(file, `${continuation(example.code, exported)}${PRELUDE}\n${js}`);
      const sc = writeScenario({ devices: [{ name: "README", power: [[0, 200]] }] });
      try {
        const ran = spawnSync(process.execPath, [file], {
          cwd: DIR,
          env: { ...process.env, ...sc.env() },
          encoding: "utf8",
          timeout: 20_000,
        });
        if (NODE_MAJOR >= example.minNode) {
          expect(ran.stderr).toBe("");
          expect(ran.status).toBe(0);
        } else {
          expect(ran.status).not.toBe(0);
          expect(ran.stderr).toContain("SyntaxError");
        }
      } finally {
        sc.remove();
      }
    });
  },
);
