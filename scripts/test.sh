#!/usr/bin/env bash
# The tests: install the dependencies, check formatting, build (an upward
# include fails the build), run every test (ctest), then run each parser fuzz
# target for a bounded time (FUZZ_SECONDS, default 60).
# The last line is the summary: "tests: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh || exit 1
format_rc=0
./scripts/check-format.sh || format_rc=$?
./scripts/build.sh || exit 1
log=$(mktemp)
(cd build && ctest --output-on-failure -j"$(nproc)") 2>&1 | tee "$log"
ctest_rc=${PIPESTATUS[0]}
fuzz_rc=0
./fuzz/run.sh "${FUZZ_SECONDS:-60}" || fuzz_rc=$?
total=$(sed -n 's/.* tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -n 1)
failed=$(sed -n 's/.*, \([0-9]*\) tests failed out of .*/\1/p' "$log" | tail -n 1)
rm -f "$log"
total=${total:-0}
failed=${failed:-0}
if [ "$format_rc" -ne 0 ]; then
  failed=$((failed + 1))
  total=$((total + 1))
fi
if [ "$fuzz_rc" -ne 0 ]; then
  echo "fuzz: a target found a problem (see above)"
  failed=$((failed + 1))
  total=$((total + 1))
fi
echo "tests: $((total - failed)) passed, $failed failed"
[ "$ctest_rc" -eq 0 ] && [ "$fuzz_rc" -eq 0 ] && [ "$format_rc" -eq 0 ] && [ "$total" -gt 0 ]
