import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStub } from "./fakes/openai-stub.mjs";
import { ADDON, built, FAKE_NVML, ROOT } from "./fakes/paths.js";
import { chat, raw } from "./fakes/raw-client.js";
import { Scenario, sliceUuid } from "./fakes/scenario.js";

// giul-proxy in front of a server on a MIG slice (`--gpu MIG-…`), end to end on the NVML double:
// the card draws a constant 300 W; a request alone in flight is charged the card above idle over
// its window (its share, weighted 3 of 7, is all of it when nothing else is open), and its record
// says which slice of which card it was.

const CLI = join(ROOT, "dist", "cli", "proxy.js");
const ready = built([CLI, FAKE_NVML, ADDON], "giul-proxy (dist/cli/proxy.js), the addon or the NVML double");
const CARD = "GPU-00000000-0000-0000-0000-000000000000";
const SLICE = sliceUuid(0, 2, 0);
const sc = new Scenario({
  devices: [
    {
      uuid: CARD,
      power: 300,
      mig: 1,
      utilSupported: false,
      slices: [{ gi: 2, ci: 0, slices: 3, profile: "3g.40gb" }],
    },
  ],
});
const dir = mkdtempSync(join(tmpdir(), "giul-mig-proxy-"));
let stub: Awaited<ReturnType<typeof startStub>>;

beforeAll(async () => {
  stub = await startStub();
});
afterAll(async () => {
  await stub.close();
  sc.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe.runIf(ready)("giul-proxy --gpu MIG-…", () => {
  it("charges each answer its slice's share of the card, and the record names the slice", async () => {
    const log = join(dir, "energy.ndjson");
    const proc = spawn(
      process.execPath,
      [CLI, "--upstream", stub.url, "--gpu", SLICE, "--idle-w", "60", "--listen", ":0", "--log", log],
      {
        env: { ...process.env, ...sc.env() },
      },
    );
    let err = "";
    const url = await new Promise<string | null>((resolve) => {
      proc.stderr.on("data", (c: Buffer) => {
        err += c.toString();
        const m = /listening on (http:\/\/\S+)/.exec(err);
        if (m) resolve(m[1] as string);
      });
      proc.on("exit", () => resolve(null));
    });
    expect(url, err).not.toBeNull();
    const res = await raw(url as string, "/v1/chat/completions", {
      body: chat({ max_tokens: 8, stub: { ttft_ms: 300 } }),
    });
    expect(res.headers["x-energy-method"]).toBe("sampled");
    const exited = new Promise<number | null>((resolve) => proc.on("exit", resolve));
    proc.kill("SIGTERM");
    expect(await exited).toBe(0);
    const record = JSON.parse(readFileSync(log, "utf8").trim().split("\n")[0] as string);
    expect(record.partition).toEqual({
      kind: "mig",
      profile: "3g.40gb",
      slice_uuid: SLICE,
      card_uuid: CARD,
      slices: 3,
      card_slices: 7,
    });
    expect(record.reason).toContain(`MIG slice ${SLICE} (3g.40gb) has no power sensor of its own`);
    const exact = (300 - 60) * record.seconds;
    expect(Math.abs(record.joules - exact)).toBeLessThanOrEqual(record.uncertainty_joules);
  });
});
