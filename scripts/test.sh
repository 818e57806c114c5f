#!/usr/bin/env bash
# The tests: install the dependencies, check formatting, build (an upward
# include fails the build), run every test (ctest), build the library and the
# tests again with AddressSanitizer + UBSan (build-san) and run them, then run
# each parser fuzz target for a bounded time (FUZZ_SECONDS, default 60).
# LFMVOX_SKIP_SANITIZE=1 skips the sanitized stage (for a quick local run).
# The last line is the summary: "tests: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

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
  stage_times+=("$(printf '%-16s %5d s wall, %6.0f s CPU' "$1" $((SECONDS - stage_wall)) \
                  "$(echo "$cpu $stage_cpu" | awk '{ print $1 - $2 }')")")
}
# ctest's "N% tests passed, F tests failed out of T" → "T F".
ctest_counts() {
  local t f
  t=$(sed -n 's/.* tests failed out of \([0-9]*\).*/\1/p' "$1" | tail -n 1)
  f=$(sed -n 's/.*, \([0-9]*\) tests failed out of .*/\1/p' "$1" | tail -n 1)
  echo "${t:-0} ${f:-0}"
}

stage_start
./scripts/install-deps.sh || exit 1
stage_end install
stage_start
format_rc=0
./scripts/check-format.sh || format_rc=$?
stage_end format
stage_start
./scripts/build.sh || exit 1
stage_end build
stage_start
log=$(mktemp)
(cd build && ctest --output-on-failure -j"$jobs") 2>&1 | tee "$log"
ctest_rc=${PIPESTATUS[0]}
read -r total failed < <(ctest_counts "$log")
stage_end ctest

# The sanitized suite: -O1 with ASan + UBSan (UB is fatal), the sanitize-ci suites (or, with
# LFMVOX_SANITIZE_ALL=1, the library, CLI, tools and every test), no benchmarks. Reports of every process, the CLI that tests run included, go to build-san/sanitizer/
# as well, so one from a child whose exit status a test does not check still fails the stage. A test
# labelled no-asan cannot run under ASan (tests/CMakeLists.txt would say why; none is so far).
san_rc=0
if [ "${LFMVOX_SKIP_SANITIZE:-0}" != 1 ]; then
  stage_start
  # By default the suites labelled sanitize-ci (the parsers of untrusted bytes, CMakeLists.txt); with
  # LFMVOX_SANITIZE_ALL=1 every suite (about 3x the Release build's CPU, then a slower ctest).
  san_targets=()
  san_filter=(-L sanitize-ci)
  if [ "${LFMVOX_SANITIZE_ALL:-0}" = 1 ]; then san_filter=(-LE no-asan); fi
  cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Release -DLFMVOX_SANITIZE=ON -DLFMVOX_BUILD_TESTS=ON \
    -DLFMVOX_BUILD_BENCH=OFF >/dev/null || san_rc=$?
  if [ "$san_rc" -eq 0 ] && [ "${LFMVOX_SANITIZE_ALL:-0}" != 1 ]; then
    read -r -a san_targets <build-san/sanitize-ci-targets.txt
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
    san_rc=${PIPESTATUS[0]}
    read -r san_total san_failed < <(ctest_counts "$log")
    total=$((total + san_total))
    failed=$((failed + san_failed))
    if compgen -G "$reports/*" >/dev/null; then
      echo "sanitize: reports in $reports:"
      head -n 80 "$reports"/*
      san_rc=1
      failed=$((failed + 1))
      total=$((total + 1))
    fi
  else
    echo "sanitize: the sanitized build failed"
    failed=$((failed + 1))
    total=$((total + 1))
  fi
  stage_end sanitize-ctest
fi
rm -f "$log" "$times_file"

stage_start
fuzz_rc=0
./fuzz/run.sh "${FUZZ_SECONDS:-60}" || fuzz_rc=$?
stage_end fuzz

if [ "$format_rc" -ne 0 ]; then
  failed=$((failed + 1))
  total=$((total + 1))
fi
if [ "$fuzz_rc" -ne 0 ]; then
  echo "fuzz: a target found a problem (see above)"
  failed=$((failed + 1))
  total=$((total + 1))
fi
echo "== stage times"
for line in "${stage_times[@]}"; do echo "   $line"; done
echo "tests: $((total - failed)) passed, $failed failed"
[ "$ctest_rc" -eq 0 ] && [ "$san_rc" -eq 0 ] && [ "$fuzz_rc" -eq 0 ] && [ "$format_rc" -eq 0 ] && [ "$total" -gt 0 ]
