import { defineConfig } from "tsup";

// The library in two module formats, and the two command-line tools (bin: giul-probe, giul-agent)
// as ESM only, which is all their bin entries run. `shims` gives the CommonJS build an
// `import.meta.url`, which src/binding.ts uses to find the package root (build/ and prebuilds/).
// No source maps: the published files are the bundles and their types. No `clean` either (the two
// builds run at once and would clean each other's output): `npm run build:ts` empties dist/ first.
const common = {
  tsconfig: "tsconfig.build.json",
  target: "node20",
  platform: "node",
  shims: true,
  splitting: false,
  sourcemap: false,
} as const;

export default defineConfig([
  {
    ...common,
    entry: { index: "src/index.ts" },
    format: ["esm", "cjs"],
    dts: { entry: { index: "src/index.ts" } },
  },
  {
    ...common,
    entry: { "cli/probe": "src/cli/probe.ts", "cli/agent": "src/cli/agent.ts" },
    format: ["esm"],
  },
]);
