#!/usr/bin/env bash
# Installs the test clients pinned in tests/clients/package-lock.json (the official `openai` client and
# the `ws` package its realtime client needs) into WORK_DIR/node_modules with `npm ci`, once: again only
# when the lock file changes. Exit 77 (ctest's skip) without node/npm or when the registry is out of reach.
#   npm_install.sh WORK_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:?usage: npm_install.sh WORK_DIR}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are not installed (Debian: apt-get install nodejs npm)"
  exit 77
fi
mkdir -p "$work"
if ! cmp -s "$here/package-lock.json" "$work/package-lock.json" || [ ! -f "$work/node_modules/openai/package.json" ] ||
  [ ! -f "$work/node_modules/ws/package.json" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  if ! (cd "$work" && timeout 300 npm ci --no-audit --no-fund --loglevel=error); then
    rm -f "$work/package-lock.json"  # so the next run tries again
    echo "SKIP: npm ci of the pinned clients failed (is the npm registry reachable?)"
    exit 77
  fi
fi
exit 0
