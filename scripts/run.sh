#!/usr/bin/env bash
# The main job: install the dependencies, build, and run lfmvox on its
# built-in defaults:
#  1. detokenize the codes in examples/codes.txt with the oracle detokenizer
#     checkpoint in tests/data into out.wav (24 kHz);
#  2. text-to-speech: write a small random LFM2.5-Audio model in the real
#     layout (build/demo-model, steered so that its TTS prompt starts speech)
#     and speak a sentence with it into tts.wav. The weights are random, so
#     the audio is noise-like: this exercises the whole path (tokenizer,
#     backbone, depthformer, streaming detokenizer) end to end;
#  3. speech-to-speech with the same model (below).
# Pass a real model directory as LFMVOX_MODEL to hear speech.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
./build/apps/cli/lfmvox detokenize --model tests/data/lfm25_detok --codes examples/codes.txt -o out.wav
text="Hello from lfmvox."
model=${LFMVOX_MODEL:-build/demo-model}
if [ -z "${LFMVOX_MODEL:-}" ] && [ ! -f "$model/model.safetensors" ]; then
  ./build/tools/lfmvox-make-checkpoint lfm25-audio --size demo --out "$model" \
    --tokenizer tests/data/tokenizer/tokenizer.json --steer-tts "$text"
fi
./build/apps/cli/lfmvox tts --model "$model" --voice "US female" --max-new 150 --seed 1 "$text" -o tts.wav
# 3. speech-to-speech: the spoken question shipped in tests/data, answered in
#    interleaved text and speech (text on the terminal, speech into s2s.wav).
./build/apps/cli/lfmvox chat --model "$model" --in tests/data/inputs/question.wav --out s2s.wav --max-new 120 --seed 1
