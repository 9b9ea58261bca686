import { defineConfig } from "vitest/config";
import base from "./vitest.config.js";

// `npm run test:fast`: the edit loop. The pure-TypeScript suites and the native unit suites (the
// addon's loader, sampler, event log and lifetimes, the binding, the test doubles themselves): no long-running
// children, no package packing, no multi-second accuracy runs. Chosen by measured duration; the
// rest (Meter end to end, smi sampler and lifetime, agent, remote, package, exit) runs in
// `npm test`, which runs everything, these included.
export const FAST_SUITES = [
  // Pure TypeScript.
  "test/agent.wire.test.ts",
  "test/contention.test.ts",
  "test/energy.test.ts",
  "test/energy-total.test.ts",
  "test/ledger.test.ts",
  "test/node.test.ts",
  "test/layout.test.ts",
  "test/ring-track.test.ts",
  "test/smi.clock.test.ts",
  "test/smi.parse.test.ts",
  "test/smi.probe.test.ts",
  // The README's examples (about a second; they need dist/ and the NVML double).
  "test/readme.test.ts",
  // Native units and the doubles they run against.
  "test/binding.test.ts",
  "test/fakes.nvml.test.ts",
  "test/fakes.smi.test.ts",
  "test/native.card-log.test.ts",
  "test/card-log.fuzz.test.ts",
  "test/native.lifetime.test.ts",
  "test/native.loader.test.ts",
  "test/native.sampler.test.ts",
  "test/select.test.ts",
  // A suite skipped for a missing build must not pass silently here either.
  "test/ci-artifacts.test.ts",
];

export default defineConfig({ ...base, test: { ...base.test, include: FAST_SUITES } });
