// The LFM3 layer stack (the seed's `Stack` in lfm3_speech.rs, oracle README "LFM3-Audio speech output"),
// on the shared blocks: per layer
//   h   = x + PostOpNorm?(Op(OpNorm(x)))          Op = ShortConv or GQA attention
//   out = h + PostFfnNorm?(SwiGLU(FfnNorm(h)))
// then the final RMSNorm (`embedding_norm`). Attention: q/k per-head RMSNorm, RoPE rotate-half with
// f64 angles (RopeAngles::kF64, decision 1), an optional per-head sigmoid gate `gate_proj` [heads, H]
// read from the operator-normed input and applied to the attention output before `o_proj`
// (decision 3). The kind of each layer and the presence of the sandwich norms and the gate are read
// from the tensors and checked against the config.
//
// Two attention modes, from Lfm3StackConfig::window:
//   window w > 0  causal within w keys (each query sees itself and the w − 1 positions before); the
//                 state keeps the conv histories, a K/V ring of w − 1 rows and the position between
//                 calls, so a sequence may arrive in pieces (the codec);
//   window 0      bidirectional: each call is one whole sequence at positions 0..n−1, every query sees
//                 every row of the call, and the state is cleared at the start of each call (the depth
//                 decoder's 12 slots);
//   per layer     (Lfm3StackConfig::layer_window, the backbone) causal; each attention layer either full
//                 causal (its K/V cache grows to the state's context, max_positions) or sliding within its
//                 own window (a ring of window − 1 rows), with its own RoPE base and rotated dims (partial
//                 rotary: the first layer_rotary_dims of each head). Layers that share (base, dims) share
//                 one RopeTable.
//
// Weights / State / Scratch as Lfm2Stack: Lfm3Stack (immutable, shared), Lfm3State (one sequence),
// Lfm3Scratch (one call's activations, owned by the worker). One Forward runs rows of several
// sequences, each against its own state, bit-identical to running each alone (the MatMul contract).
// Shapes (docs/style.md legend): H hidden, F ffn, hd head dim, Q = heads·hd, KV = kv_heads·hd,
// K conv kernel, R rows in a call (over all its sequences).
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
#include "blocks/linear.h"
#include "blocks/norm.h"
#include "blocks/rope.h"
#include "blocks/short_conv.h"
#include "io/safetensors.h"
#include "models/lfm3_audio/lfm3_config.h"

namespace lfmvox {

class ThreadTeam;
class Lfm3Scratch;

struct Lfm3Attention {
  Linear q_proj;     // [Q, H]
  Linear k_proj;     // [KV, H]
  Linear v_proj;     // [KV, H]
  Linear o_proj;     // [H, Q]
  RmsNorm q_norm;    // [hd]
  RmsNorm k_norm;    // [hd]
  Linear gate_proj;  // [heads, H]; empty (0 rows) without a gate
  bool has_gate() const { return gate_proj.out() != 0; }
};

struct Lfm3Layer {
  Lfm3LayerKind kind = Lfm3LayerKind::kConv;
  size_t rope = 0;             // attention layers: index into Lfm3Stack::ropes()
  RmsNorm operator_norm;       // [H]
  RmsNorm post_operator_norm;  // [H]; empty without the sandwich norm
  RmsNorm ffn_norm;            // [H]
  RmsNorm post_ffn_norm;       // [H]; empty without the sandwich norm
  ShortConv conv;              // `conv.*` on conv layers
  Lfm3Attention attn;          // `self_attn.*` on attention layers
  SwiGluFfn ffn;               // `feed_forward.*`
  bool has_post_operator_norm() const { return post_operator_norm.dim() != 0; }
  bool has_post_ffn_norm() const { return post_ffn_norm.dim() != 0; }
};

class Lfm3Stack {
 public:
  // Reads `<prefix>layers.{i}.*` and `<prefix>embedding_norm.weight` with the shapes the config
  // implies; the checkpoint must outlive the stack. A missing or misshapen tensor, a layer whose
  // tensors disagree with the config's layer_types or its optional-norm / gate lists, or a layer
  // beyond num_layers in the checkpoint is an error naming the tensor.
  static Result<Lfm3Stack> Load(const Checkpoint& ckpt, const Lfm3StackConfig& config,
                                const std::string& prefix);

  // Load-time conversion of every matrix (the operators', the gates', the FFNs') to format f
  // (blocks/weights.h ConvertMatrix), the bytes in `arena`, which must outlive the stack; a matrix
  // whose rows are not whole blocks of f stays as stored. Before any state or scratch is created.
  Status ConvertMatrices(WeightFormat f, std::vector<std::vector<uint8_t>>* arena);
  // Every matrix in the layout this CPU multiplies fastest when each call has many rows
  // (blocks/weights.h ForManyRows; kept by `ckpt`): for a stack that never decodes one row at a time.
  Status UseManyRowLayout(const Checkpoint& ckpt);

  const Lfm3StackConfig& config() const { return config_; }
  const std::vector<Lfm3Layer>& layers() const { return layers_; }
  const RmsNorm& final_norm() const { return final_norm_; }
  const RopeTable& rope() const { return ropes_[0]; }  // the first attention layer's table
  const std::vector<RopeTable>& ropes() const { return ropes_; }
  AttentionShape attention_shape() const;
  bool bidirectional() const { return config_.bidirectional(); }
  // True when some attention layer is full causal (its cache grows with the context).
  bool has_full_causal() const;
  // Bytes of matrix weights one Forward reads (for bandwidth figures).
  size_t weight_bytes() const;

 private:
  std::vector<Linear*> Matrices();  // every matrix the layers have
  Lfm3StackConfig config_;
  std::vector<Lfm3Layer> layers_;
  RmsNorm final_norm_;            // [H]
  std::vector<RopeTable> ropes_;  // rotate-half, f64 angles: one per distinct (base, rotated dims)
};

class Lfm3State {
 public:
  // max_rows: the most positions one Forward call may take for this sequence (sizes the K/V ring
  // of the causal mode, the whole cache of the bidirectional one). The state remembers the stack it
  // was created for (Forward refuses another), so the stack must not move while states exist; the
  // same holds for Lfm3Scratch. max_positions: the context of full-causal attention layers (the
  // positions a sequence may reach; required, >= max_rows, when the stack has such a layer, else
  // ignored).
  static Result<Lfm3State> Create(const Lfm3Stack& stack, size_t max_rows, size_t max_positions = 0);
  // The bytes Create would allocate for these sizes (conv histories + K/V), computed from the config
  // alone, so a caller can check them against a memory budget first.
  static double PlannedBytes(const Lfm3Stack& stack, size_t max_rows, size_t max_positions);

  // Back to position 0 with empty histories.
  void Reset();
  int64_t position() const { return pos_; }
  size_t max_rows() const { return max_rows_; }
  size_t max_positions() const { return max_positions_; }  // 0: unbounded (no full-causal layer)
  // Read access for tests: attention layer i's cache (empty for conv layers).
  const KvCache& kv_cache(size_t layer) const { return kv_[layer]; }
  // The most keys one query of this sequence can see (sizes the attention scratch).
  size_t max_keys() const { return max_keys_; }
  size_t state_bytes() const;  // conv histories + K/V (the K/V buffers as allocated)
  // Bytes that carry information from one call to the next: conv histories and the window − 1
  // K/V rows of each sliding attention layer, the rows held so far by each full-causal one (0 for a
  // bidirectional stack).
  size_t live_bytes() const;

 private:
  friend Status Lfm3ForwardKeep(const Lfm3Stack&, std::span<Lfm3State* const>, std::span<const size_t>,
                                std::span<const size_t>, float*, Lfm3Scratch&, ThreadTeam&, TraceSink*);

  // Rows of layer i's K/V ring: sliding, window − 1 carried over plus a call's; full causal, the
  // context; bidirectional, a call's rows.
  static size_t KvCapacity(const Lfm3StackConfig& c, size_t i, size_t max_rows, size_t max_positions);

  const Lfm3Stack* stack_ = nullptr;
  size_t max_rows_ = 0;
  size_t max_positions_ = 0;
  size_t max_keys_ = 1;
  int64_t pos_ = 0;
  std::vector<AlignedBuffer<float>> conv_state_;  // per layer: [K-1, H] (empty for attention layers)
  std::vector<KvCache> kv_;                       // per layer (empty for conv layers)
};

class Lfm3Scratch {
 public:
  // max_rows: the most rows one call takes over all its sequences; max_keys: the longest cache a
  // query may see (Lfm3State::max_keys of the states it will run); max_threads: the largest team.
  static Result<Lfm3Scratch> Create(const Lfm3Stack& stack, size_t max_rows, size_t max_keys,
                                    int max_threads);
  size_t max_rows() const { return max_rows_; }
  size_t bytes() const;

 private:
  friend Status Lfm3ForwardKeep(const Lfm3Stack&, std::span<Lfm3State* const>, std::span<const size_t>,
                                std::span<const size_t>, float*, Lfm3Scratch&, ThreadTeam&, TraceSink*);
  // Rows of layer i's K/V ring: sliding, window − 1 carried over plus a call's; full causal, the
  // context; bidirectional, a call's rows.
  static size_t KvCapacity(const Lfm3StackConfig& c, size_t i, size_t max_rows, size_t max_positions);

  const Lfm3Stack* stack_ = nullptr;
  size_t max_rows_ = 0;
  AlignedBuffer<float> xn_;     // [R, H]  normed input of the current op
  AlignedBuffer<float> tmp_;    // [R, H]  op output before the residual add
  AlignedBuffer<float> wide_;   // [R, max(3H, Q, F)]  conv B|C|x, attention q, or FFN gate
  AlignedBuffer<float> wide2_;  // [R, max(H, Q, F)]   conv output, attention output, or FFN up
  AlignedBuffer<float> kv_;     // [R, 2KV]  key | value projections before they enter the caches
  AlignedBuffer<float> gate_;   // [R, heads]  gate_proj output, then its sigmoid
  AlignedBuffer<float> rope_;   // [tables, R, hd]   cos | sin per row, one block per RopeTable
  AttentionScratch attn_;       // [threads, max_keys]
  std::vector<AttentionSeq> attn_seqs_;
  std::vector<ConvSeq> conv_seqs_;
};

// Runs rows[s] positions of each sequence states[s] through every layer, in place: x [Σ rows, H]
// holds the inputs, the sequences' rows one after the other, and returns the last layer's output
// (before the final norm; Lfm3FinalNorm applies it). Causal mode: positions position() …
// position() + rows[s] − 1, continuing the state. Bidirectional mode: each state is cleared first and
// its rows are positions 0 … rows[s] − 1. Traces "layer%zu_out" after each layer. Fails without side
// effects if a sequence's rows exceed its max_rows or its context (max_positions), the total exceeds
// the scratch, a state appears twice or belongs to another stack, or the team is larger than the
// scratch was sized for.
Status Lfm3Forward(const Lfm3Stack& stack, std::span<Lfm3State* const> states, std::span<const size_t> rows,
                   float* x, Lfm3Scratch& scratch, ThreadTeam& team, TraceSink* sink);
// As Lfm3Forward, but only the rows `keep` (increasing indices into the call's Σ rows) leave the last
// layer: everything after its mixing (attention or conv) — the gate, o_proj, the norms, the FFN — runs
// on those rows alone, and x [keep.size(), H] returns their outputs in keep's order, each bit-identical
// to its row of the full call (the MatMul contract). The last layer's "layer%zu_out" traces the kept
// rows. Empty keep: Lfm3Forward. For callers that read a few rows of a bidirectional call (the depth
// decoder reads the codebooks a pass reveals).
Status Lfm3ForwardKeep(const Lfm3Stack& stack, std::span<Lfm3State* const> states,
                       std::span<const size_t> rows, std::span<const size_t> keep, float* x,
                       Lfm3Scratch& scratch, ThreadTeam& team, TraceSink* sink);
// One sequence.
Status Lfm3Forward(const Lfm3Stack& stack, Lfm3State& state, float* x, size_t n, Lfm3Scratch& scratch,
                   ThreadTeam& team, TraceSink* sink);

// out[r] = RMSNorm_final(x[r]) for n rows of H; out may alias x.
void Lfm3FinalNorm(const Lfm3Stack& stack, const float* x, size_t n, float* out);

}  // namespace lfmvox
