#!/usr/bin/env bash
# The page `lfmvox serve` serves at `/`, in Debian's headless Chromium driven by playwright-core
# (tests/browser/web_page_test.mjs), with a fake microphone playing a WAV from tests/data.
#   run_web_test.sh LFMVOX MAKE_CHECKPOINT TEST_DATA_DIR WORK_DIR
# playwright-core, pinned in package-lock.json, comes from tests/clients/npm_install.sh; it never
# downloads a browser. Exit 77 (ctest's skip) without chromium, Node.js 20+ or npm, or when the registry
# is out of reach.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${4:?usage: run_web_test.sh LFMVOX MAKE_CHECKPOINT TEST_DATA_DIR WORK_DIR}
export LFMVOX_CHROMIUM=${LFMVOX_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$LFMVOX_CHROMIUM" ]; then
  echo "SKIP: $LFMVOX_CHROMIUM is missing (Debian: apt-get install chromium, as scripts/install-deps.sh does)"
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
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
"$here/../clients/npm_install.sh" "$work" "$here" || exit $?
exec node "$here/web_page_test.mjs" "$@"
