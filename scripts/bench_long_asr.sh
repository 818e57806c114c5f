#!/usr/bin/env bash
# Long-form ASR memory benchmark: speaks a text with espeak-ng (Debian package espeak-ng, a
# bench-only tool) for each length in MINUTES, transcribes it with build/bench/bench_transcribe and prints
# one JSON line per length (peak RSS, peak buffered samples, segments). The peak RSS should not grow with
# the length. Usage:
#   scripts/bench_long_asr.sh [MODEL_DIR] [MINUTES...]     (defaults: tests/data/lfm25_tiny, 5 20 60)
# With the oracle checkpoint (tests/data/lfm25_*), whose vocabulary lacks the official ASR prompt's ids,
# the oracle's speech prompt (traces/prefill_speech__text_ids, __modality_flag) is used instead.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-tests/data/lfm25_tiny}
shift || true
minutes=("$@")
[ ${#minutes[@]} -eq 0 ] && minutes=(5 20 60)
command -v espeak-ng >/dev/null || { echo "needs espeak-ng (apt-get install espeak-ng)" >&2; exit 1; }
bench=build/bench/bench_transcribe
[ -x "$bench" ] || { echo "build bench_transcribe first (cmake --build build --target bench_transcribe)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

prompt=()
if [ -f "$model/traces/prefill_speech__text_ids.npy" ]; then
  read -r before after < <(python3 - "$model/traces" <<'PY'
import struct, sys
def npy(p):
    b = open(p, "rb").read()
    n = struct.unpack("<H", b[8:10])[0]
    d = b[10 + n:]
    return list(struct.unpack("<%dq" % (len(d) // 8), d))
t = npy(sys.argv[1] + "/prefill_speech__text_ids.npy")
f = npy(sys.argv[1] + "/prefill_speech__modality_flag.npy")
cut = f.index(2)
n_before = sum(1 for x in f[:cut] if x == 1)
print(",".join(map(str, t[:n_before])), ",".join(map(str, t[n_before:])))
PY
)
  prompt=(--before "$before" --after "$after")
fi

# About one minute of speech per paragraph repetition at espeak-ng's default 175 words per minute.
para="The quarterly meeting opened with a review of the budget. Sales rose in the north and fell in the \
south, and the committee asked for a plan by the end of the month. After a short pause, the chair moved \
on to hiring, travel, and the new office. Everyone agreed to meet again next week."
for m in "${minutes[@]}"; do
  text="$tmp/text_$m.txt"
  : >"$text"
  # espeak-ng speaks ~50 words in ~17 s; repeat until the target length.
  for ((i = 0; i < m * 4; ++i)); do echo "$para" >>"$text"; done
  wav="$tmp/speech_$m.wav"
  espeak-ng -f "$text" -w "$wav"
  "$bench" "$model" "$wav" --max-new 4 --max-seconds 7200 "${prompt[@]}" | sed "s/^{/{\"minutes_requested\":$m,/"
  rm -f "$wav"
done
