// An Express app in which every request is a metered window, its record logged when the response
// has gone out (or the client went away). The route handlers are simulated; keep yours.
//
//   node examples/express-middleware.mjs [requests=6]
import express from "express";
import { Meter } from "giul";

const node = { name: "local", gpuIndex: 0, idleW: Number(process.env.IDLE_W ?? 60) };

/** Middleware: opens a window before the handler, closes it when the response is finished. */
function energyPerRequest(node, options = {}) {
  return (req, res, next) => {
    const meter = Meter.forNode(node, options);
    meter.open().then(() => {
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        meter.close().then(() => {
          const energy = meter.result({ tokens: res.locals.tokens ?? null });
          console.log(JSON.stringify({ method: req.method, path: req.path, status: res.statusCode, energy }));
        });
      };
      res.once("finish", finish); // the response went out
      res.once("close", finish); // … or the client went away first
      next();
    }, next);
  };
}

const app = express();
app.use(energyPerRequest(node, { joulesPer1kHint: 4000 }));
app.get("/v1/complete", async (req, res) => {
  await new Promise((done) => setTimeout(done, 100 + Math.random() * 150)); // the model, simulated
  res.locals.tokens = 64;
  res.json({ text: "…", tokens: 64 });
});

const server = app.listen(0, "127.0.0.1", async () => {
  const { port } = server.address();
  const n = Number(process.argv[2] ?? 6);
  await Promise.all(Array.from({ length: n }, () => fetch(`http://127.0.0.1:${port}/v1/complete`).then((r) => r.json())));
  setTimeout(() => server.close(), 50); // let the last records be logged
});
