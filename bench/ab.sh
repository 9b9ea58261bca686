#!/usr/bin/env bash
# Two builds' main-thread CPU per window, alternated process by process (bench/floor.js's child, the
# Meter or another variant), at 1,000 and 10,000 concurrent windows: on a shared host one process's
# figure moves by more than most changes, so only many alternated pairs tell two builds apart.
#   bench/ab.sh DIST_A DIST_B [PAIRS]      (VARIANT=worker for GIUL_ACCOUNTING=worker)
# Each DIST is a dist/ folder (a bundle of src/index.ts will do) inside a checkout with build/, or
# anywhere with GIUL_ADDON_PATH naming a built giul.node. Prints each process's figure and the medians
# (µs of main-thread CPU per window, the bare loop not subtracted).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
a_dist=$(realpath "$1")
b_dist=$(realpath "$2")
pairs=${3:-8}
variant=${VARIANT:-meter}
one() { GIUL_BENCH_DIST="$1" node bench/floor.js --child "$variant" "$2" "$3" | node -pe 'JSON.parse(require("fs").readFileSync(0)).cpuUs.toFixed(1)'; }
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
for n in 1000 10000; do
  rounds=$([ "$n" = 1000 ] && echo 15 || echo 4)
  a=()
  b=()
  for _ in $(seq "$pairs"); do
    a+=("$(one "$a_dist" "$n" "$rounds")")
    b+=("$(one "$b_dist" "$n" "$rounds")")
  done
  echo "$n concurrent ($variant): A ${a[*]} (median $(median "${a[@]}")) | B ${b[*]} (median $(median "${b[@]}"))"
done
