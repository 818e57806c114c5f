#!/usr/bin/env bash
# The main job: install the build and runtime packages, build the CLI and the checkpoint tool, and run
# lfmvox on its built-in defaults:
#  1. detokenize the codes in examples/codes.txt with the oracle detokenizer
#     checkpoint in tests/data into out.wav (24 kHz);
#  2. text-to-speech: write a small random LFM2.5-Audio model in the real
#     layout (build/demo-model, steered so that its TTS prompt starts speech)
#     and speak a sentence with it into tts.wav. The weights are random, so
#     the audio is noise-like: this exercises the whole path (tokenizer,
#     backbone, depthformer, streaming detokenizer) end to end;
#  3. speech-to-speech with the same model: the spoken question shipped in
#     tests/data, answered in interleaved text (on the terminal) and speech
#     (s2s.wav).
# Pass a real model directory (or GGUF file) as LFMVOX_MODEL to hear speech.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh --main
lfmvox=./build/apps/cli/lfmvox
"$lfmvox" detokenize --model tests/data/lfm25_detok --codes examples/codes.txt -o out.wav
text="Hello from lfmvox."
model=${LFMVOX_MODEL:-build/demo-model}
if [ -z "${LFMVOX_MODEL:-}" ] && [ ! -f "$model/model.safetensors" ]; then
  ./build/tools/lfmvox-make-checkpoint lfm25-audio --size demo --out "$model" \
    --tokenizer tests/data/tokenizer/tokenizer.json --steer-tts "$text"
fi
"$lfmvox" tts --model "$model" --voice "US female" --max-new 150 --seed 1 "$text" -o tts.wav
"$lfmvox" chat --model "$model" --in tests/data/inputs/question.wav --out s2s.wav --max-new 120 --seed 1
cat <<END

run.sh wrote:
  out.wav   the oracle detokenizer's speech for examples/codes.txt (24 kHz)
  tts.wav   "$text" spoken by $model
  s2s.wav   $model's spoken answer to tests/data/inputs/question.wav
  the CLI is $lfmvox ($lfmvox --help lists its commands)
END
if [ -z "${LFMVOX_MODEL:-}" ]; then
  cat <<END
$model holds random weights (noise-like audio). With a real model, from Hugging Face
(LiquidAI/LFM2.5-Audio-1.5B) or Liquid's GGUF release (LiquidAI/LFM2.5-Audio-1.5B-GGUF):
  LFMVOX_MODEL=/path/to/LFM2.5-Audio-1.5B ./scripts/run.sh
  $lfmvox tts --model /path/to/LFM2.5-Audio-1.5B "Hello." -o hello.wav
  $lfmvox serve --model /path/to/LFM2.5-Audio-1.5B     # OpenAI-compatible HTTP and realtime
    (serve runs build/apps/cli/lfmvox-server, which scripts/build.sh builds: run.sh builds the CLI alone)
END
fi
