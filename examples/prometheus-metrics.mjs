// A node:http server with a Prometheus /metrics handler (prom-client) that carries giul's figures
// beside its own: each request's energy (giul_request_energy_joules, a histogram by card,
// energy_method, backend and node) and the card's power and energy (hw_power_watts, hw_energy_joules_total).
// The upstream is simulated; replace generate() with your model call.
//
//   npm i giul prom-client
//   node examples/prometheus-metrics.mjs [requests=8]
import http from "node:http";
import { Meter } from "giul";
import { collectGiulMetrics } from "giul/prometheus";
import { Registry } from "prom-client";

const registry = new Registry();
collectGiulMetrics(registry);

const node = { name: "local", gpuIndex: 0, idleW: Number(process.env.IDLE_W ?? 60) };

/** A stand-in for the inference upstream: answers after 100–300 ms, as a model would. */
function generate(prompt) {
  const ms = 100 + Math.random() * 200;
  return new Promise((done) => setTimeout(() => done({ text: `echo ${prompt}`, tokens: Math.round(ms / 4) }), ms));
}

const server = http.createServer(async (req, res) => {
  if (req.url === "/metrics") {
    res.setHeader("content-type", registry.contentType);
    res.end(await registry.metrics());
    return;
  }
  const { value } = await Meter.forNode(node, { joulesPer1kHint: 4000 }).measure(
    async (m) => {
      const out = await generate(req.url);
      m.mark("generate");
      return out;
    },
    { tokens: (out) => out.tokens },
  );
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify(value));
});

server.listen(0, "127.0.0.1", async () => {
  const { port } = server.address();
  const n = Number(process.argv[2] ?? 8);
  await Promise.all(
    Array.from({ length: n }, (_, i) => fetch(`http://127.0.0.1:${port}/prompt-${i}`).then((r) => r.json())),
  );
  // What Prometheus would scrape:
  process.stdout.write(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
  server.close();
});
