// Small vocabulary types shared by the public API and the engine.
#pragma once

namespace lfmvox {

// The largest thread count any API takes (a sanity bound on user input, far above any real machine).
inline constexpr int kMaxThreads = 256;

enum class GenerationMode {
  kSequential,   // ASR, TTS, text chat: text, or <|audio_start|> then speech
  kInterleaved,  // speech-to-speech: slots of text tokens and audio frames
};

// Where a generation's time went: wall-clock milliseconds per stage, measured by the library (steady
// clock) and printed by nobody but the caller (`lfmvox ... --verbose`). In a batched step (Engine::Step
// over several conversations) a pass the conversations share is charged whole to each of them. A family
// that does not have a stage leaves it 0 (LFM3-Audio has no encoder: it takes no speech in).
struct StageTimings {
  double encoder_ms = 0;        // audio in: log-mel and the audio encoder (AddAudio), since the last report
  double prefill_ms = 0;        // backbone passes over prompt positions (more than one new position)
  double backbone_step_ms = 0;  // backbone passes over one position, and the text head
  double depth_ms = 0;          // the depth head: sampling each audio frame's codebooks
  double detokenizer_ms = 0;    // codes -> PCM
  int prefill_positions = 0;    // positions the prefill passes fed
  int backbone_steps = 0;       // one-position passes
  int depth_frames = 0;         // audio frames sampled

  double total_ms() const { return encoder_ms + prefill_ms + backbone_step_ms + depth_ms + detokenizer_ms; }
  StageTimings& operator+=(const StageTimings& o) {
    encoder_ms += o.encoder_ms;
    prefill_ms += o.prefill_ms;
    backbone_step_ms += o.backbone_step_ms;
    depth_ms += o.depth_ms;
    detokenizer_ms += o.detokenizer_ms;
    prefill_positions += o.prefill_positions;
    backbone_steps += o.backbone_steps;
    depth_frames += o.depth_frames;
    return *this;
  }
};

}  // namespace lfmvox
