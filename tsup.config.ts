import { defineConfig } from "tsup";

// The library in two module formats, and the command-line tools (bin: giul-probe, giul-agent,
// giul-proxy, giul-report) as ESM only, which is all their bin entries run. `shims` gives the CommonJS build an
// `import.meta.url`, which src/sources/native/binding.ts uses to find the package root (build/ and prebuilds/).
// No source maps: the published files are the bundles and their types. No `clean` either (the two
// builds run at once and would clean each other's output): `npm run build:ts` empties dist/ first.
// The exporters are entries of their own (giul/otel, giul/prometheus): the main entry never loads
// @opentelemetry/api or prom-client, which stay outside every bundle (optional peers). So is
// giul/testing (simulated cards), and giul/client (what a proxy's client reads; no addon).
const common = {
  tsconfig: "tsconfig.build.json",
  target: "node20",
  platform: "node",
  shims: true,
  splitting: false,
  sourcemap: false,
} as const;
const external = ["@opentelemetry/api", "prom-client"];
const subpaths = {
  index: "src/index.ts",
  testing: "src/testing.ts",
  otel: "src/exporters/otel.ts",
  prometheus: "src/exporters/prometheus.ts",
  client: "src/client/index.ts",
};

export default defineConfig([
  {
    // The library's CommonJS build (require("giul"), require("giul/otel"), …): a file each.
    ...common,
    entry: subpaths,
    external,
    format: ["cjs"],
    dts: { entry: subpaths },
  },
  {
    // The library's ESM build and the tools, in one build: the code they share is bundled once,
    // in dist/chunk-*.js, instead of again in each tool.
    ...common,
    entry: {
      ...subpaths,
      "cli/probe": "src/cli/probe.ts",
      "cli/agent": "src/cli/agent.ts",
      "cli/proxy": "src/cli/proxy.ts",
      "cli/report": "src/cli/report.ts",
    },
    external,
    format: ["esm"],
    dts: { entry: subpaths },
    splitting: true,
  },
]);
