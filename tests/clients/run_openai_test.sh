#!/usr/bin/env bash
# The official `openai` npm client against `lfmvox serve` (tests/clients/openai_client_test.mjs).
#   run_openai_test.sh LFMVOX MAKE_CHECKPOINT TEST_DATA_DIR WORK_DIR
# The clients come from npm_install.sh (pinned; exit 77, ctest's skip, when they cannot be installed).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${4:?usage: run_openai_test.sh LFMVOX MAKE_CHECKPOINT TEST_DATA_DIR WORK_DIR}
"$here/npm_install.sh" "$work" || exit $?
exec node "$here/openai_client_test.mjs" "$@"
