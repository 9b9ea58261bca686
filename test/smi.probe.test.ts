/**
 * What the host probe (giul-probe) says about the smi path: found or not, and per card whether the
 * smi_sampler would read instantaneous power or only the averaged power.draw. The addon is left out
 * (as on a host without a prebuild) so that only nvidia-smi is asked.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { localCapabilities } from "../src/select/capabilities.js";
import { probeHostWith } from "../src/select/host.js";
import type { BindingLoad } from "../src/sources/native/binding.js";
import { querySmiOnce } from "../src/sources/smi/parse.js";
import { built, FAKE_NVML, FAKE_SMI } from "./fakes/paths.js";
import { writeScenario } from "./fakes/scenario.js";

const ready = built([FAKE_SMI, FAKE_NVML], "the nvidia-smi stand-in or the NVML double");

const noAddon = (): BindingLoad => ({ ok: false, reason: "left out by the test", tried: [] });
const dir = mkdtempSync(join(tmpdir(), "giul-smi-probe-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the host probe without nvidia-smi", () => {
  it("says it is not found and does not run anything", async () => {
    const report = await probeHostWith({ load: noAddon, env: { PATH: dir } });
    expect(report.smi).toEqual({ path: null, reason: "nvidia-smi is not on PATH" });
    expect(report.smiPower).toBeNull();
  });
});

describe.runIf(ready)("the host probe with the nvidia-smi stand-in", () => {
  it("tells instantaneous from averaged power per card", async () => {
    const sc = writeScenario({
      devices: [
        { power: 210 },
        { power: 64, instantField: false },
        { power: 80, powerSupported: false, instantField: false },
      ],
    });
    try {
      const report = await probeHostWith({ load: noAddon, env: { ...process.env, ...sc.env() } });
      expect(report.smi.path).toBe(FAKE_SMI);
      expect(report.smiPower).toEqual({
        ok: true,
        reason: null,
        instantField: true,
        devices: [
          { index: 0, power: "instant", watts: 210, reason: null },
          { index: 1, power: "averaged", watts: 64, reason: null },
          { index: 2, power: null, watts: null, reason: "nvidia-smi printed [N/A]" },
        ],
      });
    } finally {
      sc.remove();
    }
  });

  it("says when the driver does not know power.draw.instant", async () => {
    const sc = writeScenario({ devices: [{ power: 150 }] });
    const old = join(dir, "old", "nvidia-smi");
    mkdirSync(join(dir, "old"), { recursive: true });
    writeFileSync(
      old,
      `#!/bin/sh\ncase "$*" in *power.draw.instant*) printf 'Field "power.draw.instant" is not a valid field to query.\\n\\n'; exit 2;; esac\nexec "${FAKE_SMI}" "$@"\n`,
    );
    chmodSync(old, 0o755);
    try {
      const probe = await querySmiOnce(old, { ...process.env, ...sc.env() });
      expect(probe).toEqual({
        ok: true,
        reason: null,
        instantField: false,
        devices: [{ index: 0, power: "averaged", watts: 150, reason: null }],
      });
    } finally {
      sc.remove();
    }
  });

  it("says why when nvidia-smi cannot reach the driver", async () => {
    const sc = writeScenario({ initError: 9 });
    try {
      const probe = await querySmiOnce(FAKE_SMI, { ...process.env, ...sc.env() });
      expect(probe.ok).toBe(false);
      expect(probe.reason).toMatch(
        /^nvidia-smi exited with code 9: NVIDIA-SMI has failed because it couldn't communicate/,
      );
      expect(probe.devices).toEqual([]);
    } finally {
      sc.remove();
    }
  });
});

describe("a card that could not be probed", () => {
  it("is probed again next time, not answered from the cache (nvidia-smi installed since)", async () => {
    const later = join(dir, "later");
    const smi = join(later, "nvidia-smi");
    const saved = process.env.GIUL_NVIDIA_SMI;
    process.env.GIUL_NVIDIA_SMI = smi;
    try {
      // GPU 9 exists nowhere here: NVML cannot read it, whatever loads.
      const before = await localCapabilities(9);
      expect(before.reason).not.toBeNull();
      expect(before.smi).toBe(false);
      mkdirSync(later, { recursive: true });
      writeFileSync(smi, "#!/bin/sh\nexit 0\n");
      chmodSync(smi, 0o755);
      const after = await localCapabilities(9);
      expect(after.smi).toBe(true);
    } finally {
      if (saved === undefined) delete process.env.GIUL_NVIDIA_SMI;
      else process.env.GIUL_NVIDIA_SMI = saved;
    }
  });
});
