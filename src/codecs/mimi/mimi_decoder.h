// Kyutai's Mimi decoder (the codec of LFM2-Audio-1.5B and the Moshi family): 8 codes per 80 ms frame →
// 24 kHz PCM, 1920 samples per frame. Spec GGUF_AND_MIMI.md part 2; the oracle `mimi_real` (its README).
//   codes [T, C] → split RVQ: W_first·E_first[c0] + W_rest·Σ_{k≥1} E_rest,k−1[c_k]   latent [T, H]
//   → upsample: causal depthwise ConvTranspose1d (k 2s, stride s = 2)                 [2T, H]
//   → decoder transformer: causal, context 250, RoPE on interleaved pairs, LayerNorm, layer scales, GELU
//   → SEANet decoder: conv k7 → per ratio (ELU, ConvTranspose1d, ResBlock) → ELU → conv k3   PCM [1920·T]
// Shapes (docs/style.md legend): T code frames, C codebooks, H the latent/transformer width (512); L = 2T
// latent steps; rows are time-major ([time, channels]) everywhere, where the oracle's conv layout is
// [channels, time].
//
// The streaming contract (docs/style.md): Step / Flush / Reset; there is no look-ahead, so every frame's
// 1920 samples are final when it is stepped and Flush writes nothing. Splitting the input differently never
// changes the output, bit for bit. Attention is where the official code's streaming and batch decodes part
// (oracle README): moshi's streaming writes a frame's 2 keys into a ring of `context` keys before its queries
// attend, so from latent step `context` on the first query of a frame sees one key less than the batch mask
// gives it. MimiWindow picks which of the two this decoder reproduces; both are frame-split invariant.
// Weights / State / Scratch: MimiDecoder (shared), MimiState (one per stream), MimiScratch (one per worker).
// What persists, and why: docs/mimi_liveness.md.
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
#include "blocks/conv1d.h"
#include "blocks/norm.h"
#include "codecs/mimi/mimi_config.h"
#include "io/safetensors.h"
#include "ops/ops.h"

namespace lfmvox {

class ThreadTeam;
class MimiState;
class MimiScratch;

// Kyutai's released file name (LFM2-Audio-1.5B's snapshot carries it at its root).
inline constexpr const char* kMimiCheckpointName = "tokenizer-e351c8d8-checkpoint125.safetensors";

// The most frames one call decodes in a pass (a state's and a scratch's max_frames_per_call): 20 s, whose
// activations at the real size are about 0.5 GB (1.9 MB per frame); a call with more frames runs in pieces.
inline constexpr size_t kMaxFramesPerCall = 256;

// Which official decode the attention reproduces.
enum class MimiWindow {
  // `with mimi.streaming(1): mimi.decode(frame)` one frame at a time (LFM2-Audio's demo): query p of frame f
  // sees keys max(p − context + 1, (f + 1)·s − context) … p, s latent steps per frame.
  kStreaming,
  // `mimi.decode(codes)` of a whole utterance: keys max(p − context + 1, 0) … p.
  kBatch,
};

// Weights: immutable after Load and shared by every stream.
class MimiDecoder {
 public:
  // `path`: Kyutai's checkpoint file (.safetensors, encoder tensors and all; only the decoder side is read),
  // or a folder holding it as kMimiCheckpointName (an LFM2-Audio-1.5B snapshot), or a folder with a flat Mimi
  // config.json and model.safetensors (the oracle layout). A config.json that does not describe Mimi (the
  // snapshot's language model) is ignored; without one the configuration is get_mimi's, with the layer count
  // and widths read from the tensors. check_weights: scan every tensor of the file for NaN/inf first
  // (CheckWeightsFinite).
  static Result<std::unique_ptr<MimiDecoder>> Load(const std::string& path, bool check_weights = true);
  // Whether `path` looks like something Load takes (cheap: file names and config.json only).
  static bool Recognizes(const std::string& path);
  // From a config (nullopt: get_mimi's defaults with the sizes from the tensors) and the checkpoint.
  static Result<std::unique_ptr<MimiDecoder>> Load(std::optional<MimiConfig> config, Checkpoint weights,
                                                   const std::string& where);

  const MimiConfig& config() const { return config_; }
  size_t codebooks() const { return static_cast<size_t>(config_.num_codebooks); }
  size_t codebook_size() const { return static_cast<size_t>(config_.codebook_size); }
  size_t samples_per_frame() const { return static_cast<size_t>(config_.samples_per_frame()); }
  size_t steps_per_frame() const { return static_cast<size_t>(config_.upsample_stride); }
  // Multiply-adds of one frame (matrix products, convolutions, attention against a full context).
  double macs_per_frame() const;
  // Bytes of weights one frame reads.
  size_t weight_bytes() const;

  struct Layer {  // decoder_transformer.transformer.layers.{i}
    LayerNorm norm1, norm2;
    ops::PackedWeight in_proj;      // [3H, H] rows q | k | v, each heads × hd
    ops::PackedWeight out_proj;     // [H, H]
    ops::PackedWeight linear1;      // [F, H]
    ops::PackedWeight linear2;      // [H, F]
    AlignedBuffer<float> ls1, ls2;  // [H] layer_scale_{1,2}.scale
  };
  struct Stage {               // decoder.model.{3i+2} and .{3i+3}
    CausalConvTranspose1d up;  // Ch → Ch/2, k 2r, stride r
    CausalConv1d res1;         // block.1: Ch/2 → Ch/2/compress, residual kernel
    CausalConv1d res2;         // block.3: → Ch/2, k 1
  };

 private:
  friend class MimiState;
  friend class MimiScratch;
  friend Result<size_t> MimiStep(const MimiDecoder&, MimiState&, std::span<const int32_t>, std::span<float>,
                                 MimiScratch&, ThreadTeam&, TraceSink*);
  MimiDecoder() = default;

  std::optional<Checkpoint> ckpt_;  // the mmap'd weights the views point into
  MimiConfig config_;
  AlignedBuffer<float> codebooks_;  // [C, V, codebook_dim]: embedding_sum / max(cluster_usage, ε)
  ops::Weight proj_first_;          // [H, codebook_dim] quantizer.rvq_first.output_proj
  ops::Weight proj_rest_;           // [H, codebook_dim] quantizer.rvq_rest.output_proj
  AlignedBuffer<float> upsample_;   // [H, k] depthwise ConvTranspose1d taps
  std::vector<Layer> layers_;
  AlignedBuffer<float> inv_freq_;  // [hd/2] exp(−ln(max_period)·2m/hd), in f32 as moshi's rope
  CausalConv1d conv_in_;           // decoder.model.0
  std::vector<Stage> stages_;
  CausalConv1d conv_out_;  // decoder.model.{last}
};

// What persists across the frames of one stream (docs/mimi_liveness.md).
class MimiState {
 public:
  // max_frames_per_call sizes the K/V buffers (more frames in a call are run in pieces); create the scratch
  // with at least the same value.
  static Result<MimiState> Create(const MimiDecoder& model, size_t max_frames_per_call = 1,
                                  MimiWindow window = MimiWindow::kStreaming);

  void Reset();
  size_t frames() const { return frames_; }
  int64_t position() const { return pos_; }  // latent steps since the stream began
  MimiWindow window() const { return window_; }
  size_t max_frames_per_call() const { return max_frames_; }
  // Bytes that carry information between frames (conv histories, the last context − 1 keys and values).
  size_t live_bytes() const;
  size_t bytes() const;  // as allocated (the K/V buffers also hold one call's rows)

 private:
  friend Result<size_t> MimiStep(const MimiDecoder&, MimiState&, std::span<const int32_t>, std::span<float>,
                                 MimiScratch&, ThreadTeam&, TraceSink*);
  const MimiDecoder* model_ = nullptr;
  MimiWindow window_ = MimiWindow::kStreaming;
  size_t max_frames_ = 0;
  size_t frames_ = 0;
  int64_t pos_ = 0;
  AlignedBuffer<float> up_hist_;  // [1, H] the last latent row
  // Per layer [context − 1 + 2·max_frames + ⌈context / 2⌉, H]: rows [kv_start_, kv_start_ + kv_len_) hold
  // positions pos_ − kv_len_ … pos_ − 1. A call appends its rows after them; only when they would not fit
  // are the held rows moved to the front (once in ⌈context / 2⌉ / (2·frames) calls, not every call: moving
  // 8 × 2 × 498 KiB a call cost 0.3 ms a frame at 1 frame a call on one core of this Xeon).
  std::vector<AlignedBuffer<float>> k_, v_;
  size_t kv_start_ = 0;
  size_t kv_len_ = 0;
  std::vector<AlignedBuffer<float>> conv_hist_;  // per conv with history: [history_rows, in]
};

// The activations of one call, sized once; owned by whoever runs the step. Holds nothing between calls.
class MimiScratch {
 public:
  static Result<MimiScratch> Create(const MimiDecoder& model, size_t max_frames_per_call = 1,
                                    int max_threads = 1);
  size_t max_frames_per_call() const { return max_frames_; }
  size_t bytes() const;

 private:
  friend Result<size_t> MimiStep(const MimiDecoder&, MimiState&, std::span<const int32_t>, std::span<float>,
                                 MimiScratch&, ThreadTeam&, TraceSink*);
  const MimiDecoder* model_ = nullptr;
  size_t max_frames_ = 0;
  int max_threads_ = 0;
  AlignedBuffer<float> sum_;               // [Tp, codebook_dim] codebook rows summed
  AlignedBuffer<float> latent_;            // [Tp, H] (the semantic part, then the whole latent)
  AlignedBuffer<float> acoustic_;          // [Tp, H]
  AlignedBuffer<float> x_;                 // [L, H] residual stream
  AlignedBuffer<float> xn_;                // [L, H]
  AlignedBuffer<float> qkv_;               // [L, 3H]
  AlignedBuffer<float> att_;               // [L, H]
  AlignedBuffer<float> tmp_;               // [L, H]
  AlignedBuffer<float> ff_;                // [L, F]
  AlignedBuffer<float> scores_;            // [threads, context]
  std::vector<AlignedBuffer<float>> win_;  // per conv with history: [history_rows + rows, in]
  std::vector<AlignedBuffer<float>>
      act_;                  // per SEANet stage: its output [rows, Ch/2], and the hidden [rows, Ch/4]
  AlignedBuffer<float> h0_;  // [L, 2^stages·n_filters] decoder.model.0 output
};

// Decodes codes [frames, C] (frame-major) of one stream into `out`, which must hold
// frames·samples_per_frame() floats; returns the samples written (all of them: nothing is held back).
// Codes outside [0, codebook_size) and mismatched sizes are errors and change nothing. Traces (sink), per
// piece of at most max_frames_per_call frames, time-major: latent_semantic, latent_acoustic, latent,
// upsample, transformer/layer{i}, transformer/out, seanet/model.{i} (the first conv, each transposed conv
// and each residual block).
Result<size_t> MimiStep(const MimiDecoder& model, MimiState& state, std::span<const int32_t> codes,
                        std::span<float> out, MimiScratch& scratch, ThreadTeam& team,
                        TraceSink* sink = nullptr);
// Nothing is held back (no look-ahead): resets the state and returns 0.
Result<size_t> MimiFlush(MimiState& state, std::span<float> out);
void MimiReset(MimiState& state);

// One stream with its own scratch, for a single caller.
class MimiSession {
 public:
  static Result<std::unique_ptr<MimiSession>> Create(const MimiDecoder& model, size_t max_frames_per_call = 1,
                                                     int max_threads = 1,
                                                     MimiWindow window = MimiWindow::kStreaming);
  Result<size_t> Step(std::span<const int32_t> codes, std::span<float> out, ThreadTeam& team,
                      TraceSink* sink = nullptr) {
    return MimiStep(model_, state_, codes, out, scratch_, team, sink);
  }
  Result<size_t> Flush(std::span<float> out) { return MimiFlush(state_, out); }
  void Reset() { MimiReset(state_); }
  MimiState& state() { return state_; }
  size_t scratch_bytes() const { return scratch_.bytes(); }

 private:
  MimiSession(const MimiDecoder& model, MimiState state, MimiScratch scratch)
      : model_(model), state_(std::move(state)), scratch_(std::move(scratch)) {}
  const MimiDecoder& model_;
  MimiState state_;
  MimiScratch scratch_;
};

}  // namespace lfmvox
