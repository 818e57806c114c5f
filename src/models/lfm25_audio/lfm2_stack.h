// The LFM2 hybrid layer stack (transformers `Lfm2Model` without its token
// embedding): per layer
//   h   = x + Op(RMSNorm_op(x))        Op = ShortConv or GQA attention
//   out = h + SwiGLU(RMSNorm_ffn(h))
// then the final RMSNorm (`embedding_norm`). Shared by the LFM2.5 audio
// detokenizer (hidden 512, sliding-window attention) and the 1.2B backbone
// (hidden 2048, full causal attention). Built from src/blocks.
//
// Three kinds of data, as everywhere in lfmvox:
//   Lfm2Stack    weights, immutable, shared by every session;
//   Lfm2State    one sequence's persistent state: conv histories, K/V caches, its position;
//   Lfm2Scratch  activations of one call, owned by whoever runs the call (a worker), sized once
//                for the most rows a call takes over all the sequences it batches.
// One Forward runs rows of several sequences at once, each against its own state; the result of
// every row is bit-identical to running its sequence alone (the MatMul contract, ops.h).
// Shapes (docs/style.md legend): H hidden, F ffn, hd head dim, Q = heads·hd, KV = kv_heads·hd, K conv kernel,
// R rows in a call (over all its sequences).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "base/trace.h"
#include "blocks/attention.h"
#include "blocks/glu_ffn.h"
#include "blocks/norm.h"
#include "blocks/rope.h"
#include "blocks/short_conv.h"
#include "io/safetensors.h"
#include "models/lfm25_audio/lfm2_config.h"

namespace lfmvox {

class ThreadTeam;
class Lfm2Scratch;

struct Lfm2Attention {
  Linear q_proj;    // [Q, H]
  Linear k_proj;    // [KV, H]
  Linear v_proj;    // [KV, H]
  Linear out_proj;  // [H, Q]
  RmsNorm q_norm;   // [hd]
  RmsNorm k_norm;   // [hd]
};

struct Lfm2Layer {
  LayerKind kind = LayerKind::kConv;
  RmsNorm operator_norm;  // [H]
  RmsNorm ffn_norm;       // [H]
  ShortConv conv;         // `conv.*` on conv layers
  Lfm2Attention attn;     // `self_attn.*` on attention layers
  SwiGluFfn ffn;          // `feed_forward.*`
};

class Lfm2Stack {
 public:
  // Reads `<prefix>layers.{i}.*` and `<prefix>embedding_norm.weight` with the
  // shapes the config implies; the checkpoint must outlive the stack.
  static Result<Lfm2Stack> Load(const Checkpoint& ckpt, const Lfm2Config& config, const std::string& prefix);

  const Lfm2Config& config() const { return config_; }
  const std::vector<Lfm2Layer>& layers() const { return layers_; }
  const RmsNorm& final_norm() const { return final_norm_; }
  const RopeTable& rope() const { return rope_; }
  AttentionShape attention_shape() const;
  // Bytes of weights one Forward reads (for bandwidth figures).
  size_t weight_bytes() const;

 private:
  Lfm2Config config_;
  std::vector<Lfm2Layer> layers_;
  RmsNorm final_norm_;  // [H]
  RopeTable rope_;      // split-half, rope_theta
};

class Lfm2State {
 public:
  // max_rows: the most positions one Forward call may take for this sequence
  // (sizes the sliding-window rings). max_positions: the context for
  // full-attention layers (0 = the config's maximum).
  static Result<Lfm2State> Create(const Lfm2Stack& stack, size_t max_rows, size_t max_positions);

  // Back to position 0 with empty histories; nothing else changes.
  void Reset();
  int64_t position() const { return pos_; }
  size_t max_rows() const { return max_rows_; }
  // Positions a full-attention layer can still take (SIZE_MAX if none).
  size_t remaining_positions() const;
  // The most keys one query of this sequence can see (sizes the attention scratch).
  size_t max_keys() const { return max_keys_; }
  size_t state_bytes() const;  // conv histories + K/V
  // Read access for parity tests: conv layer i's history [K-1, H] (oldest
  // first), attention layer i's cache.
  const float* conv_state(size_t layer) const { return conv_state_[layer].data(); }
  const KvCache& kv_cache(size_t layer) const { return kv_[layer]; }

  // Attention probe (word timing): from now on every row at a position ≥ `from` that runs through the
  // stack records, summed over the attention layers and their heads, softmax(q·k / √hd) taken over the
  // keys at positions [key_first, key_first + key_n) only, so each head's share sums to 1 and a row
  // sums to attention layers × heads. Needs key_first + key_n ≤ from and full-attention layers only (their
  // caches keep every key). Running a position again (a cache rebuild) rewrites its row. The rows grow as
  // positions run, at most (context − from) × key_n floats. StopProbe ends it and frees them.
  Status StartProbe(int64_t key_first, size_t key_n, int64_t from);
  void StopProbe();
  bool probing() const { return probe_.on; }
  size_t probe_keys() const { return probe_.key_n; }
  // [rows, key_n]: row i is position from + i (zeros for a position in between that has not run).
  std::span<const float> probe_rows() const { return probe_.rows; }

 private:
  struct Probe {
    bool on = false;
    int64_t key_first = 0, from = 0;
    size_t key_n = 0;
    std::vector<float> rows;    // [rows, key_n]
    std::vector<float> scores;  // [key_n] one head's scores
  };
  friend void RecordProbe(Lfm2State& st, size_t layer, const AttentionShape& shape, const float* q,
                          size_t ldq, size_t row0, size_t n);
  Probe probe_;

  friend Status Lfm2Forward(const Lfm2Stack&, std::span<Lfm2State* const>, std::span<const size_t>, float*,
                            Lfm2Scratch&, ThreadTeam&, TraceSink*);

  size_t max_rows_ = 0;
  size_t max_keys_ = 1;
  int64_t pos_ = 0;
  std::vector<AlignedBuffer<float>> conv_state_;  // per layer: [K-1, H] (empty for attention layers)
  std::vector<KvCache> kv_;                       // per layer (empty for conv layers)
};

class Lfm2Scratch {
 public:
  // max_rows: the most rows one call takes over all its sequences; max_keys: the longest cache a
  // query may see (Lfm2State::max_keys of the states it will run); max_threads: the largest team.
  static Result<Lfm2Scratch> Create(const Lfm2Stack& stack, size_t max_rows, size_t max_keys,
                                    int max_threads);
  size_t max_rows() const { return max_rows_; }
  size_t bytes() const;

 private:
  friend Status Lfm2Forward(const Lfm2Stack&, std::span<Lfm2State* const>, std::span<const size_t>, float*,
                            Lfm2Scratch&, ThreadTeam&, TraceSink*);
  size_t max_rows_ = 0;
  AlignedBuffer<float> xn_;     // [R, H]  normed input of the current op
  AlignedBuffer<float> tmp_;    // [R, H]  op output before the residual add
  AlignedBuffer<float> wide_;   // [R, max(3H, Q, F)]  conv B|C|x, attention q, or FFN gate
  AlignedBuffer<float> wide2_;  // [R, max(H, Q, F)]   conv output, attention output, or FFN up
  AlignedBuffer<float> kv_;     // [R, 2KV]  key | value projections before they enter the caches
  AlignedBuffer<float> rope_;   // [R, hd]   cos | sin per row
  AttentionScratch attn_;       // [threads, max_keys]
  std::vector<AttentionSeq> attn_seqs_;
  std::vector<ConvSeq> conv_seqs_;
};

// Runs rows[s] positions of each sequence states[s] (position() … position()+rows[s]-1) through
// every layer, in place: x [Σ rows, H] holds the input embeddings, the sequences' rows one after
// the other, and returns the last layer's output (before the final norm). Fails without side
// effects if a sequence's rows exceed its max_rows or its full-attention context, the total exceeds
// the scratch, a state appears twice, or the team is larger than the scratch was sized for.
Status Lfm2Forward(const Lfm2Stack& stack, std::span<Lfm2State* const> states, std::span<const size_t> rows,
                   float* x, Lfm2Scratch& scratch, ThreadTeam& team, TraceSink* sink);
// One sequence.
Status Lfm2Forward(const Lfm2Stack& stack, Lfm2State& state, float* x, size_t n, Lfm2Scratch& scratch,
                   ThreadTeam& team, TraceSink* sink);

// out[r] = RMSNorm_final(x[r]) for n rows of H; out may alias x.
void Lfm2FinalNorm(const Lfm2Stack& stack, const float* x, size_t n, float* out);

}  // namespace lfmvox
