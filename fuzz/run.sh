#!/usr/bin/env bash
# Builds the libFuzzer targets (incrementally) and runs each for a bounded time.
#   fuzz/run.sh SECONDS        e.g. fuzz/run.sh 60 (what CI runs)
# Environment: LFMVOX_FUZZ_BUILD_DIR (default <repo>/build-fuzz), LFMVOX_FUZZ_JOBS (build jobs, default 2).
# Exits non-zero if any target finds a crash, leak, timeout or out-of-memory; the reproducer is left in
# <build>/fuzz-artifacts/<target>/ and the log tail is printed. New corpus units go to <build>/fuzz-work/,
# never into the checked-in seeds in fuzz/corpus/.
set -euo pipefail

secs=${1:?usage: fuzz/run.sh SECONDS}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LFMVOX_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${LFMVOX_FUZZ_JOBS:-2}
targets=(fuzz_safetensors fuzz_gguf fuzz_codes fuzz_npy fuzz_tokenizer fuzz_audio fuzz_config)

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLFMVOX_BUILD_FUZZ=ON -DLFMVOX_BUILD_TESTS=OFF -DLFMVOX_BUILD_BENCH=OFF
fi
cmake --build "$build" -j"$jobs" --target "${targets[@]}"

status=0
for target in "${targets[@]}"; do
  name=${target#fuzz_}
  work="$build/fuzz-work/$name"
  artifacts="$build/fuzz-artifacts/$name"
  log="$build/fuzz-artifacts/$name.log"
  mkdir -p "$work" "$artifacts"
  args=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1
        -artifact_prefix="$artifacts/")
  if [[ -f "$root/fuzz/$name.dict" ]]; then args+=(-dict="$root/fuzz/$name.dict"); fi
  echo "== $target: ${secs}s"
  if "$build/fuzz/$target" "${args[@]}" "$work" "$root/fuzz/corpus/$name" >"$log" 2>&1; then
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" | sed 's/^/   /' || true
    echo "   corpus: $(ls "$work" | wc -l) units in $work"
  else
    echo "!! $target FAILED (exit $?); reproducer in $artifacts/, log $log"
    tail -n 60 "$log"
    status=1
  fi
done
exit $status
