#!/usr/bin/env bash
# The main job: install the dependencies, build, and run lfmvox on its
# built-in default — detokenize the code file shipped in examples/ with the
# detokenizer checkpoint shipped in tests/data into out.wav (24 kHz).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
./build/apps/cli/lfmvox detokenize --model tests/data/lfm25_detok --codes examples/codes.txt -o out.wav
