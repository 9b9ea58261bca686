#!/usr/bin/env bash
# The one prepared check for a machine with a real NVIDIA GPU (a session that draws one runs it
# through the device tool: `bash scripts/gpu-check.sh`, with timeout_s around 400).
# It builds, runs the real-hardware parts of the suite, asks giul-probe what the host supports,
# and meters the same windows through every backend against the card's own counter.
# Everything it prints also goes under $OUT (when set) to come back.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-/tmp/giul-gpu-check}"
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1

echo "== machine"; nvidia-smi -L || true; nproc; node --version
echo "== build"
npm ci --no-audit --no-fund >"$out/npm-ci.log" 2>&1 || { echo "npm ci failed"; tail -30 "$out/npm-ci.log"; exit 1; }
echo "== giul-probe"
node dist/cli/probe.js
node dist/cli/probe.js --json >"$out/probe.json"
echo "== backends side by side (idle card unless something else runs)"
node bench/hardware.js --reps 5 --json "$out/hardware.json"
echo "== the Meter benchmark on real NVML (sampler CPU includes the driver's cost here)"
node --expose-gc bench/meter.js --quick --real 2>&1 | tee "$out/bench-meter.md"
echo "== done"
