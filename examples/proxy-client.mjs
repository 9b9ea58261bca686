// What a client of giul-proxy writes to read each answer's energy, with the openai SDK: giul/client
// wraps the SDK's fetch and hands every answer's energy to a callback; a streamed answer that asks
// for usage also carries it in its last chunk's `usage.energy`. Start the proxy in front of your
// server first, then point this at it:
//
//   giul-proxy --upstream http://127.0.0.1:8000 --gpu 0 --idle-w 60
//   node examples/proxy-client.mjs [http://127.0.0.1:9410] [model]
import { energyFetch, energyOfUsage } from "giul/client";
import OpenAI from "openai";

const base = process.argv[2] ?? "http://127.0.0.1:9410";
const model = process.argv[3] ?? "meta-llama/Llama-3.1-8B-Instruct";
const fmt = (e) => `${e.joules} J ± ${e.uncertaintyJoules} (${e.method} via ${e.backend})`;
const client = new OpenAI({
  baseURL: `${base}/v1`,
  apiKey: process.env.OPENAI_API_KEY ?? "none",
  // Every answer's energy, JSON or streamed, as soon as it is known.
  fetch: energyFetch({ onEnergy: (e) => console.log(`energy of ${e.requestId}: ${fmt(e)}`) }),
});
const messages = [{ role: "user", content: "Say hello." }];

// 1. A plain answer (its energy in the x-energy-* headers, which the callback reads).
const answer = await client.chat.completions.create({ model, messages, max_tokens: 32 });
console.log(`answer: ${answer.choices[0].message.content}`);

// 2. A streamed answer: the last chunk's usage carries the whole record.
const stream = await client.chat.completions.create({
  model,
  messages,
  max_tokens: 32,
  stream: true,
  stream_options: { include_usage: true },
});
let text = "";
let energy = null;
for await (const chunk of stream) {
  text += chunk.choices[0]?.delta?.content ?? "";
  energy = energyOfUsage(chunk.usage) ?? energy;
}
console.log(`streamed: ${text}`);
console.log(
  `energy: ${energy.joules} J ± ${energy.uncertainty_joules} (${energy.method} via ${energy.backend}); ` +
    `prefill ${energy.stages.prefill?.joules} J, decode ${energy.stages.decode?.joules} J; ` +
    `${energy.tokens} tokens, ${energy.joules_per_1k_tokens} J per 1,000`,
);
