#!/usr/bin/env bash
# The one prepared check for a machine with a real NVIDIA GPU (a session that draws one runs it
# through the device tool: `bash scripts/gpu-check.sh`, with timeout_s around 540). A GPU machine
# without Node.js or the npm registry runs what scripts/device-pack.sh prepared here and carried
# there (dist, build/Release, node_modules/node-gyp-build, .device): no install, the carried node.
# It builds, runs the real-hardware parts of the suite, asks giul-probe what the host supports,
# and meters the same windows through every backend against the card's own counter.
# Everything it prints also goes under $OUT (when set) to come back.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-/tmp/giul-gpu-check}"
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1

# The node carried in .device (scripts/device-pack.sh), where there is one: unpacked outside $OUT
# (what is under $OUT comes back).
if [ -f .device/node.xz ]; then
  bin="$(mktemp -d)"
  if command -v xz >/dev/null; then
    xz -dc .device/node.xz >"$bin/node"
  else
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      .device/node.xz "$bin/node"
  fi
  chmod +x "$bin/node"
  export PATH="$bin:$PATH"
fi
echo "== machine"; nvidia-smi -L || true; nproc; command -v node && node --version
if ! command -v node >/dev/null; then
  echo "no node here: run scripts/device-pack.sh where there is one and carry what it lists"
  exit 1
fi
echo "== build"
if [ "${GIUL_GPU_CHECK_SKIP_INSTALL:-}" = "1" ]; then
  echo "skipped (GIUL_GPU_CHECK_SKIP_INSTALL=1: a dry run on the build already here)"
elif [ -d .device ]; then
  echo "skipped: the build carried with .device (scripts/device-pack.sh)"
  [ -f dist/index.js ] && [ -f build/Release/giul.node ] || { echo "dist/ or build/Release/giul.node was not carried"; exit 1; }
else
  npm ci --no-audit --no-fund >"$out/npm-ci.log" 2>&1 || { echo "npm ci failed"; tail -30 "$out/npm-ci.log"; exit 1; }
fi
echo "== giul-probe (each card's sensors watched 10 s: counter update intervals, power refresh, lock)"
node dist/cli/probe.js --seconds 10
node dist/cli/probe.js --json --seconds 10 >"$out/probe.json"
# A known load, needing only the driver: libcuda.so.1 opened at run time, a busy kernel from PTX
# text (the driver compiles it), 150 ms busy / 250 ms idle. Without a CUDA driver it says so and
# the checks below meter the card as it is.
echo "== known load (bench/gpu-load.c)"
load=""
if cc -O2 -o "$out/gpu-load" bench/gpu-load.c -ldl 2>"$out/gpu-load-cc.log"; then
  load="$out/gpu-load"
  if ! "$load" --seconds 1 >/dev/null; then
    echo "the load cannot run here: the card is metered as it is"
    load=""
  fi
else
  echo "cannot compile bench/gpu-load.c:"; tail -5 "$out/gpu-load-cc.log"
fi
echo "== backends side by side, under the load"
loadpid=""
if [ -n "$load" ]; then
  "$load" --seconds 45 >"$out/gpu-load-hardware.log" 2>&1 &
  loadpid=$!
fi
node bench/hardware.js --reps 5 --json "$out/hardware.json"
# Only the load (a bare `wait` would also wait for the tee above).
[ -n "$loadpid" ] && wait "$loadpid"
echo "== the fused counter under the load: the counter's step, the power sensor's refresh, and the"
echo "   same windows fused, as the counter alone (Zeus) and as the integral of power"
fusion=bench/fusion-hw.js
[ -f .device/fusion-hw.mjs ] && fusion=.device/fusion-hw.mjs # bundled here: no esbuild there
node "$fusion" --seconds 60 ${load:+--load "$load"} --json "$out/fusion-hw.json" | tee "$out/fusion-hw.md"
echo "== the Meter benchmark on real NVML (sampler CPU includes the driver's cost here)"
node --expose-gc bench/meter.js --quick --real 2>&1 | tee "$out/bench-meter.md"
echo "== done"
