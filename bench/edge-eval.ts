/**
 * What evaluating one window edge on the fused counter (src/edges/fusion.ts `at`) costs, warm:
 * the bound on the card's cumulative energy at an instant from the anchors around it and the power
 * readings. A window has four edges on the ledger (open, two marks, close); at 1,000 concurrent
 * windows they are a few of its µs (see bench/RESULTS.md). A process of its own: run after
 * bench/digest.ts's long synthetic card in one process, the same code measured several times slower.
 *
 * A synthetic card (test/fakes/synthetic.ts: a square wave 100↔400 W, 37 ms half-period, read every
 * 5 ms with the sampling thread's dither) with a counter step of 10 ms and of 100 ms; edges at
 * random instants among the newest 200 samples, each with its sample before. Median over rounds.
 *
 *   node bench/edge-eval.js
 */
import { CounterFusion, type FusedTarget } from "../src/edges/fusion.js";
import { emptySample } from "../src/track/ring.js";
import { squareWave } from "../test/fakes/accuracy.js";
import { SyntheticCard } from "../test/fakes/synthetic.js";

const ROUNDS = 25;
const EDGES = 4000;
const lines = ["| counter step | µs per edge (median of rounds) | min | max |", "|---:|---:|---:|---:|"];
let sink = 0;
for (const stepMs of [10, 100]) {
  const card = new SyntheticCard(
    { power: squareWave(100, 400, 37, 20_000), counterStepMs: stepMs },
    { periodMs: 5, dither: "golden" },
  );
  const fusion = new CounterFusion(card.ring, "instant");
  for (let i = 0; i < 3000; i++) card.advanceOne();
  fusion.update();
  const ring = card.ring;
  const head = ring.head();
  const s = emptySample();
  const ts: number[] = [];
  for (let k = head - 201; k < head; k++) {
    ring.read(k, s);
    ts.push(s.t);
  }
  // Edges: an instant between samples k and k + 1, with k (a fixed pseudo-random draw).
  let seed = 12345;
  const rand = (): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  const edgeT = new Float64Array(EDGES);
  const edgeK = new Float64Array(EDGES);
  for (let i = 0; i < EDGES; i++) {
    const j = Math.floor(rand() * 199);
    edgeT[i] = (ts[j] as number) + rand() * ((ts[j + 1] as number) - (ts[j] as number));
    edgeK[i] = head - 201 + j;
  }
  const out: FusedTarget = { value: 0, errMj: 0, basis: 0 };
  const us: number[] = [];
  for (let r = 0; r < ROUNDS + 5; r++) {
    const t0 = performance.now();
    for (let i = 0; i < EDGES; i++) {
      fusion.at(edgeT[i] as number, edgeK[i] as number, out);
      sink += out.errMj;
    }
    if (r >= 5) us.push(((performance.now() - t0) * 1000) / EDGES);
  }
  us.sort((a, b) => a - b);
  const f = (x: number): string => x.toFixed(2);
  lines.push(
    `| ${stepMs} ms | ${f(us[us.length >> 1] as number)} | ${f(us[0] as number)} | ${f(us[us.length - 1] as number)} |`,
  );
}
console.log(lines.join("\n"));
if (Number.isNaN(sink)) console.log("(some edges had no bound)");
