// Measure a card's idle draw before you meter it: the figure to put in its Node's idleW. giul never
// applies it by itself (a wrong idle floor rewrites every figure the node reports).
//
//   node examples/measure-idle.mjs [gpu=0] [seconds=30]
import { measureIdle } from "giul";

const gpuIndex = Number(process.argv[2] ?? 0);
const seconds = Number(process.argv[3] ?? 30);
const idle = await measureIdle({ gpuIndex, seconds });
if (!idle.ok) {
  console.error(`not measured: ${idle.reason}`);
  process.exit(2);
}
console.log(`GPU ${gpuIndex}: median ${idle.medianW.toFixed(1)} W (p5 ${idle.p5W.toFixed(1)}, p95 ${idle.p95W.toFixed(1)})`);
console.log(`const node = { name: "my-node", gpuIndex: ${gpuIndex}, idleW: ${idle.medianW.toFixed(1)} };`);
