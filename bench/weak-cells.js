#!/usr/bin/env node
// What watching a window for abandonment costs (src/meter/abandoned.ts): a FinalizationRegistry
// register() at open and unregister() at close, as every window did, against the list that windows
// now join at open and leave at close (a swap-remove), with 10,000 windows open at once. The
// registry's cost here is its own calls only; its weak cells cost the collector besides.
// Usage: node bench/weak-cells.js [--windows N] [--rounds R]
import { cpus } from "node:os";

const arg = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const N = arg("--windows", 10_000);
const R = arg("--rounds", 200);
const meters = Array.from({ length: N }, (_, i) => ({ i }));

function registry() {
  const fr = new FinalizationRegistry(() => {});
  const held = meters.map(() => ({}));
  const t = process.hrtime.bigint();
  for (let r = 0; r < R; r++) {
    for (let i = 0; i < N; i++) fr.register(meters[i], held[i], held[i]);
    for (let i = 0; i < N; i++) fr.unregister(held[i]);
  }
  return Number(process.hrtime.bigint() - t) / (N * R);
}

function list() {
  const listed = [];
  const held = meters.map(() => ({ slot: -1 }));
  const heldAt = [];
  const t = process.hrtime.bigint();
  for (let r = 0; r < R; r++) {
    for (let i = 0; i < N; i++) {
      held[i].slot = listed.length;
      listed.push(meters[i]);
      heldAt.push(held[i]);
    }
    // Closed in the order they opened: each leaves its slot to the last entry.
    for (let i = 0; i < N; i++) {
      const slot = held[i].slot;
      const last = listed.length - 1;
      if (slot !== last) {
        listed[slot] = listed[last];
        heldAt[slot] = heldAt[last];
        heldAt[slot].slot = slot;
      }
      listed.pop();
      heldAt.pop();
    }
  }
  return Number(process.hrtime.bigint() - t) / (N * R);
}

// Warm both, then alternate.
registry();
list();
const a = [];
const b = [];
for (let k = 0; k < 3; k++) {
  a.push(registry());
  b.push(list());
}
const fmt = (xs) => xs.map((x) => x.toFixed(0)).join(", ");
console.log(`Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? "?"}, Node ${process.version}. ${N.toLocaleString("en")} windows open at once, ns per window (three runs):
- FinalizationRegistry register() + unregister(): ${fmt(a)}
- the list (push, swap-remove): ${fmt(b)}`);
