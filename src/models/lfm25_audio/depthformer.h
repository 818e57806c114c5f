// The LFM2.5-Audio depthformer (spec §7; liquid-audio `_sample_audio_frame`):
// a small RQ-transformer that turns one backbone hidden state into one audio
// frame of num_codebooks codes, codebook by codebook.
//   in  = depth_linear(h) + bias                       [C, D]
//   x_0 = in[0];  x_k = in[k] + depth_embeddings[k-1].embedding[c_{k-1}]
//   out_k = Stack(x_k) at position k, K/V cached over 0..k (reset per frame)
//   logits_k = to_logits_k · RMSNorm(out_k, depth_embeddings[k].embedding_norm)
//   c_k = sample(logits_k)
// Stack: `layers` StandardBlocks with no stack norm,
//   h = x + out_proj(Attn(RMSNorm_op(x))),  out = h + w2(silu(w1 y) ⊙ w3 y), y = RMSNorm_ffn(h);
// attention: qkv_proj rows [Q | K | V], per-head RMSNorm on q and k, then
// interleaved-pair RoPE (position = codebook index), GQA, scale 1/√hd.
//
// Depthformer holds the weights (immutable, shared); DepthformerScratch the activations and
// per-frame K/V of one batched call (a worker's), sized once. Shapes (docs/style.md
// legend): C codebooks, D depthformer dim, H backbone hidden, hd head dim, Q = heads·hd,
// KV = kv_heads·hd, F ffn, V codebook_vocab, B frame requests in one call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "base/trace.h"
#include "blocks/attention.h"
#include "blocks/glu_ffn.h"
#include "blocks/linear.h"
#include "blocks/norm.h"
#include "blocks/rope.h"
#include "blocks/sampling.h"
#include "io/safetensors.h"
#include "models/lfm25_audio/config.h"
#include "ops/ops.h"
#include "threading/stage_policy.h"

namespace lfmvox {

class ThreadTeam;
class DepthformerScratch;
struct DepthRequest;

struct DepthformerLayer {
  RmsNorm operator_norm;  // [D]
  RmsNorm ffn_norm;       // [D]
  Linear qkv_proj;        // [Q + 2KV, D]  rows Q | K | V
  Linear out_proj;        // [D, Q]
  RmsNorm q_norm;         // [hd]
  RmsNorm k_norm;         // [hd]
  SwiGluFfn ffn;          // w1, w3 [F, D], w2 [D, F]
};

struct DepthCodebook {
  ops::Weight embedding;  // [V, D] input rows for the next codebook's step
  ops::Weight to_logits;  // [V, D] the same table when tied
  RmsNorm norm;           // [D] `embedding_norm`, applied before to_logits
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
  friend class DepthformerScratch;
  friend Status SampleAudioFrames(const Depthformer&, std::span<const DepthRequest>, DepthformerScratch&,
                                  ThreadTeam&, TraceSink*);

  DepthformerConfig config_;
  int backbone_hidden_ = 0;
  Linear depth_linear_;  // [C·D, H] with bias
  std::vector<DepthformerLayer> layers_;
  std::vector<DepthCodebook> codebooks_;
  RopeTable rope_;                // interleaved pairs, rope_theta
  AlignedBuffer<float> rope_cs_;  // [C, hd] cos | sin at position k = codebook k
};

// One frame request of a batched call: the backbone's final-normed hidden state h [H], the
// session's audio sampler and RNG, and where its codes [C] go.
struct DepthRequest {
  const float* h = nullptr;
  Sampler* sampler = nullptr;
  Rng* rng = nullptr;
  int32_t* codes = nullptr;
};

// Activations of one batched call, owned by the worker that runs it: the per-frame K/V (they
// restart every frame, so they are scratch, not session state) and every intermediate, sized once
// for max_batch frames and a team of up to max_threads.
class DepthformerScratch {
 public:
  static Result<DepthformerScratch> Create(const Depthformer& model, size_t max_batch, int max_threads);
  size_t max_batch() const { return max_batch_; }
  size_t bytes() const;

 private:
  friend Status SampleAudioFrames(const Depthformer&, std::span<const DepthRequest>, DepthformerScratch&,
                                  ThreadTeam&, TraceSink*);
  const Depthformer* model_ = nullptr;
  size_t max_batch_ = 0;
  AlignedBuffer<float> h_;       // [B, H] the requests' hidden states, gathered
  AlignedBuffer<float> in_;      // [B, C·D] depth_linear output
  AlignedBuffer<float> x_;       // [B, D] residual stream of the current codebook
  AlignedBuffer<float> xn_;      // [B, D] normed input of the current op
  AlignedBuffer<float> tmp_;     // [B, D] op output before the residual add
  AlignedBuffer<float> qkv_;     // [B, Q + 2KV]
  AlignedBuffer<float> attn_;    // [B, Q] attention output before out_proj
  AlignedBuffer<float> gate_;    // [B, F]
  AlignedBuffer<float> up_;      // [B, F]
  AlignedBuffer<float> logits_;  // [B, V]
  std::vector<KvCache> kv_;      // [B · layers], each [C, KV]
  AttentionScratch scores_;      // [threads, C]
  std::vector<AttentionSeq> seqs_;
  AdaptiveMode mode_;  // each call in parallel or inline (threading/stage_policy.h)
};

// Samples one audio frame per request, all requests in one batched pass (each weight read once
// per codebook step for the whole batch); every request's codes equal those it gets alone.
// Traces (when sink != null): depth_linear_out [B, C·D], cb{k}_in, cb{k}_out [B, D],
// cb{k}_logits [B, V]. Allocates nothing.
Status SampleAudioFrames(const Depthformer& model, std::span<const DepthRequest> requests,
                         DepthformerScratch& scratch, ThreadTeam& team, TraceSink* sink);
// One frame from h [backbone_hidden] into codes [num_codebooks]. `sampler` must take
// codebook_vocab logits; a greedy sampler draws nothing from rng.
Status SampleAudioFrame(const Depthformer& model, DepthformerScratch& scratch, const float* h,
                        Sampler& sampler, Rng& rng, int32_t* codes, ThreadTeam& team, TraceSink* sink);

}  // namespace lfmvox
