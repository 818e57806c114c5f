#!/usr/bin/env bash
# The official `openai` npm client against `lfmvox serve` (tests/clients/openai_client_test.mjs).
#   run_openai_test.sh LFMVOX MAKE_CHECKPOINT TEST_DATA_DIR WORK_DIR
# Installs the client pinned in package-lock.json into WORK_DIR/node_modules (`npm ci`, once: again only
# when the lock file changes). Exit 77 (ctest's skip) without node/npm or when the registry is out of reach.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${4:?usage: run_openai_test.sh LFMVOX MAKE_CHECKPOINT TEST_DATA_DIR WORK_DIR}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are not installed (Debian: apt-get install nodejs npm)"
  exit 77
fi
mkdir -p "$work"
if ! cmp -s "$here/package-lock.json" "$work/package-lock.json" || [ ! -f "$work/node_modules/openai/package.json" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  if ! (cd "$work" && timeout 300 npm ci --no-audit --no-fund --loglevel=error); then
    rm -f "$work/package-lock.json"  # so the next run tries again
    echo "SKIP: npm ci of the pinned openai client failed (is the npm registry reachable?)"
    exit 77
  fi
fi
exec node "$here/openai_client_test.mjs" "$@"
