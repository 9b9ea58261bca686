// What one answer cost: open a window on the card, mark the stages, close it, read the record.
// The work is simulated; replace retrieve() and generate() with yours.
//
//   node examples/quick-start.mjs
import { Meter } from "giul";

// idleW: this card's idle draw in watts, measured by you (npx giul-probe --idle).
const node = { name: "local", gpuIndex: 0, idleW: Number(process.env.IDLE_W ?? 60) };
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const retrieve = () => sleep(80);
const generate = () => sleep(250);

const m = await Meter.forNode(node, { joulesPer1kHint: 4100 }).open();
await retrieve();
m.mark("retrieve");
await generate();
m.mark("generate");
await m.close();
const e = m.result({ tokens: 412 });
console.log(`${e.method} ${e.joules?.toFixed(2) ?? "?"} J ± ${e.uncertaintyJoules?.toFixed(2) ?? "?"} via ${e.backend}`);
console.log(JSON.stringify(e)); // the fleet record, snake_case
