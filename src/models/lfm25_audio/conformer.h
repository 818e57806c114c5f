// The LFM2.5-Audio audio encoder (spec §3): NeMo's FastConformer as
// liquid-audio runs it, then the audio adapter that maps its frames to
// backbone embeddings.
//
//   mel [feat_in, M] → dw_striding subsampling ×8 → [T', d], T' = ⌈M/8⌉
//   → n_layers conformer layers (macaron FF, rel-pos MHSA, conv module, FF,
//     LayerNorm) → adapter LayerNorm → Linear → GELU → Linear → [T', H]
//
// Reference: liquid-audio v1.3.0 `model/conformer/{encoder,subsampling,
// modules,mha}.py`, `model/mlp.py`. Inference on one clip: nothing is masked.
//
// Shapes (docs/style.md legend), [rows, cols] row-major: M mel frames, d = d_model,
// Ch subsampling channels, W1/W2/W3 frequency bins after each stride-2 stage,
// T' frames after subsampling, A adapter width, H backbone hidden size.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "base/trace.h"
#include "blocks/linear.h"
#include "blocks/norm.h"
#include "io/safetensors.h"
#include "models/lfm25_audio/config.h"
#include "ops/ops.h"

namespace lfmvox {

class ThreadTeam;

// Weights of one conformer layer (named after NeMo's modules), from the shared blocks.
namespace conformer {

struct Layer {
  LayerNorm norm_ff1, norm_att, norm_conv, norm_ff2, norm_out;  // [d] each
  Linear ff1_in, ff1_out;                                       // [4d, d], [d, 4d]
  Linear ff2_in, ff2_out;
  Linear q, k, v, out;                // [d, d] with bias
  Linear pos;                         // [d, d] `linear_pos`, no bias
  AlignedBuffer<float> pos_bias_u;    // [heads, hd]
  AlignedBuffer<float> pos_bias_v;    // [heads, hd]
  Linear conv_in;                     // [2d, d] pointwise_conv1
  AlignedBuffer<float> conv_dw;       // [d, K] depthwise taps
  AlignedBuffer<float> conv_dw_bias;  // [d]
  AlignedBuffer<float> bn_scale;      // [d] γ / sqrt(running_var + eps)
  AlignedBuffer<float> bn_shift;      // [d] β − running_mean · bn_scale
  Linear conv_out;                    // [d, d] pointwise_conv2
};

}  // namespace conformer

class EncoderScratch;

// Weights of the conformer and the adapter: immutable after Load, shared by
// every session. Matrices point into the checkpoint, which must outlive this.
class AudioEncoder {
 public:
  // config: the parsed `encoder` section (Lfm25AudioConfig::encoder);
  // backbone_hidden is the width of the embeddings the adapter produces.
  // The adapter's inner width is read from `audio_adapter.model.1.weight`.
  static Result<AudioEncoder> Load(const Checkpoint& ckpt, const ConformerConfig& config,
                                   int backbone_hidden);

  // Encodes one clip. mel is [feat_in, M] channels first (as the front end
  // and the traces store it), M ≤ scratch.max_frames(); out receives
  // [⌈M/8⌉, H] adapter embeddings. A longer input, or a team larger than the
  // scratch was sized for, fails before any work. The result does not depend
  // on the team size, bit for bit.
  // Trace names: pre_encode_out [T', d], pos_emb [2T'−1, d], layer{i}_out
  // [T', d], out [T', d] (the conformer output as rows; the reference returns
  // it channels first, [d, T']), adapter_out [T', H].
  // `cancel` (optional) is polled between layers: when set, Encode stops with kCancelled.
  Status Encode(const float* mel, size_t frames, float* out, EncoderScratch& scratch, ThreadTeam& team,
                TraceSink* sink, const std::atomic<bool>* cancel = nullptr) const;

  const ConformerConfig& config() const { return config_; }
  int backbone_hidden() const { return backbone_hidden_; }
  int adapter_hidden() const { return adapter_hidden_; }
  // Bytes of matrix weights one Encode call reads.
  size_t weight_bytes() const;

 private:
  void Subsample(const float* mel, size_t frames, EncoderScratch& s, ThreadTeam& team) const;
  void Attention(const conformer::Layer& L, size_t t, EncoderScratch& s, ThreadTeam& team) const;
  void ConvModule(const conformer::Layer& L, size_t t, EncoderScratch& s, ThreadTeam& team) const;

  ConformerConfig config_;
  int backbone_hidden_ = 0;
  int adapter_hidden_ = 0;
  // Subsampling (`pre_encode.*`): 3×3 taps per channel.
  AlignedBuffer<float> conv0_w_, conv0_b_;  // [Ch, 3·3], [Ch]  from 1 input channel
  AlignedBuffer<float> conv2_w_, conv2_b_;  // [Ch, 3·3], [Ch]  depthwise
  Linear conv3_;                            // [Ch, Ch]         pointwise
  AlignedBuffer<float> conv5_w_, conv5_b_;  // [Ch, 3·3], [Ch]  depthwise
  Linear conv6_;                            // [Ch, Ch]         pointwise
  Linear pre_out_;                          // [d, Ch·W3]       input index c·W3 + f
  std::vector<conformer::Layer> layers_;
  // Adapter (`audio_adapter.model.*`).
  LayerNorm adapter_norm_;  // [d]
  Linear adapter_in_;       // [A, d]
  Linear adapter_out_;      // [H, A]
};

// Activations for inputs of up to max_frames mel frames, sized once; one per
// concurrent Encode call. Also holds the relative positional table.
class EncoderScratch {
 public:
  // max_threads: the largest team Encode will be called with.
  static Result<std::unique_ptr<EncoderScratch>> Create(const AudioEncoder& encoder, size_t max_frames,
                                                        int max_threads);
  ~EncoderScratch();

  size_t max_frames() const { return max_frames_; }
  size_t bytes() const;

 private:
  friend class AudioEncoder;
  EncoderScratch() = default;

  // Subsampled frames per band of the subsampling, and queries per attention
  // task: both bound the scratch, neither changes any result.
  static constexpr size_t kBand = 16;
  static constexpr size_t kQueryBlock = 32;

  size_t max_frames_ = 0;
  size_t max_t_ = 0;  // T' for max_frames
  int max_threads_ = 1;
  // Subsampling, one band of kBand output frames at a time (time rows of
  // each stage, channels last).
  AlignedBuffer<float> s1_;    // [4·kBand + 3, W1, Ch] conv.0 + ReLU
  AlignedBuffer<float> s2_;    // [2·kBand + 1, W2, Ch] conv.2
  AlignedBuffer<float> s2p_;   // [2·kBand + 1, W2, Ch] conv.3 + ReLU
  AlignedBuffer<float> s3_;    // [kBand, W3, Ch]       conv.5
  AlignedBuffer<float> s3p_;   // [kBand, W3, Ch]       conv.6 + ReLU
  AlignedBuffer<float> flat_;  // [kBand, Ch·W3]        channel-major flatten
  // Conformer and adapter.
  AlignedBuffer<float> pe_;    // [2·max_t − 1, d] rows for r = max_t−1 … −(max_t−1)
  AlignedBuffer<float> x_;     // [max_t, d]  residual stream
  AlignedBuffer<float> xn_;    // [max_t, d]  normed input of the current block; the conv module's conv output
  AlignedBuffer<float> tmp_;   // [max_t, d]  block output before the residual add
  AlignedBuffer<float> wide_;  // [max_t, max(4d, 2d, A)]  FF hidden, pointwise_conv1 output, adapter hidden
  AlignedBuffer<float> q_;     // [max_t, d]  q + pos_bias_u
  AlignedBuffer<float> qv_;    // [max_t, d]  q + pos_bias_v
  AlignedBuffer<float> k_;     // [max_t, d]
  AlignedBuffer<float> vt_;    // [d, max_t]  V transposed: per head a [hd, T'] matrix for P·V
  AlignedBuffer<float> p_;     // [2·max_t − 1, d] linear_pos(pe)
  AlignedBuffer<float> att_;   // [max_t, d]  V, then the attention output before linear_out; GLU output
  // Per thread: scores of one block of queries against every key.
  size_t ac_stride_ = 0;     // floats per thread in ac_
  size_t bd_stride_ = 0;     // floats per thread in bd_
  AlignedBuffer<float> ac_;  // [threads, kQueryBlock, max_t]
  AlignedBuffer<float> bd_;  // [threads, kQueryBlock, max_t + kQueryBlock − 1]
  // One-thread teams, one per thread, for the per-head matrix products that
  // run inside the team's tasks (a team of 1 runs inline and starts no thread).
  // A workaround: ops::MatMul always takes a team, and a task must not call
  // back into its own team nor share one team with another thread.
  std::vector<std::unique_ptr<ThreadTeam>> solo_;
};

}  // namespace lfmvox
