// A node:http server whose answers each carry what they cost, with many requests in flight at
// once: every request is a window on the card, and the card's energy above idle is split among
// the windows open at each instant (shared attribution, the default), so the records add up to
// the card. The upstream is simulated; replace generate() with your model call.
//
//   node examples/concurrent-http.mjs [requests=8]
import http from "node:http";
import { Meter } from "giul";

const node = { name: "local", gpuIndex: 0, idleW: Number(process.env.IDLE_W ?? 60) };

/** A stand-in for the inference upstream: answers after 100–300 ms, as a model would. */
function generate(prompt) {
  const ms = 100 + Math.random() * 200;
  return new Promise((done) => setTimeout(() => done({ text: `echo ${prompt}`, tokens: Math.round(ms / 4) }), ms));
}

const server = http.createServer(async (req, res) => {
  const { value, energy } = await Meter.forNode(node, { joulesPer1kHint: 4000 }).measure(
    async (m) => {
      const out = await generate(req.url);
      m.mark("generate");
      return out;
    },
    { tokens: (out) => out.tokens },
  );
  console.log(JSON.stringify(energy)); // the fleet record, snake_case
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ ...value, joules: energy.joules, method: energy.method }));
});

server.listen(0, "127.0.0.1", async () => {
  const { port } = server.address();
  const n = Number(process.argv[2] ?? 8);
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      fetch(`http://127.0.0.1:${port}/prompt-${i}`).then((r) => r.json()),
    ),
  );
  console.error(`${answers.length} answers, ${answers.filter((a) => a.method === "sampled").length} measured`);
  server.close();
});
