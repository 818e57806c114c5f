#!/usr/bin/env bash
# Abusive clients against `lfmvox serve` on the demo speech checkpoint (tests/clients/abuse.mjs).
#   run_abuse_test.sh LFMVOX MAKE_CHECKPOINT TEST_DATA_DIR WORK_DIR CLIENTS SECONDS
# Exit 77 (ctest's skip) without node.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null; then
  echo "SKIP: node is not installed (Debian: apt-get install nodejs)"
  exit 77
fi
mkdir -p "$4"
"$2" lfm25-audio --size demo --tokenizer "$3/tokenizer/tokenizer.json" --out "$4/demo_tts" \
  --steer-tts 'Hello there.' --voice 'US female' 2>/dev/null
exec node "$here/abuse.mjs" "$1" "$4/demo_tts" "$5" "$6"
