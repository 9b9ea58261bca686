#!/usr/bin/env bash
# Runs the whole test suite against a packed tarball instead of this checkout's own build:
#   bash scripts/test-tarball.sh giul-x.y.z.tgz [vitest arguments, e.g. test files]
# The tarball's dist/ replaces dist/, and its prebuild for this machine (prebuilds/linux-<arch>)
# replaces build/Release/giul.node, so every suite that loads the addon loads the shipped binary;
# the artifact suites (package.test.ts, arm64.qemu.test.ts) test the tarball itself
# (GIUL_TEST_TARBALL). The test doubles are this checkout's (built here if missing). Both replaced
# files are put back afterwards. The release workflow runs this on x64 and arm64 runners.
set -euo pipefail
tarball=$(realpath "${1:?usage: scripts/test-tarball.sh giul-x.y.z.tgz}")
cd "$(dirname "${BASH_SOURCE[0]}")/.."

arch=$(node -p process.arch)
tmp=$(mktemp -d)
restore() {
  if [ -d "$tmp/saved-dist" ]; then rm -rf dist && mv "$tmp/saved-dist" dist; fi
  if [ -f "$tmp/saved-giul.node" ]; then
    mv "$tmp/saved-giul.node" build/Release/giul.node
  elif [ -n "${placed:-}" ]; then
    rm -f build/Release/giul.node
  fi
  rm -rf "$tmp"
}
trap restore EXIT

tar xzf "$tarball" -C "$tmp"
prebuild="$tmp/package/prebuilds/linux-$arch/giul.glibc.node"
if [ ! -f "$prebuild" ]; then
  echo "test-tarball: $tarball has no prebuild for linux-$arch" >&2
  exit 1
fi

if [ ! -f build/test-doubles/current/libnvidia-ml.so.1 ]; then
  npx cmake-js compile --out build
fi

if [ -d dist ]; then mv dist "$tmp/saved-dist"; fi
cp -r "$tmp/package/dist" dist
mkdir -p build/Release
if [ -f build/Release/giul.node ]; then mv build/Release/giul.node "$tmp/saved-giul.node"; fi
cp "$prebuild" build/Release/giul.node
placed=1

echo "test-tarball: node $(node --version) $arch, dist/ and the addon from $(basename "$tarball")"
# GIUL_TEST_NO_BUILD: the global setup must not rebuild what came from the tarball.
GIUL_TEST_NO_BUILD=1 GIUL_TEST_TARBALL="$tarball" CI="${CI:-true}" npm test -- "${@:2}"
