// The LFM2.5-Audio detokenizer: 8 audio codes per 80 ms frame → 24 kHz PCM.
//   codes [T, 8] → FusedEmbedding (mean of the 8 codebook rows) [T, H]
//   → ×6 nearest repeat [6T, H] → LFM2 stack (sliding-window attention)
//   → final norm → lin [6T, 1282] → (log|S|, arg S) → irfft 1280 × Hann
//   → overlap-add / envelope, "same" trim → PCM [1920·T]
// Reference: liquid-audio `LFM2AudioDetokenizer.forward` (spec §8).
//
// Streaming is the only mode: a session takes code frames as they arrive and
// writes the PCM that became final straight into the caller's span. Decoding a
// whole turn is the same call with more frames; the results are identical bit
// for bit, whatever the split.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "base/aligned.h"
#include "base/status.h"
#include "dsp/istft.h"
#include "io/safetensors.h"
#include "models/lfm25_audio/config.h"
#include "models/lfm25_audio/lfm2_stack.h"
#include "threading/stage_policy.h"

namespace lfmvox {

class ThreadTeam;

// Weights: immutable after Load and shared by every session.
class Lfm25Detokenizer {
 public:
  // `dir` is the model directory as downloaded (holding audio_detokenizer/)
  // or the audio_detokenizer folder itself.
  static Result<std::unique_ptr<Lfm25Detokenizer>> Load(const std::string& dir);

  const Lfm25DetokenizerConfig& config() const { return config_; }
  const Lfm2Stack& stack() const { return stack_; }
  // Bytes of weights one decoded frame reads (stack + head), for benchmarks.
  size_t weight_bytes_per_frame() const;

 private:
  friend class Lfm25DetokenizerSession;
  std::optional<Checkpoint> ckpt_;  // the mmap'd weights every view below points into
  Lfm25DetokenizerConfig config_;
  Lfm2Stack stack_;
  ops::Weight emb_;                // [num_codebooks·codebook_size, H], BF16 or F32
  ops::Weight lin_;                // [output_size, H]
  AlignedBuffer<float> lin_bias_;  // [output_size]
  AlignedBuffer<float> window_;    // [n_fft], the checkpoint's istft.window
};

// One stream of audio (a conversation turn): all per-stream state, sized once.
class Lfm25DetokenizerSession {
 public:
  // max_frames_per_call bounds the frames one Decode call runs in a single
  // pass (more are processed in pieces); max_threads the team size used.
  static Result<std::unique_ptr<Lfm25DetokenizerSession>> Create(const Lfm25Detokenizer& model,
                                                                 size_t max_frames_per_call = 1,
                                                                 int max_threads = 1);

  // Decodes frame-major codes [frames, num_codebooks] and writes the samples
  // that became final to `out`, which must hold frames·samples_per_frame()
  // floats. Returns how many were written: samples_per_frame() per frame,
  // less (n_fft − hop)/2 on the stream's first frame. Codes outside
  // [0, codebook_size) are an error and change nothing.
  Result<size_t> Decode(std::span<const int32_t> codes, std::span<float> out, ThreadTeam& team,
                        TraceSink* sink = nullptr);

  // Writes the stream's last (n_fft − hop)/2 samples (the tail the batch
  // output holds) and ends the stream: the next Decode starts a new one, as
  // after Reset. `out` must hold tail_samples(). Returns the count (0 if no
  // frame was decoded).
  Result<size_t> Flush(std::span<float> out);
  size_t tail_samples() const;

  // Starts a new stream: the next frame is decoded as if by a new session.
  void Reset();

  size_t frames_decoded() const { return frames_; }
  size_t state_bytes() const;
  size_t scratch_bytes() const;

 private:
  Lfm25DetokenizerSession(const Lfm25Detokenizer& model, Lfm2State state, Lfm2Scratch scratch,
                          size_t max_frames);
  Result<size_t> DecodeChunk(const int32_t* codes, size_t frames, float* out, ThreadTeam& team,
                             TraceSink* sink);

  const Lfm25Detokenizer& model_;
  Lfm2State state_;            // conv histories, sliding K/V rings, position
  dsp::StreamingIstft istft_;  // overlap-add and envelope rings
  size_t max_frames_ = 0;
  size_t frames_ = 0;
  // Scratch.
  Lfm2Scratch stack_scratch_;   // the stack's activations for one call
  AlignedBuffer<float> fused_;  // [max_frames, H]
  AlignedBuffer<float> x_;      // [max_frames·upsample, H] residual stream
  AlignedBuffer<float> head_;   // [max_frames·upsample, output_size]
  AdaptiveMode mode_;           // Decode in parallel or inline (threading/stage_policy.h)
};

}  // namespace lfmvox
