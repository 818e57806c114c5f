// The LFM2 hybrid layer stack (transformers `Lfm2Model` without its token
// embedding): per layer
//   h   = x + Op(RMSNorm_op(x))        Op = ShortConv or GQA attention
//   out = h + SwiGLU(RMSNorm_ffn(h))
// then the final RMSNorm (`embedding_norm`). Shared by the LFM2.5 audio
// detokenizer (hidden 512, sliding-window attention) and the 1.2B backbone
// (hidden 2048, full causal attention).
//
// Three kinds of data, as everywhere in lfmvox:
//   Lfm2Stack  weights, immutable, shared by every session;
//   Lfm2State  one session's persistent state (conv histories, K/V caches,
//              the position counter) and its scratch, sized once at Create.
// Shapes are written [rows, cols]; H = hidden, F = ffn, hd = head dim,
// Q = heads·hd, KV = kv_heads·hd, K = conv kernel, n = rows in this call.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "base/trace.h"
#include "io/safetensors.h"
#include "models/lfm25_audio/lfm2_config.h"
#include "ops/ops.h"

namespace lfmvox {

class ThreadTeam;

struct Lfm2Layer {
  LayerKind kind = LayerKind::kConv;
  AlignedBuffer<float> operator_norm;  // [H]
  AlignedBuffer<float> ffn_norm;       // [H]
  // ShortConv (`conv.*`)
  ops::Weight in_proj;                 // [3H, H]  rows: B | C | x
  AlignedBuffer<float> in_proj_bias;   // [3H] when conv_bias
  AlignedBuffer<float> conv;           // [H, K]   tap K-1 multiplies the current step
  AlignedBuffer<float> conv_bias;      // [H] when conv_bias
  ops::Weight conv_out;                // [H, H]
  AlignedBuffer<float> conv_out_bias;  // [H] when conv_bias
  // Attention (`self_attn.*`)
  ops::Weight q_proj;           // [Q, H]
  ops::Weight k_proj;           // [KV, H]
  ops::Weight v_proj;           // [KV, H]
  ops::Weight o_proj;           // [H, Q]
  AlignedBuffer<float> q_norm;  // [hd]
  AlignedBuffer<float> k_norm;  // [hd]
  // SwiGLU (`feed_forward.*`)
  ops::Weight w1;  // [F, H] gate
  ops::Weight w3;  // [F, H] up
  ops::Weight w2;  // [H, F] down
};

class Lfm2Stack {
 public:
  // Reads `<prefix>layers.{i}.*` and `<prefix>embedding_norm.weight` with the
  // shapes the config implies; the checkpoint must outlive the stack.
  static Result<Lfm2Stack> Load(const Checkpoint& ckpt, const Lfm2Config& config, const std::string& prefix);

  const Lfm2Config& config() const { return config_; }
  const std::vector<Lfm2Layer>& layers() const { return layers_; }
  const float* final_norm() const { return final_norm_.data(); }
  const float* inv_freq() const { return inv_freq_.data(); }  // [hd/2] rotary frequencies
  // Bytes of weights one Forward reads (for bandwidth figures).
  size_t weight_bytes() const;

 private:
  Lfm2Config config_;
  std::vector<Lfm2Layer> layers_;
  AlignedBuffer<float> final_norm_;  // [H]
  AlignedBuffer<float> inv_freq_;    // [hd/2]
};

// One layer's attention cache: rows [0, len) hold the keys/values of
// positions [first_pos, first_pos + len). Full attention grows to the
// capacity; sliding attention keeps only the last window-1 rows between calls
// (a ring, kept linear by one small shift per call).
struct KvCache {
  AlignedBuffer<float> k;  // [capacity, KV] after k_norm and RoPE
  AlignedBuffer<float> v;  // [capacity, KV]
  size_t capacity = 0;
  size_t window = 0;  // keys per query for sliding attention; 0 = full causal
  size_t len = 0;
  int64_t first_pos = 0;
};

class Lfm2State {
 public:
  // max_rows: the most positions one Forward call may take. max_positions:
  // the context for full-attention layers (0 = the config's maximum).
  // max_threads: the largest team Forward will be called with.
  static Result<Lfm2State> Create(const Lfm2Stack& stack, size_t max_rows, size_t max_positions,
                                  int max_threads);

  // Back to position 0 with empty histories; nothing else changes.
  void Reset();
  int64_t position() const { return pos_; }
  size_t max_rows() const { return max_rows_; }
  // Positions a full-attention layer can still take (SIZE_MAX if none).
  size_t remaining_positions() const;
  size_t state_bytes() const;    // persistent: conv histories + K/V
  size_t scratch_bytes() const;  // transient activations
  // Read access for parity tests: conv layer i's history [K-1, H] (oldest
  // first), attention layer i's cache.
  const float* conv_state(size_t layer) const { return conv_state_[layer].data(); }
  const KvCache& kv_cache(size_t layer) const { return kv_[layer]; }

 private:
  friend Status Lfm2Forward(const Lfm2Stack&, Lfm2State&, float*, size_t, ThreadTeam&, TraceSink*);
  friend void Lfm2FinalNorm(const Lfm2Stack&, const float*, size_t, float*);

  size_t max_rows_ = 0;
  int max_threads_ = 1;
  int64_t pos_ = 0;
  std::vector<AlignedBuffer<float>> conv_state_;  // per layer: [K-1, H] (empty for attention layers)
  std::vector<KvCache> kv_;                       // per layer (empty for conv layers)
  // Scratch, reused by every layer of every call.
  AlignedBuffer<float> xn_;      // [max_rows, H]  normed input of the current op
  AlignedBuffer<float> tmp_;     // [max_rows, H]  op output before the residual add
  AlignedBuffer<float> wide_;    // [max_rows, max(3H, Q, F)]  conv B|C|x, attention q, or FFN gate
  AlignedBuffer<float> wide2_;   // [max_rows, max(H, Q, F)]   conv output, attention output, or FFN up
  AlignedBuffer<float> rope_;    // [max_rows, hd]  cos | sin per row
  AlignedBuffer<float> scores_;  // [max_threads, max keys]
  size_t scores_ld_ = 0;
};

// Runs n rows (positions position() … position()+n-1) through every layer,
// in place: x [n, H] holds the input embeddings and returns the last layer's
// output (before the final norm). Fails without side effects if n exceeds
// max_rows or the full-attention context.
Status Lfm2Forward(const Lfm2Stack& stack, Lfm2State& state, float* x, size_t n, ThreadTeam& team,
                   TraceSink* sink);

// out[r] = RMSNorm_final(x[r]) for n rows of H; out may alias x.
void Lfm2FinalNorm(const Lfm2Stack& stack, const float* x, size_t n, float* out);

}  // namespace lfmvox
