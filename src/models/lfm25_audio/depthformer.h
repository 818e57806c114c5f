// The LFM2.5-Audio depthformer (spec §7; liquid-audio `_sample_audio_frame`):
// a small RQ-transformer that turns one backbone hidden state into one audio
// frame of num_codebooks codes, codebook by codebook.
//   D   = depth_linear(h) + bias                       [C, dim]
//   x_0 = D[0];  x_k = D[k] + depth_embeddings[k-1].embedding[c_{k-1}]
//   out_k = Stack(x_k) at position k, K/V cached over 0..k (reset per frame)
//   logits_k = to_logits_k · RMSNorm(out_k, depth_embeddings[k].embedding_norm)
//   c_k = sample(logits_k)
// Stack: `layers` StandardBlocks with no stack norm,
//   h = x + out_proj(Attn(RMSNorm_op(x))),  out = h + w2(silu(w1 y) ⊙ w3 y), y = RMSNorm_ffn(h);
// attention: qkv_proj rows [Q | K | V], per-head RMSNorm on q and k, then
// interleaved-pair RoPE (position = codebook index), GQA, scale 1/√hd.
//
// Depthformer holds the weights (immutable, shared); DepthformerState one
// session's K/V cache and scratch, sized once. Shapes: C = codebooks,
// D = dim, H = backbone hidden, hd = head dim, Q = heads·hd, KV = kv_heads·hd,
// F = ffn, V = codebook_vocab.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "blocks/sampling.h"
#include "io/safetensors.h"
#include "models/lfm25_audio/config.h"
#include "models/lfm25_audio/lfm2_stack.h"
#include "ops/ops.h"

namespace lfmvox {

class ThreadTeam;
class DepthformerState;

struct DepthformerLayer {
  AlignedBuffer<float> operator_norm;  // [D]
  AlignedBuffer<float> ffn_norm;       // [D]
  ops::Weight qkv_proj;                // [Q + 2KV, D]  rows Q | K | V
  ops::Weight out_proj;                // [D, Q]
  AlignedBuffer<float> q_norm;         // [hd]
  AlignedBuffer<float> k_norm;         // [hd]
  ops::Weight w1;                      // [F, D] gate
  ops::Weight w3;                      // [F, D] up
  ops::Weight w2;                      // [D, F] down
};

struct DepthCodebook {
  ops::Weight embedding;      // [V, D] input rows for the next codebook's step
  ops::Weight to_logits;      // [V, D] the same table when tied
  AlignedBuffer<float> norm;  // [D] `embedding_norm`, applied before to_logits
};

class Depthformer {
 public:
  // Reads `depth_linear.*`, `depthformer.layers.{j}.*` and
  // `depth_embeddings.{k}.*`. `config` is the parsed section
  // (Lfm25AudioConfig::depthformer, num_codebooks set); its ffn and
  // codebook_vocab are read from the tensors' rows. A tied
  // `depth_embeddings.{k}.to_logits.weight` may be absent (the released file
  // omits it) or present as an identical copy. The checkpoint must outlive
  // the Depthformer.
  static Result<Depthformer> Load(const Checkpoint& ckpt, const DepthformerConfig& config,
                                  int backbone_hidden);

  const DepthformerConfig& config() const { return config_; }
  int backbone_hidden() const { return backbone_hidden_; }
  // Bytes of weights one frame reads: depth_linear, the layer stack once per
  // codebook, C logit tables, and one embedding row per codebook but the last.
  size_t weight_bytes() const;

 private:
  friend class DepthformerState;
  friend Status SampleAudioFrame(const Depthformer&, DepthformerState&, const float*, Sampler&, Rng&,
                                 int32_t*, ThreadTeam&, TraceSink*);

  DepthformerConfig config_;
  int backbone_hidden_ = 0;
  ops::Weight depth_linear_;                // [C·D, H]
  AlignedBuffer<float> depth_linear_bias_;  // [C·D]
  std::vector<DepthformerLayer> layers_;
  std::vector<DepthCodebook> codebooks_;
  AlignedBuffer<float> rope_cos_;  // [C, hd/2] position k = codebook k
  AlignedBuffer<float> rope_sin_;  // [C, hd/2]
};

class DepthformerState {
 public:
  // max_threads: the largest team SampleAudioFrame will be called with.
  static Result<DepthformerState> Create(const Depthformer& model, int max_threads);
  size_t bytes() const;  // K/V cache + scratch

 private:
  friend Status SampleAudioFrame(const Depthformer&, DepthformerState&, const float*, Sampler&, Rng&,
                                 int32_t*, ThreadTeam&, TraceSink*);

  int max_threads_ = 1;
  AlignedBuffer<float> k_;       // [layers, C, KV] after k norm and RoPE
  AlignedBuffer<float> v_;       // [layers, C, KV]
  AlignedBuffer<float> in_;      // [C, D] depth_linear output
  AlignedBuffer<float> x_;       // [D] residual stream of the current codebook
  AlignedBuffer<float> xn_;      // [D] normed input of the current op
  AlignedBuffer<float> tmp_;     // [D] op output before the residual add
  AlignedBuffer<float> qkv_;     // [Q + 2KV]
  AlignedBuffer<float> attn_;    // [Q] attention output before out_proj
  AlignedBuffer<float> gate_;    // [F]
  AlignedBuffer<float> up_;      // [F]
  AlignedBuffer<float> logits_;  // [V]
  AlignedBuffer<float> scores_;  // [max_threads, scores_ld_]
  size_t scores_ld_ = 0;
};

// Samples one audio frame from the backbone's final-normed hidden state
// h [backbone_hidden] into codes [num_codebooks]. `sampler` must take
// codebook_vocab logits; a greedy sampler draws nothing from rng. Traces
// (when sink != null): depth_linear_out [C, D], cb{k}_in, cb{k}_out [D],
// cb{k}_logits [V]. Allocates nothing.
Status SampleAudioFrame(const Depthformer& model, DepthformerState& state, const float* h, Sampler& sampler,
                        Rng& rng, int32_t* codes, ThreadTeam& team, TraceSink* sink);

}  // namespace lfmvox
