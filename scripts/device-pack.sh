#!/usr/bin/env bash
# Prepares, on a machine with Node.js and node_modules (this one), what scripts/gpu-check.sh needs on
# a GPU machine that has the NVIDIA driver but neither Node.js nor the npm registry: the bundle
# (dist/), the addon (build/Release/), node-gyp-build, and under .device/ (ignored by git) this
# machine's `node` compressed and bench/fusion-hw.ts bundled (it runs through esbuild otherwise).
# Then run the check there with those paths carried, e.g. through the device tool:
#   carry: dist build/Release node_modules/node-gyp-build .device
#   command: bash scripts/gpu-check.sh        (timeout_s about 540)
# About 25 MB in all, under the tool's 64 MiB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
npm run build:ts >/dev/null
npm run build:native >/dev/null
mkdir -p .device
node -e '
  const { build } = require("esbuild");
  build({ entryPoints: ["bench/fusion-hw.ts"], bundle: true, platform: "node", format: "esm",
          target: "node20", outfile: ".device/fusion-hw.mjs", logLevel: "error" })
    .catch((e) => { console.error(e); process.exit(1); });
'
xz -6 -T0 -c "$(command -v node)" >.device/node.xz
node --version >.device/node-version
du -ch dist build/Release node_modules/node-gyp-build .device | tail -1
echo "carry: dist build/Release node_modules/node-gyp-build .device"
