#!/usr/bin/env bash
# The page `lfmvox serve` serves at `/`, in Debian's headless Chromium driven by playwright-core
# (tests/browser/web_page_test.mjs), with a fake microphone playing a WAV from tests/data.
#   run_web_test.sh LFMVOX MAKE_CHECKPOINT TEST_DATA_DIR WORK_DIR
# Installs playwright-core pinned in package-lock.json into WORK_DIR/node_modules (`npm ci`, once: again
# only when the lock file changes); it never downloads a browser. Exit 77 (ctest's skip) without
# chromium, node 20+ or npm, or when the registry is out of reach.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${4:?usage: run_web_test.sh LFMVOX MAKE_CHECKPOINT TEST_DATA_DIR WORK_DIR}
export LFMVOX_CHROMIUM=${LFMVOX_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$LFMVOX_CHROMIUM" ]; then
  echo "SKIP: $LFMVOX_CHROMIUM is missing (Debian: apt-get install chromium; scripts/install-deps.sh --test)"
  exit 77
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are not installed (scripts/install-deps.sh)"
  exit 77
fi
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  echo "SKIP: playwright-core needs Node.js 20 or later; this is $(node --version)"
  exit 77
fi
mkdir -p "$work"
if ! cmp -s "$here/package-lock.json" "$work/package-lock.json" || [ ! -f "$work/node_modules/playwright-core/package.json" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  if ! (cd "$work" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 timeout 300 npm ci --no-audit --no-fund --loglevel=error); then
    rm -f "$work/package-lock.json"  # so the next run tries again
    echo "SKIP: npm ci of the pinned playwright-core failed (is the npm registry reachable?)"
    exit 77
  fi
fi
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
exec node "$here/web_page_test.mjs" "$@"
