#!/usr/bin/env bash
# Configures and builds lfmvox (Release) into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLFMVOX_BUILD_TESTS=ON -DLFMVOX_BUILD_BENCH=ON >/dev/null
cmake --build build -j"$(nproc)"
