// What a client of giul-proxy sees: a plain answer carries its energy in headers, a streamed one
// in a comment line before the final `data: [DONE]` (SSE clients skip comments) and in trailers.
// Start the proxy in front of your server first, then point this at it:
//
//   giul-proxy --upstream http://127.0.0.1:8000 --gpu 0 --idle-w 60
//   node examples/proxy-client.mjs [http://127.0.0.1:9410] [model]
const base = process.argv[2] ?? "http://127.0.0.1:9410";
const model = process.argv[3] ?? "meta-llama/Llama-3.1-8B-Instruct";

const ask = (stream) =>
  fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model,
      messages: [{ role: "user", content: "Say hello." }],
      max_tokens: 32,
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    }),
  });

// 1. A plain answer: the energy is in its headers.
const plain = await ask(false);
const answer = await plain.json();
const h = (name) => plain.headers.get(name);
console.log(`answer: ${answer.choices[0].message.content}`);
console.log(
  `energy: ${h("x-energy-joules")} J ± ${h("x-energy-uncertainty-joules")} (${h("x-energy-method")} via ${h("x-energy-backend")})`,
);

// 2. A streamed answer: the events as any SSE client reads them; the comment carries the record.
const streamed = await ask(true);
let text = "";
let energy = null;
let pending = "";
for await (const piece of streamed.body.pipeThrough(new TextDecoderStream())) {
  pending += piece;
  for (let end = pending.indexOf("\n\n"); end >= 0; end = pending.indexOf("\n\n")) {
    const event = pending.slice(0, end);
    pending = pending.slice(end + 2);
    if (event.startsWith(": energy ")) energy = JSON.parse(event.slice(": energy ".length));
    else if (event.startsWith("data: {")) text += JSON.parse(event.slice(6)).choices[0]?.delta?.content ?? "";
  }
}
console.log(`streamed: ${text}`);
console.log(
  `energy: ${energy.joules} J ± ${energy.uncertainty_joules} (${energy.method} via ${energy.backend}); ` +
    `prefill ${energy.stages.prefill?.joules} J, decode ${energy.stages.decode?.joules} J; ` +
    `${energy.tokens} tokens, ${energy.joules_per_1k_tokens} J per 1,000`,
);
