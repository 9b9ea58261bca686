#!/usr/bin/env node
// What starting a card's sampler costs the thread that starts it (the first window on a card, and
// the first after each idle linger): openSampler() on the libnvidia-ml test double, the thread
// stopped and joined between starts. No NVML call is made there; what it does is allocate the
// ring and the event log and start the thread.
// Usage: node bench/sampler-open.js [--starts N]
import { rmSync } from "node:fs";
import { cpus } from "node:os";
import { fileURLToPath } from "node:url";
import { benchScenario, median, nativeAddon, numberArg } from "./lib.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const starts = numberArg("--starts", 20);
const dir = benchScenario(root, "open");
const addon = await nativeAddon(root);
const ms = [];
for (let i = 0; i < starts; i++) {
  const t = process.hrtime.bigint();
  const sampler = addon.openSampler(0, 5);
  ms.push(Number(process.hrtime.bigint() - t) / 1e6);
  if (sampler.ok === false) throw new Error(`openSampler: ${sampler.reason}`);
  sampler.release();
  while (addon.samplerThreads() > 0) await new Promise((r) => setTimeout(r, 5));
}
rmSync(dir, { recursive: true, force: true });
console.log(
  `${cpus().length} × ${cpus()[0]?.model.trim() ?? "?"}, Node ${process.version}: openSampler() on the calling thread, ${starts} starts: ` +
    `median ${median(ms).toFixed(2)} ms, max ${Math.max(...ms).toFixed(2)} ms`,
);
