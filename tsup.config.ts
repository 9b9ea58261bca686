import { defineConfig } from "tsup";

// One source, two module formats. `shims` gives the CommonJS build an `import.meta.url`,
// which src/binding.ts uses to find the package root (build/ and prebuilds/).
// The exporters are entries of their own (giul/otel, giul/prometheus): the main entry never loads
// @opentelemetry/api or prom-client, which stay outside every bundle (optional peers).
const exporters = { otel: "src/exporters/otel.ts", prometheus: "src/exporters/prometheus.ts" };

export default defineConfig({
  entry: {
    index: "src/index.ts",
    ...exporters,
    "cli/probe": "src/cli/probe.ts",
    "cli/agent": "src/cli/agent.ts",
  },
  format: ["esm", "cjs"],
  dts: { entry: { index: "src/index.ts", ...exporters } },
  external: ["@opentelemetry/api", "prom-client"],
  tsconfig: "tsconfig.build.json",
  target: "node20",
  platform: "node",
  shims: true,
  splitting: false,
  sourcemap: true,
  clean: true,
});
