// Token sampling: one rule for text tokens and audio codes, as liquid-audio's
// `_sample_text_token` / `_sample_audio_frame` apply it (spec §6), plus a
// reproducible RNG and an optional repetition penalty (for LFM3's depth
// decoder, whose oracle fixes the draw procedure; see Sampler::Sample).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/aligned.h"
#include "base/status.h"

namespace lfmvox {

struct SamplingParams {
  float temperature = 0;         // ≤ 0: greedy
  int top_k = 0;                 // 0: off; 1: greedy
  float repetition_penalty = 1;  // 1: off; v < 0 ? v·p : v/p on every id in the window
  int penalty_window = 0;        // how many of the latest history ids the penalty looks at

  // The official examples' settings (liquid-audio README and demo, spec §6):
  // text is greedy everywhere (every sampling argument defaults to None).
  static SamplingParams Greedy() { return {}; }
  // TTS / sequential audio: audio_temperature 0.8, audio_top_k 64.
  static SamplingParams Lfm25TtsAudio() { return {0.8f, 64, 1.0f, 0}; }
  // Interleaved speech-to-speech audio: audio_temperature 1.0, audio_top_k 4
  // (llama.cpp uses 0.8 with 4; the spec leaves the choice open).
  static SamplingParams Lfm25InterleavedAudio() { return {1.0f, 4, 1.0f, 0}; }

  // liquid-audio's rule: `temperature is None or temperature <= 0 or top_k == 1`.
  bool greedy() const { return temperature <= 0 || top_k == 1; }
};

// SplitMix64 (the LFM3 depth decoder's generator, cortiq `sampler.rs`): small,
// fast, and fully determined by the seed, so a seeded run is reproducible.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}

  uint64_t NextU64() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) on a 2^-24 grid: the top 24 bits, exact in a float.
  float NextFloat() { return static_cast<float>(NextU64() >> 40) * (1.0f / 16777216.0f); }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

// Picks an index from a row of logits. Holds its scratch (sized once for the
// largest vocabulary it will see), so Sample never allocates; one Sampler per
// stream and thread.
class Sampler {
 public:
  // Validates the parameters; max_vocab bounds the rows Sample accepts.
  static Result<Sampler> Create(const SamplingParams& params, size_t max_vocab);

  const SamplingParams& params() const { return params_; }
  size_t max_vocab() const { return work_.size(); }

  // Returns an index in [0, logits.size()). `history` holds ids emitted before
  // (oldest first); the penalty uses its last penalty_window entries, each
  // distinct id once. Steps:
  //   1. penalty (if not 1) on a copy of the row;
  //   2. greedy: the first maximal index (ops::ArgMax); no random draw;
  //   3. otherwise l/T in f32; with top_k, keep l/T ≥ the k-th largest (ties at
  //      the threshold are kept, as torch's `logits < topk(...).values[-1]`
  //      mask keeps them); weights w = exp(f64(l/T − max)) over the kept ids;
  //      r = f64(rng.NextFloat())·Σw; walk the kept ids in ascending order
  //      subtracting w until r ≤ 0. This is the LFM3 oracle's draw procedure
  //      (the probabilities are softmax(l/T) over the kept ids, as torch's
  //      multinomial draws them, but torch's own random stream cannot be
  //      reproduced, spec §11.5).
  // Fails on NaN or +inf logits in the sampling path, or history ids outside
  // the row.
  Result<int32_t> Sample(std::span<const float> logits, Rng& rng, std::span<const int32_t> history = {});

 private:
  // work_ = logits with the penalty applied; returns the row to use.
  Result<const float*> Penalize(std::span<const float> logits, std::span<const int32_t> history);

  SamplingParams params_;
  AlignedBuffer<float> work_;     // [max_vocab] penalized, then temperature-scaled logits
  AlignedBuffer<float> select_;   // [max_vocab] copy reordered by nth_element to find the k-th largest
  AlignedBuffer<double> weight_;  // [max_vocab] exp weights of the kept ids (0 for the others)
  AlignedBuffer<uint8_t> seen_;  // [max_vocab] marks ids already penalized in this call (all 0 between calls)
};

}  // namespace lfmvox
