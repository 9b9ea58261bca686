/**
 * The suites that need built artifacts skip themselves where those are missing (a developer
 * without cmake can still run the rest). This file makes sure such a skip never passes silently
 * where the artifacts should exist: in CI (`CI` set, which builds everything), and in any run whose
 * global setup was meant to build them (GIUL_TEST_NO_BUILD unset). Files that test for the
 * artifacts on their own (rather than through test/fakes/paths.ts) are covered here too.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  ADDON,
  DIST,
  FAKE_NVML,
  FAKE_NVML_LEGACY,
  FAKE_NVML_READER,
  FAKE_SMI,
  IN_CI,
  ROOT,
} from "./fakes/paths.js";

const expected = IN_CI || process.env.GIUL_TEST_NO_BUILD !== "1";
if (!expected) console.warn("GIUL_TEST_NO_BUILD=1 outside CI: not checking that the artifacts exist");

describe.runIf(expected)("every artifact the suites need is built", () => {
  it.each([
    ["the addon", ADDON],
    ["the NVML double", FAKE_NVML],
    ["the legacy NVML double", FAKE_NVML_LEGACY],
    ["the nvidia-smi stand-in", FAKE_SMI],
    ["the NVML double's reader", FAKE_NVML_READER],
    ["the ESM bundle", DIST],
    ["the CommonJS bundle", join(ROOT, "dist", "index.cjs")],
    ["giul-probe", join(ROOT, "dist", "cli", "probe.js")],
    ["giul-agent", join(ROOT, "dist", "cli", "agent.js")],
  ])("%s (%s)", (_what, path) => {
    expect(existsSync(path), `${path} is missing: the suites that need it were skipped`).toBe(true);
  });
});
