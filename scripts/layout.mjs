#!/usr/bin/env node
// The layout check (docs/architecture.md): reads every import between src/'s TypeScript files
// from their text and reports (1) import circles and (2) imports against the layout's one
// direction: a file imports its own part and the parts listed before it in LAYERS, and no source
// of samples (src/sources/<name>/) imports another. Exits 1 on either; `npm run lint` runs it.
// Usage: node scripts/layout.mjs [--graph]   (--graph also prints which part imports which).
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The parts of src/, most basic first: a part may import only its own files and those above it. */
export const LAYERS = [
  ["vocabulary"],
  ["rules"],
  ["track"],
  ["edges"],
  ["ring"],
  ["sources"],
  ["select"],
  ["ledger"],
  ["diagnostics.ts"],
  ["contention.ts"],
  ["meter"],
  ["probe.ts", "idle.ts"],
  ["testing.ts"],
  ["exporters"],
  ["agent"],
  ["proxy"],
  ["report"],
  ["client"],
  ["cli"],
  ["index.ts"],
];

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const SRC = join(ROOT, "src");

function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

// import … from "./x.js", export … from "../y.js", import("./z.js"); type-only imports count too.
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.{1,2}\/[^"']+)["']/g;

/** Each file (relative to src/, with / separators) → the files of src/ it imports. */
export function importGraph() {
  const graph = new Map();
  for (const file of sources(SRC)) {
    const text = readFileSync(file, "utf8").replace(/^\s*\/\/.*$/gm, "");
    const targets = new Set();
    for (const m of text.matchAll(IMPORT)) {
      const target = resolve(dirname(file), m[1]).replace(/\.js$/, ".ts");
      if (target.startsWith(SRC)) targets.add(relative(SRC, target).split("\\").join("/"));
    }
    graph.set(relative(SRC, file).split("\\").join("/"), [...targets]);
  }
  return graph;
}

/** The part a file belongs to: its first folder (sources: sources/<name>), or the file itself. */
export function partOf(file) {
  const [head, second] = file.split("/");
  return head === "sources" && second !== undefined && file.split("/").length > 2
    ? `sources/${second}`
    : head;
}

function rank(part) {
  const top = part.split("/")[0];
  const i = LAYERS.findIndex((layer) => layer.includes(top));
  return i;
}

/** Every import that breaks the one direction, as "a → b: why". */
export function wrongWay(graph) {
  const problems = [];
  for (const [file, targets] of graph) {
    const from = partOf(file);
    for (const target of targets) {
      const to = partOf(target);
      if (from === to) continue;
      const [a, b] = [rank(from), rank(to)];
      if (a < 0) problems.push(`${file}: src/${from} is not in the layout (scripts/layout.mjs LAYERS)`);
      else if (b < 0) problems.push(`${file} → ${target}: src/${to} is not in the layout`);
      else if (from.startsWith("sources/") && to.startsWith("sources/"))
        problems.push(`${file} → ${target}: a source of samples imports another`);
      else if (b > a || (b === a && LAYERS[a].length > 1))
        problems.push(`${file} → ${target}: ${from} may not import ${to}, which comes after it`);
    }
  }
  return problems;
}

/** The import circles: each strongly connected set of files of more than one (or a file importing itself). */
export function circles(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const found = [];
  let next = 0;
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) === index.get(v)) {
      const set = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        set.push(w);
      } while (w !== v);
      if (set.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(set.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const graph = importGraph();
  const loops = circles(graph);
  const wrong = wrongWay(graph);
  for (const loop of loops) console.log(`import circle: ${loop.join(" <-> ")}`);
  for (const line of wrong) console.log(`against the layout: ${line}`);
  if (process.argv.includes("--graph")) {
    const parts = new Map();
    for (const [file, targets] of graph)
      for (const t of targets) {
        const [a, b] = [partOf(file), partOf(t)];
        if (a !== b) parts.set(a, new Set([...(parts.get(a) ?? []), b]));
      }
    for (const [a, bs] of [...parts].sort()) console.log(`${a} → ${[...bs].sort().join(", ")}`);
  }
  if (loops.length === 0 && wrong.length === 0)
    console.log(
      `layout: ${graph.size} source files, no import circle, every import in the layout's direction`,
    );
  process.exit(loops.length + wrong.length > 0 ? 1 : 0);
}
