#!/usr/bin/env bash
# The tests.
#   scripts/test.sh           everything (what .ci/run runs): install the test packages, check formatting,
#                             build (Release; an upward include or a compiler warning fails it), run every
#                             test (ctest; the benchmarks build beside it), build the sanitized tree (clang, ASan +
#                             UBSan at -O1, build-san: the sanitize-ci test executables and the fuzz
#                             targets) and run the sanitize-ci suites in it (not the long ones), then fuzz
#                             each parser for FUZZ_SECONDS (default 60), two targets at a time.
#   scripts/test.sh --quick   the edit-compile-test loop: formatting, the incremental Release build and
#                             ctest without the suites labelled long.
# LFMVOX_SANITIZE_ALL=1 builds and runs every suite sanitized instead of the sanitize-ci ones.
# The last line is the summary: "tests: N passed, M failed" (N counts ctest's tests: one a suite).
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac

# Wall and CPU (user + sys, children included) seconds of each stage, printed before the summary.
stage_times=()
# `times` must run in this shell (in a $(...) subshell it would see none of the children): cpu_now
# sets $cpu.
times_file=$(mktemp)
cpu_now() {
  times >"$times_file"
  cpu=$(tail -n 1 "$times_file" | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
}
stage_start() {
  stage_wall=$SECONDS
  cpu_now
  stage_cpu=$cpu
}
stage_end() {
  cpu_now
  stage_times+=("$(printf '%-20s %5d s wall, %6.0f s CPU' "$1" $((SECONDS - stage_wall)) \
                  "$(echo "$cpu $stage_cpu" | awk '{ print $1 - $2 }')")")
}
# ctest's "N% tests passed, F tests failed out of T" → "T F".
ctest_counts() {
  local t f
  t=$(sed -n 's/.* tests failed out of \([0-9]*\).*/\1/p' "$1" | tail -n 1)
  f=$(sed -n 's/.*, \([0-9]*\) tests failed out of .*/\1/p' "$1" | tail -n 1)
  echo "${t:-0} ${f:-0}"
}
total=0
failed=0
# fail WHAT: one more failed check, said on its own line.
fail() {
  echo "$1"
  failed=$((failed + 1))
  total=$((total + 1))
}
log=$(mktemp)

stage_start
./scripts/install-deps.sh --test || exit 1
stage_end install
stage_start
./scripts/check-format.sh || fail "format: files differ from .clang-format"
stage_end format
stage_start
./scripts/build.sh || exit 1
stage_end build
stage_start
# The benchmarks are no test's, but they are compiled once a run so that they keep building: beside
# ctest, which leaves about a third of the cores idle (servers and clients waiting on each other).
bench_log=$(mktemp)
bench_pid=
if [ "$quick" = 0 ]; then
  cmake --build build -j1 --target benchmarks >"$bench_log" 2>&1 &
  bench_pid=$!
fi
ctest_filter=()
if [ "$quick" = 1 ]; then ctest_filter=(-LE long); fi
(cd build && ctest --output-on-failure -j"$jobs" "${ctest_filter[@]}") 2>&1 | tee "$log"
ctest_rc=${PIPESTATUS[0]}
read -r t f < <(ctest_counts "$log")
total=$((total + t))
failed=$((failed + f))
[ "$t" -gt 0 ] || fail "ctest: no test ran"
if [ -n "$bench_pid" ] && ! wait "$bench_pid"; then
  cat "$bench_log"
  fail "bench: the benchmarks do not build"
fi
rm -f "$bench_log"
stage_end "ctest$([ "$quick" = 0 ] && echo ' + bench build')"

if [ "$quick" = 0 ]; then

  # The sanitized tree: clang at -O1 with ASan + UBSan (UB is fatal), the libraries also instrumented for
  # libFuzzer (-fsanitize=fuzzer-no-link), so one compilation serves the sanitize-ci suites and the fuzz
  # targets. Reports of every process, the CLI that tests run included, go to build-san/sanitizer/ as
  # well, so one from a child whose exit status a test does not check still fails the stage. A test
  # labelled no-asan cannot run under ASan (tests/CMakeLists.txt would say why; none is so far).
  stage_start
  san_rc=0
  CC=clang CXX=clang++ cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Release -DLFMVOX_SANITIZE=ON \
    -DLFMVOX_BUILD_FUZZ=ON -DLFMVOX_BUILD_TESTS=ON -DLFMVOX_BUILD_BENCH=OFF >/dev/null || san_rc=$?
  san_targets=()
  san_filter=(-L sanitize-ci -LE long)
  if [ "${LFMVOX_SANITIZE_ALL:-0}" = 1 ]; then
    san_filter=(-LE no-asan)
  elif [ "$san_rc" -eq 0 ]; then
    read -r -a san_targets <build-san/sanitize-targets.txt
    san_targets=(--target "${san_targets[@]}")
  fi
  [ "$san_rc" -eq 0 ] && { cmake --build build-san -j"$jobs" "${san_targets[@]}" || san_rc=$?; }
  stage_end sanitize-build
  stage_start
  if [ "$san_rc" -eq 0 ]; then
    reports=$PWD/build-san/sanitizer
    rm -rf "$reports" && mkdir -p "$reports"
    (cd build-san &&
      ASAN_OPTIONS="log_path=$reports/asan:exitcode=86:allocator_may_return_null=1:detect_leaks=1" \
      UBSAN_OPTIONS="log_path=$reports/ubsan:exitcode=87:print_stacktrace=1:halt_on_error=1" \
      ctest --output-on-failure -j"$jobs" "${san_filter[@]}") 2>&1 | tee "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || san_rc=1
    read -r t f < <(ctest_counts "$log")
    total=$((total + t))
    failed=$((failed + f))
    [ "$t" -gt 0 ] || fail "sanitize: no test ran"
    if compgen -G "$reports/*" >/dev/null; then
      head -n 80 "$reports"/*
      fail "sanitize: reports in $reports (above)"
    fi
  else
    fail "sanitize: the sanitized build failed"
  fi
  stage_end sanitize-ctest

  stage_start
  ./fuzz/run.sh "${FUZZ_SECONDS:-60}" || fail "fuzz: a target found a problem (see above)"
  stage_end fuzz
fi
rm -f "$log" "$times_file"

echo "== stage times"
for line in "${stage_times[@]}"; do echo "   $line"; done
echo "tests: $((total - failed)) passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$ctest_rc" -eq 0 ] && [ "$total" -gt 0 ]
