#!/usr/bin/env bash
# Installs the test-only npm packages pinned in PACKAGE_DIR/package-lock.json (default: tests/clients, the
# official `openai` client and the `ws` package its realtime client needs; tests/browser: playwright-core)
# into WORK_DIR/node_modules with `npm ci`, once: again only when the lock file changes or a package is
# missing. Exit 77 (ctest's skip) without node/npm or when the registry is out of reach.
#   npm_install.sh WORK_DIR [PACKAGE_DIR]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:?usage: npm_install.sh WORK_DIR [PACKAGE_DIR]}
src=${2:-$here}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are not installed (Debian: apt-get install nodejs npm)"
  exit 77
fi
mkdir -p "$work"
installed() {  # every dependency of package.json is in node_modules
  (cd "$work" && node -e 'const fs = require("fs");
    const deps = Object.keys(JSON.parse(fs.readFileSync("package.json", "utf8")).dependencies || {});
    process.exit(deps.every((d) => fs.existsSync(`node_modules/${d}/package.json`)) ? 0 : 1);')
}
if ! cmp -s "$src/package-lock.json" "$work/package-lock.json" || ! installed; then
  cp "$src/package.json" "$src/package-lock.json" "$work/"
  if ! (cd "$work" && timeout 300 npm ci --no-audit --no-fund --loglevel=error); then
    rm -f "$work/package-lock.json"  # so the next run tries again
    echo "SKIP: npm ci of the pinned packages in $src failed (is the npm registry reachable?)"
    exit 77
  fi
fi
exit 0
