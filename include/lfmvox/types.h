// Small vocabulary types shared by the public API and the engine.
#pragma once

namespace lfmvox {

// The largest thread count any API takes (a sanity bound on user input, far above any real machine).
inline constexpr int kMaxThreads = 256;

enum class GenerationMode {
  kSequential,   // ASR, TTS, text chat: text, or <|audio_start|> then speech
  kInterleaved,  // speech-to-speech: slots of text tokens and audio frames
};

}  // namespace lfmvox
