import { defineConfig } from "tsup";

// One source, two module formats. `shims` gives the CommonJS build an `import.meta.url`,
// which src/binding.ts uses to find the package root (build/ and prebuilds/).
// The exporters are entries of their own (giul/otel): the main entry never loads
// @opentelemetry/api, which stays outside every bundle (an optional peer).
const exporters = { otel: "src/exporters/otel.ts" };

export default defineConfig({
  entry: {
    index: "src/index.ts",
    ...exporters,
    "cli/probe": "src/cli/probe.ts",
    "cli/agent": "src/cli/agent.ts",
  },
  format: ["esm", "cjs"],
  dts: { entry: { index: "src/index.ts", ...exporters } },
  external: ["@opentelemetry/api"],
  tsconfig: "tsconfig.build.json",
  target: "node20",
  platform: "node",
  shims: true,
  splitting: false,
  sourcemap: true,
  clean: true,
});
