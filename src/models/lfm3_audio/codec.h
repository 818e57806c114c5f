// LiquidCodec's decoder (LFM3-Audio speech output): 12 codes per 80 ms frame → 24 kHz PCM.
//   codes [T, C] → FSQ digits → latents [T, C·4]   (position 4i+j = (⌊c_i/b_j⌋ mod L_j − ⌊L_j/2⌋)/⌊L_j/2⌋)
//   → quantizer.project_out [T, Qd] → from_quantizer [T, H] → ×frame_stack repeat [6T, H]
//   → causal LFM3 stack (window 30; RoPE position = STFT row index from the start of the stream)
//   → final norm → decoder.lin [6T, 1282] → (log|S|, arg S) → irfft 1280 × window
//   → overlap-add / envelope, "same" trim 480 → PCM [1920·T]
// Reference: the seed's `Codec::decode` (lfm3_speech.rs) and the oracle README "LFM3-Audio speech
// output" (its decisions 2–5, 8, 9). The seed decodes a whole utterance statelessly from position 0;
// this decoder streams it, with the same PCM: conv histories, the K/V rings (window − 1 rows per
// attention layer), the position and the overlap-add buffers persist across frames
// (docs/lfm3_codec_liveness.md). The spectrum-to-PCM part runs in f32 (dsp::StreamingIstft), not in the
// seed's f64; the oracle bounds that at k = 1e-4.
// Shapes (docs/style.md legend): T code frames, C codebooks, H the codec's hidden width; Qd the
// quantizer width (`quantizer_dim`), L the latent width C·|fsq_levels|.
//
// The streaming contract (docs/style.md): Step / Flush / Reset; splitting the input differently never
// changes the output, bit for bit; one frame allocates nothing once warm.
// Weights / State / Scratch: Lfm3Codec (shared), Lfm3CodecState (one per stream), Lfm3CodecScratch (one
// per worker).
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
#include "base/trace.h"
#include "blocks/linear.h"
#include "dsp/istft.h"
#include "io/safetensors.h"
#include "models/lfm3_audio/lfm3_config.h"
#include "models/lfm3_audio/lfm3_stack.h"

namespace lfmvox {

class ThreadTeam;

// Weights: immutable after Load and shared by every stream.
class Lfm3Codec {
 public:
  // `dir` holds config.json (the oracle's flat LFM3 config, lfm3_config.h) and model.safetensors with
  // the codec under `codec.` (the seed's names); a path to config.json's folder or the file itself.
  // `matrices`: convert the matrices at load time to this format (F16, BF16, Q8_0, Q4_0; those whose rows
  // are not whole blocks, such as project_out's 48 columns, stay as stored); none: use them as stored.
  // check_weights: scan every tensor for NaN/inf first (CheckWeightsFinite).
  static Result<std::unique_ptr<Lfm3Codec>> Load(const std::string& dir,
                                                 std::optional<WeightFormat> matrices = std::nullopt,
                                                 bool check_weights = true);
  // From a parsed config and its weights; `prefix` is the codec's tensor prefix ("codec." in the seed's
  // layout); `where` names the files in errors.
  static Result<std::unique_ptr<Lfm3Codec>> Load(const Lfm3Config& config, Checkpoint weights,
                                                 const std::string& where,
                                                 const std::string& prefix = "codec.",
                                                 std::optional<WeightFormat> matrices = std::nullopt);

  const Lfm3CodecConfig& config() const { return config_; }
  int audio_eos() const { return audio_eos_; }
  const Lfm3Stack& stack() const { return stack_; }
  const Linear& project_out() const { return project_out_; }
  const Linear& from_quantizer() const { return from_quantizer_; }
  const Linear& lin() const { return lin_; }
  std::span<const float> window() const { return window_.span(); }
  size_t codebooks() const { return static_cast<size_t>(config_.n_q); }
  size_t samples_per_frame() const { return static_cast<size_t>(config_.frame_samples); }
  // The samples Flush writes at the end of a stream: (n_fft − hop)/2.
  size_t tail_samples() const { return static_cast<size_t>(config_.n_fft - config_.hop) / 2; }
  // Bytes of matrix weights one decoded frame reads (front, stack, head), for benchmarks.
  size_t weight_bytes_per_frame() const;

 private:
  Lfm3Codec() = default;
  std::optional<Checkpoint> ckpt_;               // the mmap'd weights every view below points into
  std::vector<std::vector<uint8_t>> converted_;  // matrices converted at load time (Load's `matrices`)
  Lfm3CodecConfig config_;
  int audio_eos_ = 0;
  Lfm3Stack stack_;
  Linear project_out_;           // [Qd, L] + bias
  Linear from_quantizer_;        // [H, Qd] + bias
  Linear lin_;                   // [n_fft + 2, H] + bias
  AlignedBuffer<float> window_;  // [n_fft], the checkpoint's decoder.istft.window
};

class Lfm3CodecState;
class Lfm3CodecScratch;

// One stream's frames for StepStreams: codes [frames, C], frame-major; `out` holds
// frames·samples_per_frame() floats. StepStreams sets `written`.
struct Lfm3CodecRequest {
  Lfm3CodecState* state = nullptr;
  std::span<const int32_t> codes;
  std::span<float> out;
  size_t written = 0;
};

// Decodes codes [frames, C] of one stream and writes the samples that became final to `out`, which
// must hold frames·samples_per_frame() floats. Returns how many were written: samples_per_frame() per
// frame, less tail_samples() on the stream's first frame. More frames than one pass takes run in
// pieces, with identical results. A code outside [0, num_codes) — the end-of-audio code included, which
// is never decoded — and mismatched sizes are errors and change nothing.
Result<size_t> Step(const Lfm3Codec& model, Lfm3CodecState& state, std::span<const int32_t> codes,
                    std::span<float> out, Lfm3CodecScratch& scratch, ThreadTeam& team,
                    TraceSink* sink = nullptr);

// Steps several independent streams at once: every stream's rows go through one stack pass (each
// against its own state), the matrices run over all rows at once, then each stream's ISTFT. Each
// stream's PCM is bit-identical to stepping it alone. Requests with no codes are skipped; a state may
// appear once; at most scratch.max_streams() requests. Every request is validated before any state
// changes. Traces (sink): fsq_latents, project_out, from_quantizer, stacked, layer{i}_out, final_norm,
// lin_out, per pass over the pass's rows.
Status StepStreams(const Lfm3Codec& model, std::span<Lfm3CodecRequest> requests, Lfm3CodecScratch& scratch,
                   ThreadTeam& team, TraceSink* sink = nullptr);

// Writes the stream's last tail_samples() samples to `out` (which must hold tail_samples()) and leaves
// the state fresh. Returns the count (0 if no frame was stepped).
Result<size_t> Flush(const Lfm3Codec& model, Lfm3CodecState& state, std::span<float> out);

// Starts a new stream: the next frame is decoded as by a new state; nothing is written.
void Reset(Lfm3CodecState& state);

// What persists across the frames of one stream (docs/lfm3_codec_liveness.md).
class Lfm3CodecState {
 public:
  // max_frames_per_call: the most frames of this stream one pass takes (sizes the K/V rings); create
  // the scratch that runs it with at least the same value.
  static Result<Lfm3CodecState> Create(const Lfm3Codec& model, size_t max_frames_per_call = 1);

  void Reset();
  size_t frames() const { return frames_; }  // frames stepped since the stream began
  size_t max_frames_per_call() const { return max_frames_; }
  int64_t position() const { return stack_.position(); }  // STFT rows since the stream began
  // Bytes that carry information from one frame to the next: conv histories, the window − 1 K/V rows
  // of each attention layer, the overlap-add and envelope buffers.
  size_t live_bytes() const;
  // Bytes as allocated (the K/V buffers also hold one call's rows).
  size_t bytes() const;

 private:
  friend Status StepStreams(const Lfm3Codec&, std::span<Lfm3CodecRequest>, Lfm3CodecScratch&, ThreadTeam&,
                            TraceSink*);
  friend Result<size_t> Flush(const Lfm3Codec&, Lfm3CodecState&, std::span<float>);

  const Lfm3Codec* model_ = nullptr;
  Lfm3State stack_;            // conv histories, K/V rings, position
  dsp::StreamingIstft istft_;  // overlap-add and envelope
  size_t max_frames_ = 0;
  size_t frames_ = 0;
};

// The activations of one call, sized once for max_frames_per_call frames of each of max_streams streams
// and a team of max_threads; owned by whoever runs the step. Holds nothing between calls.
class Lfm3CodecScratch {
 public:
  static Result<Lfm3CodecScratch> Create(const Lfm3Codec& model, size_t max_frames_per_call = 1,
                                         size_t max_streams = 1, int max_threads = 1);

  size_t max_frames_per_call() const { return max_frames_per_call_; }
  size_t max_streams() const { return max_streams_; }
  size_t max_frames() const { return max_frames_per_call_ * max_streams_; }  // over all streams of a pass
  size_t bytes() const;

 private:
  friend Status StepStreams(const Lfm3Codec&, std::span<Lfm3CodecRequest>, Lfm3CodecScratch&, ThreadTeam&,
                            TraceSink*);

  const Lfm3Codec* model_ = nullptr;
  size_t max_frames_per_call_ = 0;
  size_t max_streams_ = 0;
  size_t max_keys_ = 0;
  int max_threads_ = 0;
  Lfm3Scratch stack_;            // the stack's activations for one pass
  AlignedBuffer<float> latent_;  // [Tp, L]  FSQ latents, Tp = max_frames()
  AlignedBuffer<float> quant_;   // [Tp, Qd] project_out
  AlignedBuffer<float> emb_;     // [Tp, H]  from_quantizer
  AlignedBuffer<float> x_;       // [Tp·frame_stack, H] residual stream
  AlignedBuffer<float> head_;    // [Tp·frame_stack, n_fft + 2] lin output
  // Per pass, one entry per stream that runs (capacity max_streams, reserved).
  std::vector<Lfm3State*> states_;
  std::vector<size_t> rows_;
  std::vector<size_t> active_;  // the request each entry runs
  std::vector<size_t> take_;    // frames it takes in this pass
  std::vector<size_t> done_;    // per request: frames already stepped in this call
};

// One stream with its own scratch: the convenience for a single caller. Step/Flush/Reset as above.
class Lfm3CodecSession {
 public:
  static Result<std::unique_ptr<Lfm3CodecSession>> Create(const Lfm3Codec& model,
                                                          size_t max_frames_per_call = 1,
                                                          int max_threads = 1);

  Result<size_t> Step(std::span<const int32_t> codes, std::span<float> out, ThreadTeam& team,
                      TraceSink* sink = nullptr);
  Result<size_t> Flush(std::span<float> out);
  void Reset();

  size_t tail_samples() const { return model_.tail_samples(); }
  size_t frames_decoded() const { return state_.frames(); }
  Lfm3CodecState& state() { return state_; }
  size_t scratch_bytes() const { return scratch_.bytes(); }

 private:
  Lfm3CodecSession(const Lfm3Codec& model, Lfm3CodecState state, Lfm3CodecScratch scratch)
      : model_(model), state_(std::move(state)), scratch_(std::move(scratch)) {}

  const Lfm3Codec& model_;
  Lfm3CodecState state_;
  Lfm3CodecScratch scratch_;
};

}  // namespace lfmvox
