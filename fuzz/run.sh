#!/usr/bin/env bash
# Builds the libFuzzer targets (incrementally, in the sanitized tree scripts/test.sh also runs its
# sanitize-ci tests from) and runs each for a bounded time, two at a time.
#   fuzz/run.sh SECONDS        e.g. fuzz/run.sh 60 (what CI runs)
# Environment: LFMVOX_FUZZ_BUILD_DIR (default <repo>/build-san), LFMVOX_FUZZ_JOBS (build jobs, default
# nproc), LFMVOX_FUZZ_PARALLEL (targets fuzzing at once, default 2), LFMVOX_FUZZ_TARGETS (space-separated
# subset, e.g. "prompt config"; default all).
# Inputs go up to 1 MiB (-max_len), each has a time limit (-timeout, LFMVOX_FUZZ_TIMEOUT seconds of wall
# time, default 60: 1 MiB of spaces through the tokenizer costs ~30 s CPU under ASan + UBSan + coverage,
# 64 KiB 1.7 s, a quadratic parser far more; raise it on a loaded machine) and the process an RSS limit
# (-rss_limit_mb; a single allocation over it fails too), so a crash, a leak, a hang or a memory blow-up is
# a failure. Seeds: the checked-in fuzz/corpus/<name>/ (small valid and invalid files) and the deeply nested
# and oversized ones fuzz/make_seeds.cc writes to <build>/fuzz-seeds/<name>/ at run time.
# Exits non-zero if any target finds a problem; the reproducer is left in <build>/fuzz-artifacts/<name>/
# and the log tail is printed. New corpus units go to <build>/fuzz-work/, never into fuzz/corpus/.
# Ends with a table of each target's executions (libFuzzer's "Done N runs in S second(s)").
set -euo pipefail

secs=${1:?usage: fuzz/run.sh SECONDS}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LFMVOX_FUZZ_BUILD_DIR:-$root/build-san}
jobs=${LFMVOX_FUZZ_JOBS:-$(nproc)}
parallel=${LFMVOX_FUZZ_PARALLEL:-2}
names=(${LFMVOX_FUZZ_TARGETS:-safetensors gguf codes npy tokenizer audio config prompt server})
targets=("${names[@]/#/fuzz_}")

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLFMVOX_SANITIZE=ON \
    -DLFMVOX_BUILD_FUZZ=ON -DLFMVOX_BUILD_TESTS=ON -DLFMVOX_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$build" -j"$jobs" --target "${targets[@]}" make_seeds

seeds="$build/fuzz-seeds"
rm -rf "$seeds"
"$build/fuzz/make_seeds" "$seeds"

# One target: its generated seeds once, then SECONDS of fuzzing; the result line goes to $log.result.
fuzz_one() {
  local name=$1 target=fuzz_$1
  local work="$build/fuzz-work/$name" artifacts="$build/fuzz-artifacts/$name"
  local log="$build/fuzz-artifacts/$name.log"
  mkdir -p "$work" "$artifacts" "$seeds/$name"
  local common=(-timeout="${LFMVOX_FUZZ_TIMEOUT:-60}" -rss_limit_mb=2048 -max_len=1048576
                -artifact_prefix="$artifacts/")
  local rc=0
  # 1. Every generated (nested, oversized) seed once: each costs up to seconds, so they are not mutated,
  #    which would leave a 60 s run a few hundred executions.
  "$build/fuzz/$target" "${common[@]}" "$seeds/$name"/* >"$log" 2>&1 || rc=$?
  # 2. Fuzzing from the checked-in seeds and earlier finds; inputs grow up to -max_len.
  if [[ "$rc" -eq 0 ]]; then
    local args=("${common[@]}" -max_total_time="$secs" -print_final_stats=1)
    if [[ -f "$root/fuzz/$name.dict" ]]; then args+=(-dict="$root/fuzz/$name.dict"); fi
    local corpora=("$work")
    if [[ -d "$root/fuzz/corpus/$name" ]]; then corpora+=("$root/fuzz/corpus/$name"); fi
    "$build/fuzz/$target" "${args[@]}" "${corpora[@]}" >>"$log" 2>&1 || rc=$?
  fi
  echo "$rc" >"$log.rc"
}

# $parallel targets at a time (each fuzzes on one core), reported in order once all have ended.
echo "== ${#names[@]} targets, $parallel at a time: generated seeds once, then ${secs}s of fuzzing each"
for name in "${names[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $parallel ]]; do wait -n || true; done
  fuzz_one "$name" &
done
wait

status=0
summary=()
for name in "${names[@]}"; do
  target=fuzz_$name
  log="$build/fuzz-artifacts/$name.log"
  rc=$(cat "$log.rc" 2>/dev/null || echo 1)
  runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$log" | tail -n 1)
  peak=$(sed -n 's/^stat::peak_rss_mb: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  if [[ "$rc" -eq 0 ]]; then
    echo "   $target: ${runs:-? runs}, peak RSS ${peak:-?} MB; corpus: $(ls "$build/fuzz-work/$name" | wc -l) units"
    summary+=("$(printf '%-18s %-26s %s' "$target" "${runs:-?}" "${peak:-?} MB")")
  else
    echo "!! $target FAILED (exit $rc); reproducer in $build/fuzz-artifacts/$name/, log $log"
    tail -n 60 "$log"
    summary+=("$(printf '%-18s %-26s %s' "$target" "FAILED (exit $rc)" "${peak:-?} MB")")
    status=1
  fi
done
echo "== fuzz executions (${secs}s each, inputs up to 1 MiB, -rss_limit_mb=2048)"
printf '   %-18s %-26s %s\n' target executions "peak RSS"
for line in "${summary[@]}"; do echo "   $line"; done
exit $status
