#!/usr/bin/env bash
# Configures and builds lfmvox (Release) into ./build.
#   scripts/build.sh          the library, the CLI, the tools and the tests
#   scripts/build.sh --main   only what scripts/run.sh runs: the CLI (build/apps/cli/lfmvox) and the
#                             checkpoint tool (build/tools/lfmvox-make-checkpoint), not the server
#                             (lfmvox-server, which `lfmvox serve` runs); no test packages needed
# The benchmarks have their own target: cmake --build build --target benchmarks.
# Extra cmake options come from LFMVOX_CMAKE_ARGS (e.g. -DLFMVOX_WERROR=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
tests=ON
targets=()
# The kernels' SIMD targets (CMakeLists.txt, LFMVOX_SIMD): all of them for the full build, which tests
# every one; for --main in a new tree, only this CPU's best (and the portable fallback), a build that
# runs here, in a third of the time; a tree that exists keeps its choice.
simd=(-DLFMVOX_SIMD=all)
case "${1:-}" in
  "") ;;
  --main)
    tests=OFF
    targets=(--target lfmvox_cli lfmvox_make_checkpoint)
    simd=()
    [ -f build/CMakeCache.txt ] || simd=(-DLFMVOX_SIMD=native)
    ;;
  *) echo "usage: scripts/build.sh [--main]" >&2; exit 2 ;;
esac
generator=()
# Ninja when it is installed (scripts/install-deps.sh installs it) and the tree is new: a tree keeps the
# generator it was configured with.
if [ ! -f build/CMakeCache.txt ] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# shellcheck disable=SC2086
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLFMVOX_BUILD_TESTS=$tests "${simd[@]}" \
  ${LFMVOX_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)" "${targets[@]}"
