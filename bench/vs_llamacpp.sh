#!/usr/bin/env bash
# lfmvox and llama.cpp on the same GGUF backbone files, side by side in one run.
#
#   bench/vs_llamacpp.sh [FILE.gguf ...]
#
# llama.cpp is the anchor in ../shared/anchors/llamacpp (prebuilt CPU libraries from the npm registry,
# driven from C with a persistent thread pool: its `capi` engine); it is a benchmark dependency only.
# Without files, the real-size random LFM2.5-Audio snapshot (bench_lfm25's, written once) is quantized
# with `lfmvox quantize` to F16, Q8_0 and Q4_0 (once each, into $LFMVOX_BENCH_DIR, default /tmp) and each
# release's backbone is benched. Per file, the anchor runs first and bench_backbone right after it (the
# anchor's ALSO_RUN hook), both with pp256 / tg64 and the same token ids. Prints one JSON line per file and
# thread count: {"bench":"backbone_vs_llamacpp","format",...,"decode_ratio","prefill_ratio",...}.
# Env: LFMVOX_BUILD (build folder, default build), LLAMACPP_ANCHOR (the anchor folder), BENCH_THREADS (1,2),
# BENCH_REPS (5); the anchor's own settings (LLAMACPP_ANCHOR_CACHE, BENCH_QUIET_*) pass through.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${LFMVOX_BUILD:-$root/build}
anchor=${LLAMACPP_ANCHOR:-$root/../shared/anchors/llamacpp}
benchdir=${LFMVOX_BENCH_DIR:-/tmp}
threads=${BENCH_THREADS:-1,2}
reps=${BENCH_REPS:-5}
[ -x "$anchor/run.sh" ] || [ -f "$anchor/run.sh" ] || { echo "no llama.cpp anchor at $anchor (set LLAMACPP_ANCHOR)" >&2; exit 1; }
cmake --build "$build" -j2 --target bench_backbone bench_lfm25 lfmvox_cli >&2

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  snap="$benchdir/lfmvox_bench_real"
  # bench_lfm25 writes the random real-size snapshot when it is missing (one decode step is enough).
  [ -f "$snap/model.safetensors" ] || "$build/bench/bench_lfm25" --steps 1 --frames 1 --prompt 8 >&2
  for t in f16 q8_0 q4_0; do
    out="$benchdir/lfmvox_bench_gguf_$t"
    if ! ls "$out"/LFM2.5-Audio-1.5B-*.gguf >/dev/null 2>&1; then
      echo "[vs_llamacpp] lfmvox quantize --type $t -> $out" >&2
      "$build/apps/cli/lfmvox" quantize --model "$snap" --type "$t" --out "$out" >&2
    fi
    files+=("$(ls "$out"/LFM2.5-Audio-1.5B-*.gguf)")
  done
fi

results=$(mktemp)
for f in "${files[@]}"; do
  ours=$(mktemp)
  ENGINES=capi BENCH_THREADS="$threads" BENCH_REPS="$reps" \
    ALSO_RUN="'$build/bench/bench_backbone' --model '$f' --threads $threads --reps $reps > '$ours'" \
    bash "$anchor/run.sh" "$f" >&2
  cat "$ours" >> "$results"
  # The anchor's results file is the newest one in its cache.
  cache=${LLAMACPP_ANCHOR_CACHE:-/tmp/llamacpp-anchor}
  grep '"kind":"result"' "$(ls -t "$cache"/results/*.jsonl | head -1)" >> "$results" || true
  rm -f "$ours"
done

python3 - "$results" <<'EOF'
import json, os, sys
ours, theirs = {}, {}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    j = json.loads(line)
    if j.get("bench") == "backbone":
        ours[(os.path.basename(j["file"]), j["threads"])] = j
    elif j.get("kind") == "result":
        theirs[(os.path.basename(j["file"]), j["threads"])] = j
for key, o in sorted(ours.items()):
    t = theirs.get(key)
    if t is None:
        continue
    floor = o["decode_floor_tok_s"]
    print(json.dumps({
        "bench": "backbone_vs_llamacpp", "file": key[0], "format": o["format"], "head_format": o["head_format"],
        "threads": key[1], "cpu": o["cpu"], "simd": o["simd"],
        "decode_tok_s": o["decode_tok_s"], "llamacpp_decode_tok_s": t["tg_tok_s"],
        "decode_ratio": round(o["decode_tok_s"] / t["tg_tok_s"], 3),
        "prefill_tok_s": o["prefill_tok_s"], "llamacpp_prefill_tok_s": t["pp_tok_s"],
        "prefill_ratio": round(o["prefill_tok_s"] / t["pp_tok_s"], 3),
        "read_gb_s": o["read_gb_s"], "floor_fraction": o["floor_fraction"],
        "llamacpp_floor_fraction": round(t["tg_tok_s"] / floor, 3),
        "llamacpp_backend": t.get("cpu_backend_variant"), "llamacpp_clean": [t["pp_clean"], t["tg_clean"]],
    }))
EOF
rm -f "$results"
