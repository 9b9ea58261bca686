// A server in node:cluster as a test (and bench/processes.js) runs it: the primary forks
// `plan.workers` workers; each meters `plan.windows` overlapping windows of random lengths and
// weights (one weight change each) on GPU 0 and posts what each was charged, with its edges. With
// `plan.kill`, that worker instead holds one window open until the primary SIGKILLs it; with
// `plan.fixedMs`, every window has weight 1 and lasts that long; `plan.minPartMs` (20 unless
// given) is the least length of each part of a window, before and after its weight change. The
// primary prints one JSON line: every window, and the instant of the kill.
//   TEST_PLAN='{"workers":4,"windows":50,"seed":1,"idleW":50,"spreadMs":1500,"backend":"nvml"}'
//   TEST_DIST=/abs/dist/index.js  node test/fakes/cluster-windows.mjs
import cluster from "node:cluster";
import { pathToFileURL } from "node:url";

const plan = JSON.parse(process.env.TEST_PLAN ?? "{}");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function meter(dist) {
  const giul = await import(pathToFileURL(dist).href);
  if (plan.backend === "simulated") {
    const testing = await import(pathToFileURL(dist.replace(/index\.js$/, "testing.js")).href);
    testing.simulateCard({ gpuIndex: 0, watts: plan.simulatedW ?? 300 });
  }
  return giul.Meter;
}

async function worker() {
  const id = Number(process.env.TEST_WORKER);
  const Meter = await meter(process.env.TEST_DIST);
  const node = { name: "gpu0", idleW: plan.idleW };
  // The card probed and sampling before the windows start (as a server's first requests would),
  // long enough for an integrating backend to have seen its sensor follow the card.
  for (let i = 0; i < 20; i++) {
    const warm = await Meter.forNode(node).open();
    await sleep(50);
    await warm.close();
    if (!/not known yet/.test(warm.result().reason ?? "")) break;
  }
  process.send({ ready: id });
  await new Promise((r) => process.once("message", r));
  if (plan.kill?.worker === id) {
    globalThis.held = await Meter.forNode(node, { weight: plan.kill.weight ?? 5 }).open();
    process.send({ opened: id });
    setInterval(() => {}, 60_000);
    return;
  }
  let x = (plan.seed ?? 1) * 7919 + id * 104729;
  const rand = () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x / 2147483648;
  };
  const spread = plan.spreadMs ?? 1500;
  // Each window's two parts last at least this long (ms).
  const least = plan.minPartMs ?? 20;
  const posted = await Promise.all(
    Array.from({ length: plan.windows }, async () => {
      await sleep(rand() * spread);
      const m = await Meter.forNode(node, { weight: plan.fixedMs ? 1 : 0.5 + rand() * 4 }).open();
      if (plan.fixedMs) await sleep(plan.fixedMs);
      else {
        await sleep(least + rand() * 300);
        m.setWeight(0.5 + rand() * 4);
        await sleep(least + rand() * 300);
      }
      await m.close();
      const t = m.edgeTimes();
      const e = m.result();
      return {
        worker: id,
        open: String(t.open),
        close: String(t.close),
        weights: t.weights.map((w) => [String(w.tNs), w.weight]),
        joules: e.joules,
        cardJoules: e.cardJoules,
        attribution: e.attribution,
        method: e.method,
        backend: e.backend,
        reason: e.reason,
        idleW: e.idleW,
        uncertainty: e.uncertaintyJoules,
        concurrencyMax: e.concurrency?.max ?? null,
      };
    }),
  );
  process.send({ done: id, posted });
}

async function primary() {
  const n = plan.workers;
  const workers = [];
  for (let i = 0; i < n; i++) {
    workers.push(cluster.fork({ TEST_WORKER: String(i) }));
  }
  const ready = new Set();
  const results = [];
  let killNs = null;
  await new Promise((resolve, reject) => {
    for (const w of workers) {
      w.on("exit", (code, signal) => {
        if (signal !== "SIGKILL" && code !== 0) reject(new Error(`a worker exited ${code} ${signal}`));
      });
      w.on("message", async (m) => {
        if (m.ready !== undefined) {
          ready.add(m.ready);
          if (ready.size === n) for (const v of workers) v.send("go");
        } else if (m.opened !== undefined) {
          await sleep(plan.kill.afterMs ?? 300);
          killNs = String(process.hrtime.bigint());
          w.process.kill("SIGKILL");
        } else if (m.done !== undefined) {
          results.push(...m.posted);
          if (results.length === (n - (plan.kill ? 1 : 0)) * plan.windows) resolve();
        }
      });
    }
  });
  for (const w of workers) if (!w.isDead()) w.kill();
  process.stdout.write(`${JSON.stringify({ windows: results, killNs })}\n`);
}

if (cluster.isPrimary) await primary();
else await worker();
