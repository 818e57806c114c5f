#!/usr/bin/env bash
# The tests: install the dependencies, build, run every test (ctest), then
# run each parser fuzz target for a bounded time (FUZZ_SECONDS, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
(cd build && ctest --output-on-failure -j"$(nproc)")
./fuzz/run.sh "${FUZZ_SECONDS:-60}"
