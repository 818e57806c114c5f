// The LFM2.5-Audio detokenizer: 8 audio codes per 80 ms frame → 24 kHz PCM.
//   codes [T, C] → FusedEmbedding (mean of the C = 8 codebook rows) [T, H]
//   → ×6 nearest repeat [6T, H] → LFM2 stack (sliding-window attention)
//   → final norm → lin [6T, 1282] → (log|S|, arg S) → irfft 1280 × Hann
//   → overlap-add / envelope, "same" trim → PCM [1920·T]
// Reference: liquid-audio `LFM2AudioDetokenizer.forward` (spec §8). Shapes (docs/style.md legend):
// T code frames, C codebooks, H the detokenizer's hidden width.
//
// Streaming is the only mode: Step takes a stream's code frames as they arrive
// and writes the PCM that became final straight into the caller's span.
// Decoding a whole turn is the same call with more frames; the results are
// identical bit for bit, whatever the split, and whichever other streams share
// the pass (StepStreams).
//
// Weights / State / Scratch: Lfm25Detokenizer (shared), Lfm25DetokenizerState
// (one per stream), Lfm25DetokenizerScratch (one per worker).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "dsp/istft.h"
#include "io/safetensors.h"
#include "models/lfm25_audio/config.h"
#include "models/lfm25_audio/lfm2_stack.h"
#include "threading/stage_policy.h"

namespace lfmvox {

class ThreadTeam;

// Weights: immutable after Load and shared by every stream.
class Lfm25Detokenizer {
 public:
  // `dir` is the model directory as downloaded (holding audio_detokenizer/)
  // or the audio_detokenizer folder itself, or Liquid's GGUF release (its
  // folder or one of its files; gguf_release.h).
  // check_weights: scan every tensor for NaN/inf first (CheckWeightsFinite).
  static Result<std::unique_ptr<Lfm25Detokenizer>> Load(const std::string& dir, bool check_weights = true);
  // From a parsed config and its weights (`where` names them in errors).
  static Result<std::unique_ptr<Lfm25Detokenizer>> Load(Lfm25DetokenizerConfig config, Checkpoint weights,
                                                        const std::string& where);

  const Lfm25DetokenizerConfig& config() const { return config_; }
  const Lfm2Stack& stack() const { return stack_; }
  const ops::Weight& emb() const { return emb_; }
  const ops::Weight& lin() const { return lin_; }
  const float* lin_bias() const { return lin_bias_.data(); }
  std::span<const float> window() const { return window_.span(); }
  // The samples Flush writes at the end of a stream: (n_fft − hop)/2.
  size_t tail_samples() const { return static_cast<size_t>(config_.n_fft - config_.hop) / 2; }
  // Bytes of weights one decoded frame reads (stack + head), for benchmarks.
  size_t weight_bytes_per_frame() const;

 private:
  std::optional<Checkpoint> ckpt_;  // the mmap'd weights every view below points into
  Lfm25DetokenizerConfig config_;
  Lfm2Stack stack_;
  ops::Weight emb_;                // [num_codebooks·codebook_size, H], BF16 or F32
  ops::Weight lin_;                // [output_size, H]
  AlignedBuffer<float> lin_bias_;  // [output_size]
  AlignedBuffer<float> window_;    // [n_fft], the checkpoint's istft.window
};

class Lfm25DetokenizerState;
class Lfm25DetokenizerScratch;

// One stream's frames for StepStreams: codes [frames, num_codebooks], frame-major; `out` holds
// frames·samples_per_frame() floats. StepStreams sets `written`.
struct Lfm25DetokenizerRequest {
  Lfm25DetokenizerState* state = nullptr;
  std::span<const int32_t> codes;
  std::span<float> out;
  size_t written = 0;
};

// The streaming contract, the same for every stage that streams:
//   Step   takes the next input of a stream and writes the output that became final;
//   Flush  writes what the stream still holds back and leaves the state fresh (as after Reset);
//   Reset  starts a new stream, dropping whatever the old one held.
// State persists between Steps and belongs to the stream; scratch is owned by whoever runs the
// Step (a worker), reused by every stream it runs, and holds nothing between calls.

// Decodes codes [frames, num_codebooks] of one stream and writes the samples that became final to
// `out`, which must hold frames·samples_per_frame() floats. Returns how many were written:
// samples_per_frame() per frame, less tail_samples() on the stream's first frame. More frames than
// one pass takes run in pieces, with identical results. Codes outside [0, codebook_size) and
// mismatched sizes are errors and change nothing.
Result<size_t> Step(const Lfm25Detokenizer& model, Lfm25DetokenizerState& state,
                    std::span<const int32_t> codes, std::span<float> out, Lfm25DetokenizerScratch& scratch,
                    ThreadTeam& team, TraceSink* sink = nullptr);

// Steps several independent streams at once: every stream's rows go through one stack pass (each
// against its own caches), the head runs over all rows in one MatMul, then each stream's iSTFT.
// Each stream's PCM is bit-identical to stepping it alone. Requests with no codes are skipped; a
// state may appear once; at most scratch.max_streams() requests. All requests are validated
// before any state changes.
Status StepStreams(const Lfm25Detokenizer& model, std::span<Lfm25DetokenizerRequest> requests,
                   Lfm25DetokenizerScratch& scratch, ThreadTeam& team, TraceSink* sink = nullptr);

// Writes the stream's last tail_samples() samples (the tail the batch output holds) to `out`,
// which must hold tail_samples(), and resets the state. Returns the count (0 if no frame was
// stepped).
Result<size_t> Flush(const Lfm25Detokenizer& model, Lfm25DetokenizerState& state, std::span<float> out);

// Starts a new stream: the next frame is decoded as by a new state.
void Reset(Lfm25DetokenizerState& state);

// What persists across the frames of one stream (docs/detokenizer_liveness.md).
class Lfm25DetokenizerState {
 public:
  // max_frames_per_call: the most frames of this stream one pass takes (sizes the sliding K/V
  // rings); create the scratch that runs it with at least the same value.
  static Result<Lfm25DetokenizerState> Create(const Lfm25Detokenizer& model, size_t max_frames_per_call = 1);

  void Reset();
  size_t frames() const { return frames_; }  // frames stepped since the stream began
  size_t max_frames_per_call() const { return max_frames_; }
  size_t bytes() const;  // conv histories + K/V rings + overlap-add and envelope

 private:
  friend Status StepStreams(const Lfm25Detokenizer&, std::span<Lfm25DetokenizerRequest>,
                            Lfm25DetokenizerScratch&, ThreadTeam&, TraceSink*);
  friend Result<size_t> Flush(const Lfm25Detokenizer&, Lfm25DetokenizerState&, std::span<float>);

  const Lfm25Detokenizer* model_ = nullptr;
  Lfm2State stack_;            // conv histories, sliding K/V rings, position
  dsp::StreamingIstft istft_;  // overlap-add and envelope rings
  size_t max_frames_ = 0;
  size_t frames_ = 0;
};

// The activations of one call, sized once for max_frames_per_call frames of each of max_streams
// streams and a team of max_threads; owned by whoever runs the step. Holds nothing between calls.
class Lfm25DetokenizerScratch {
 public:
  static Result<Lfm25DetokenizerScratch> Create(const Lfm25Detokenizer& model, size_t max_frames_per_call = 1,
                                                size_t max_streams = 1, int max_threads = 1);

  size_t max_frames_per_call() const { return max_frames_per_call_; }
  size_t max_streams() const { return max_streams_; }
  size_t max_frames() const { return max_frames_per_call_ * max_streams_; }  // over all streams of a pass
  size_t bytes() const;

 private:
  friend Status StepStreams(const Lfm25Detokenizer&, std::span<Lfm25DetokenizerRequest>,
                            Lfm25DetokenizerScratch&, ThreadTeam&, TraceSink*);

  const Lfm25Detokenizer* model_ = nullptr;
  size_t max_frames_per_call_ = 0;
  size_t max_streams_ = 0;
  size_t max_keys_ = 0;
  int max_threads_ = 0;
  Lfm2Scratch stack_;           // the stack's activations for one pass
  AlignedBuffer<float> fused_;  // [F, H], F = max_frames(): FusedEmbedding per frame
  AlignedBuffer<float> x_;      // [F·upsample, H] residual stream
  AlignedBuffer<float> head_;   // [F·upsample, output_size] lin output
  // Per pass, one entry per stream that runs (capacity max_streams, reserved).
  std::vector<Lfm2State*> states_;
  std::vector<size_t> rows_;
  std::vector<size_t> active_;  // the request each entry runs
  std::vector<size_t> take_;    // frames it takes in this pass
  std::vector<size_t> done_;    // per request: frames already stepped in this call
  AdaptiveMode mode_;           // each call in parallel or inline, by measure
};

// One stream with its own scratch: the convenience for a single caller (a file, one
// conversation). Step/Flush/Reset as above.
class Lfm25DetokenizerSession {
 public:
  // max_frames_per_call bounds the frames one pass takes (more are processed in pieces);
  // max_threads the team size used.
  static Result<std::unique_ptr<Lfm25DetokenizerSession>> Create(const Lfm25Detokenizer& model,
                                                                 size_t max_frames_per_call = 1,
                                                                 int max_threads = 1);

  Result<size_t> Step(std::span<const int32_t> codes, std::span<float> out, ThreadTeam& team,
                      TraceSink* sink = nullptr);
  Result<size_t> Flush(std::span<float> out);
  void Reset();

  size_t tail_samples() const { return model_.tail_samples(); }
  size_t frames_decoded() const { return state_.frames(); }
  size_t state_bytes() const { return state_.bytes(); }
  size_t scratch_bytes() const { return scratch_.bytes(); }
  Lfm25DetokenizerState& state() { return state_; }

 private:
  Lfm25DetokenizerSession(const Lfm25Detokenizer& model, Lfm25DetokenizerState state,
                          Lfm25DetokenizerScratch scratch)
      : model_(model), state_(std::move(state)), scratch_(std::move(scratch)) {}

  const Lfm25Detokenizer& model_;
  Lfm25DetokenizerState state_;
  Lfm25DetokenizerScratch scratch_;
};

}  // namespace lfmvox
