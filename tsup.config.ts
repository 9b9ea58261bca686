import { defineConfig } from "tsup";

// One source, two module formats. `shims` gives the CommonJS build an `import.meta.url`,
// which src/binding.ts uses to find the package root (build/ and prebuilds/).
export default defineConfig({
  entry: {
    index: "src/index.ts",
    "cli/probe": "src/cli/probe.ts",
    "cli/agent": "src/cli/agent.ts",
    "cli/proxy": "src/cli/proxy.ts",
  },
  format: ["esm", "cjs"],
  dts: { entry: { index: "src/index.ts" } },
  tsconfig: "tsconfig.build.json",
  target: "node20",
  platform: "node",
  shims: true,
  splitting: false,
  sourcemap: true,
  clean: true,
});
