/**
 * What the fused counter (src/edges/fusion.ts) costs per sample it digests: reading the sample,
 * checking each closed counter step against the power readings, fitting the counter's cadence. On
 * the main thread this is paid once per sample the sampler writes (about 100 a second at the
 * default period, more with reads asked at edges), whatever the number of windows.
 *
 * A synthetic card (test/fakes/synthetic.ts: a square wave 100↔400 W, 37 ms half-period, read
 * every 10 ms with the sampling thread's dither) with a counter step of 10 ms and of 100 ms; warm:
 * the median over rounds of 4,000 samples digested at once.
 *
 *   node bench/digest.js
 */
import { CounterFusion } from "../src/edges/fusion.js";
import { squareWave } from "../test/fakes/accuracy.js";
import { SyntheticCard } from "../test/fakes/synthetic.js";

const ROUNDS = 15;
const PER_ROUND = 4000;
const lines = [
  "| counter step | µs per sample digested (median of rounds) | min | max |",
  "|---:|---:|---:|---:|",
];
for (const stepMs of [10, 100]) {
  const card = new SyntheticCard(
    // 1,000 s covers the 72,000 reads; a far longer wave (it was 400,000 s) made a heap of gigabytes
    // whose collections swamped the figures.
    { power: squareWave(100, 400, 37, 1_000), counterStepMs: stepMs },
    { periodMs: 10, dither: "golden" },
  );
  const fusion = new CounterFusion(card.ring, "instant");
  const us: number[] = [];
  for (let r = 0; r < ROUNDS + 3; r++) {
    for (let i = 0; i < PER_ROUND; i++) card.advanceOne();
    const t = performance.now();
    fusion.update();
    if (r >= 3) us.push(((performance.now() - t) * 1000) / PER_ROUND);
  }
  us.sort((a, b) => a - b);
  const f = (x: number): string => x.toFixed(2);
  lines.push(
    `| ${stepMs} ms | ${f(us[us.length >> 1] as number)} | ${f(us[0] as number)} | ${f(us[us.length - 1] as number)} |`,
  );
}
console.log(lines.join("\n"));
