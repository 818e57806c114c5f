#include "models/lfm3_audio/lfm3_stack.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "blocks/weights.h"
#include "threading/thread_team.h"

namespace lfmvox {

namespace {

std::string LayerPrefix(const std::string& prefix, size_t i) {
  return prefix + "layers." + std::to_string(i) + ".";
}

// Checks an optional tensor against the config's list (when it has one).
Status CheckFlag(const std::vector<bool>& list, size_t i, bool present, const std::string& tensor,
                 const char* key) {
  if (list.empty() || list[i] == present) return Status::Ok();
  return InvalidArgument(StrFormat("the config's \"%s\"[%zu] is %s but the checkpoint %s %s", key, i,
                                   list[i] ? "true" : "false", present ? "has" : "lacks", tensor.c_str()));
}

}  // namespace

Result<Lfm3Stack> Lfm3Stack::Load(const Checkpoint& ckpt, const Lfm3StackConfig& c,
                                  const std::string& prefix) {
  Lfm3Stack s;
  s.config_ = c;
  const int64_t H = c.hidden_size, F = c.ffn_dim, hd = c.head_dim;
  const int64_t Q = int64_t{c.num_heads} * hd, KV = int64_t{c.num_kv_heads} * hd;
  s.layers_.resize(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i) {
    Lfm3Layer& L = s.layers_[i];
    const std::string p = LayerPrefix(prefix, i);
    const bool conv = ckpt.Has(p + "conv.in_proj.weight");
    const bool attn = ckpt.Has(p + "self_attn.q_proj.weight");
    if (conv == attn) {
      return InvalidArgument(StrFormat(
          "layer %zu (%s) has %s: expected exactly one of %sconv.in_proj.weight and "
          "%sself_attn.q_proj.weight",
          i, p.c_str(),
          conv ? "both a conv and an attention operator" : "neither a conv nor an attention operator",
          p.c_str(), p.c_str()));
    }
    L.kind = conv ? Lfm3LayerKind::kConv : Lfm3LayerKind::kAttention;
    if (L.kind != c.layers[i]) {
      return InvalidArgument(
          StrFormat("the config's \"layer_types\"[%zu] is %s but the checkpoint's %s is %s", i,
                    Lfm3LayerKindName(c.layers[i]), p.c_str(), Lfm3LayerKindName(L.kind)));
    }
    LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, p + "operator_norm.weight", H, c.norm_eps, &L.operator_norm));
    LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, p + "ffn_norm.weight", H, c.norm_eps, &L.ffn_norm));
    const std::string post_op = p + "post_operator_norm.weight", post_ffn = p + "post_ffn_norm.weight";
    LFM_RETURN_IF_ERROR(CheckFlag(c.post_operator_norm, i, ckpt.Has(post_op), post_op, "post_operator_norm"));
    LFM_RETURN_IF_ERROR(CheckFlag(c.post_ffn_norm, i, ckpt.Has(post_ffn), post_ffn, "post_ffn_norm"));
    if (ckpt.Has(post_op)) {
      LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, post_op, H, c.norm_eps, &L.post_operator_norm));
    }
    if (ckpt.Has(post_ffn)) LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, post_ffn, H, c.norm_eps, &L.post_ffn_norm));
    const std::string gate = p + "self_attn.gate_proj";
    if (L.kind == Lfm3LayerKind::kConv) {
      if (ckpt.Has(gate + ".weight")) {
        return InvalidArgument(StrFormat(
            "%s.weight is on conv layer %zu; a gate belongs to an attention layer", gate.c_str(), i));
      }
      LFM_RETURN_IF_ERROR(LoadShortConv(ckpt, p + "conv.", H, c.conv_kernel, false, &L.conv));
    } else {
      Lfm3Attention& a = L.attn;
      LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.q_proj", Q, H, false, &a.q_proj));
      LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.k_proj", KV, H, false, &a.k_proj));
      LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.v_proj", KV, H, false, &a.v_proj));
      LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.o_proj", H, Q, false, &a.o_proj));
      LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, p + "self_attn.q_norm.weight", hd, c.norm_eps, &a.q_norm));
      LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, p + "self_attn.k_norm.weight", hd, c.norm_eps, &a.k_norm));
      const bool has_gate = ckpt.Has(gate + ".weight");
      LFM_RETURN_IF_ERROR(CheckFlag(c.attn_gate, i, has_gate, gate + ".weight", "attn_gate"));
      if (has_gate) LFM_RETURN_IF_ERROR(LoadLinear(ckpt, gate, c.num_heads, H, false, &a.gate_proj));
    }
    LFM_RETURN_IF_ERROR(LoadSwiGluFfn(ckpt, p + "feed_forward.", H, F, &L.ffn));
  }
  const std::string extra = LayerPrefix(prefix, c.layers.size());
  if (ckpt.Has(extra + "operator_norm.weight")) {
    return InvalidArgument(
        StrFormat("the checkpoint has %soperator_norm.weight but the config lists %zu layers", extra.c_str(),
                  c.layers.size()));
  }
  LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, prefix + "embedding_norm.weight", H, c.norm_eps, &s.final_norm_));
  LFM_RETURN_IF_ERROR(c.ValidatePerLayer("the stack config"));
  // One table per distinct (base, rotated dims), in layer order; a stack without attention keeps one
  // table for rope().
  std::vector<std::pair<double, int>> keys;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    if (c.layers[i] != Lfm3LayerKind::kAttention) continue;
    const std::pair<double, int> key{c.attention_rope_theta(i), c.attention_rotary_dims(i)};
    size_t t = 0;
    while (t < keys.size() && keys[t] != key) ++t;
    if (t == keys.size()) keys.push_back(key);
    s.layers_[i].rope = t;
  }
  if (keys.empty()) keys.push_back({c.rope_theta, c.head_dim});
  for (const auto& [theta, rd] : keys) {
    // rotary_dims == head_dim is the whole head (the table's default), so full-head stacks are unchanged.
    s.ropes_.emplace_back(theta, static_cast<size_t>(hd), RopeStyle::kSplitHalf, RopeAngles::kF64,
                          static_cast<size_t>(rd));
  }
  return s;
}

std::vector<Linear*> Lfm3Stack::Matrices() {
  std::vector<Linear*> all;
  for (Lfm3Layer& L : layers_) {
    for (Linear* l : {&L.conv.in_proj, &L.conv.out_proj, &L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj,
                      &L.attn.o_proj, &L.attn.gate_proj, &L.ffn.w1, &L.ffn.w3, &L.ffn.w2}) {
      if (l->out() > 0) all.push_back(l);  // absent ones are empty
    }
  }
  return all;
}

Status Lfm3Stack::ConvertMatrices(WeightFormat f, std::vector<std::vector<uint8_t>>* arena) {
  for (Linear* l : Matrices()) {
    if (FormatRowBytes(f, l->in()) == 0) continue;  // not whole blocks
    LFM_ASSIGN_OR_RETURN(l->w, ConvertMatrix(l->w, f, arena));
  }
  return Status::Ok();
}

Status Lfm3Stack::UseManyRowLayout(const Checkpoint& ckpt) {
  for (Linear* l : Matrices()) {
    LFM_ASSIGN_OR_RETURN(l->w, ForManyRows(ckpt, l->w));
  }
  return Status::Ok();
}

AttentionShape Lfm3Stack::attention_shape() const {
  return {static_cast<size_t>(config_.num_heads), static_cast<size_t>(config_.num_kv_heads),
          static_cast<size_t>(config_.head_dim)};
}

bool Lfm3Stack::has_full_causal() const {
  if (!config_.per_layer_attention()) return false;
  for (size_t i = 0; i < config_.layers.size(); ++i) {
    if (config_.layers[i] == Lfm3LayerKind::kAttention && config_.layer_window[i] == 0) return true;
  }
  return false;
}

size_t Lfm3Stack::weight_bytes() const {
  auto bytes = [](const Linear& l) { return l.w.bytes(); };
  size_t n = 0;
  for (const Lfm3Layer& L : layers_) {
    n += bytes(L.conv.in_proj) + bytes(L.conv.out_proj) + bytes(L.attn.q_proj) + bytes(L.attn.k_proj) +
         bytes(L.attn.v_proj) + bytes(L.attn.o_proj) + bytes(L.attn.gate_proj) + bytes(L.ffn.w1) +
         bytes(L.ffn.w2) + bytes(L.ffn.w3);
  }
  return n;
}

Result<Lfm3State> Lfm3State::Create(const Lfm3Stack& stack, size_t max_rows, size_t max_positions) {
  const Lfm3StackConfig& c = stack.config();
  if (max_rows == 0 || max_rows > (size_t{1} << 20))
    return InvalidArgument("Lfm3State needs max_rows in [1, 2^20]");
  const bool full = stack.has_full_causal();
  if (full && (max_positions < max_rows || max_positions > (size_t{1} << 24))) {
    return InvalidArgument(
        StrFormat("this stack has full-causal attention layers: Lfm3State needs a context (max_positions) in "
                  "[max_rows = %zu, 2^24], got %zu",
                  max_rows, max_positions));
  }
  const size_t H = static_cast<size_t>(c.hidden_size);
  const size_t KV = stack.attention_shape().kv_dim();
  Lfm3State s;
  s.stack_ = &stack;
  s.max_rows_ = max_rows;
  s.max_positions_ = full ? max_positions : 0;
  s.conv_state_.resize(c.layers.size());
  s.kv_.resize(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i) {
    if (c.layers[i] == Lfm3LayerKind::kConv) {
      s.conv_state_[i].Reset(static_cast<size_t>(c.conv_kernel - 1) * H);
      continue;
    }
    const size_t capacity = KvCapacity(c, i, max_rows, max_positions);
    s.kv_[i].Allocate(capacity, KV, static_cast<size_t>(c.attention_window(i)));
    s.max_keys_ = std::max(s.max_keys_, capacity);
  }
  return s;
}

size_t Lfm3State::KvCapacity(const Lfm3StackConfig& c, size_t i, size_t max_rows, size_t max_positions) {
  const size_t window = static_cast<size_t>(c.attention_window(i));
  return window > 0 ? window - 1 + max_rows : c.bidirectional() ? max_rows : max_positions;
}

double Lfm3State::PlannedBytes(const Lfm3Stack& stack, size_t max_rows, size_t max_positions) {
  const Lfm3StackConfig& c = stack.config();
  const double H = c.hidden_size, KV = static_cast<double>(stack.attention_shape().kv_dim());
  double bytes = 0;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    bytes += c.layers[i] == Lfm3LayerKind::kConv
                 ? (c.conv_kernel - 1) * H * sizeof(float)
                 : 2 * static_cast<double>(KvCapacity(c, i, max_rows, max_positions)) * KV * sizeof(float);
  }
  return bytes;
}

void Lfm3State::Reset() {
  pos_ = 0;
  for (auto& c : conv_state_) c.Zero();
  for (auto& kv : kv_) kv.Clear();
}

size_t Lfm3State::state_bytes() const {
  size_t n = 0;
  for (const auto& c : conv_state_) n += c.size() * sizeof(float);
  for (const auto& kv : kv_) n += kv.bytes();
  return n;
}

size_t Lfm3State::live_bytes() const {
  size_t n = 0;
  for (const auto& c : conv_state_) n += c.size() * sizeof(float);
  if (stack_ == nullptr || stack_->bidirectional()) return n;
  const size_t KV = stack_->attention_shape().kv_dim();
  for (const auto& kv : kv_) {
    if (kv.capacity == 0) continue;
    n += 2 * (kv.window > 0 ? kv.window - 1 : kv.len) * KV * sizeof(float);
  }
  return n;
}

Result<Lfm3Scratch> Lfm3Scratch::Create(const Lfm3Stack& stack, size_t max_rows, size_t max_keys,
                                        int max_threads) {
  if (max_rows == 0) return InvalidArgument("Lfm3Scratch needs max_rows >= 1");
  if (max_threads < 1) return InvalidArgument("Lfm3Scratch needs max_threads >= 1");
  const Lfm3StackConfig& c = stack.config();
  const size_t H = static_cast<size_t>(c.hidden_size), F = static_cast<size_t>(c.ffn_dim);
  const AttentionShape a = stack.attention_shape();
  const size_t Q = a.q_dim(), KV = a.kv_dim();
  Lfm3Scratch s;
  s.stack_ = &stack;
  s.max_rows_ = max_rows;
  s.xn_.Reset(max_rows * H);
  s.tmp_.Reset(max_rows * H);
  s.wide_.Reset(max_rows * std::max({3 * H, Q, F}));
  s.wide2_.Reset(max_rows * std::max({H, Q, F}));
  if (c.num_attention_layers() > 0) {
    s.kv_.Reset(max_rows * 2 * KV);
    s.gate_.Reset(max_rows * a.heads);
    s.rope_.Reset(stack.ropes().size() * max_rows * a.head_dim);
    s.attn_.Allocate(std::max<size_t>(max_keys, 1), max_threads);
  }
  // A call takes at most one entry per row (a sequence has at least one row).
  s.attn_seqs_.reserve(max_rows);
  s.conv_seqs_.reserve(max_rows);
  return s;
}

size_t Lfm3Scratch::bytes() const {
  return (xn_.size() + tmp_.size() + wide_.size() + wide2_.size() + kv_.size() + gate_.size() + rope_.size() +
          attn_.scores.size()) *
         sizeof(float);
}

namespace {

// Moves rows keep[k] of x [R, H], xn [R, H] and op [R, op_cols] to row k (keep increasing, so row
// keep[k] >= k is still unread when row k is written); returns the new row count.
size_t KeepRows(std::span<const size_t> keep, size_t H, size_t op_cols, float* x, float* xn, float* op) {
  for (size_t k = 0; k < keep.size(); ++k) {
    const size_t j = keep[k];
    if (j == k) continue;
    std::memcpy(x + k * H, x + j * H, H * sizeof(float));
    std::memcpy(xn + k * H, xn + j * H, H * sizeof(float));
    std::memcpy(op + k * op_cols, op + j * op_cols, op_cols * sizeof(float));
  }
  return keep.size();
}

}  // namespace

Status Lfm3ForwardKeep(const Lfm3Stack& stack, std::span<Lfm3State* const> states,
                       std::span<const size_t> rows, std::span<const size_t> keep, float* x, Lfm3Scratch& sc,
                       ThreadTeam& team, TraceSink* sink) {
  const Lfm3StackConfig& cfg = stack.config();
  const bool attention = cfg.num_attention_layers() > 0;
  if (states.size() != rows.size()) return InvalidArgument("Lfm3Forward needs one row count per state");
  if (sc.stack_ != &stack) return InvalidArgument("this Lfm3Scratch was created for a different stack");
  size_t R = 0;
  for (size_t s = 0; s < states.size(); ++s) {
    const Lfm3State& st = *states[s];
    const size_t n = rows[s];
    if (st.stack_ != &stack) return InvalidArgument("an Lfm3State was created for a different stack");
    if (n > st.max_rows_) {
      return OutOfRange(
          StrFormat("%zu positions in one call exceed this sequence's limit of %zu", n, st.max_rows_));
    }
    if (st.max_positions_ != 0 && static_cast<size_t>(st.pos_) + n > st.max_positions_) {
      return OutOfRange(
          StrFormat("%zu more positions exceed this sequence's context of %zu (at position %lld)", n,
                    st.max_positions_, static_cast<long long>(st.pos_)));
    }
    if (attention && st.max_keys_ > sc.attn_.ld) {
      return InvalidArgument("this scratch was sized for shorter caches than a state it is asked to run");
    }
    for (size_t t = 0; t < s; ++t) {
      if (states[t] == states[s]) return InvalidArgument("a sequence appears twice in one batched call");
    }
    R += n;
  }
  if (R == 0) return Status::Ok();
  if (R > sc.max_rows_)
    return OutOfRange(StrFormat("%zu rows in one call exceed the scratch's %zu", R, sc.max_rows_));
  for (size_t k = 0; k < keep.size(); ++k) {
    if (keep[k] >= R || (k > 0 && keep[k] <= keep[k - 1])) {
      return InvalidArgument(
          StrFormat("the rows kept through the last layer must be increasing indices below %zu", R));
    }
  }
  if (attention && team.size() > sc.attn_.threads) {
    return InvalidArgument(StrFormat("a team of %d threads exceeds the %d this scratch was sized for",
                                     team.size(), sc.attn_.threads));
  }
  // Bidirectional: every call is a whole sequence.
  if (stack.bidirectional()) {
    for (Lfm3State* st : states) st->Reset();
  }
  const size_t H = static_cast<size_t>(cfg.hidden_size), hd = static_cast<size_t>(cfg.head_dim);
  const AttentionShape shape = stack.attention_shape();
  const size_t Q = shape.q_dim(), KV = shape.kv_dim(), heads = shape.heads;
  float* xn = sc.xn_.data();    // [R, H]
  float* tmp = sc.tmp_.data();  // [R, H]
  float* wide = sc.wide_.data();
  float* wide2 = sc.wide2_.data();

  // Rotary angles of every row at its own sequence's position, one block of rows per table.
  const size_t rope_block = sc.max_rows_ * hd;
  if (attention) {
    for (size_t t = 0; t < stack.ropes().size(); ++t) {
      size_t row = 0;
      for (size_t s = 0; s < states.size(); ++s) {
        for (size_t r = 0; r < rows[s]; ++r, ++row) {
          stack.ropes()[t].Angles(states[s]->pos_ + static_cast<int64_t>(r),
                                  sc.rope_.data() + t * rope_block + row * hd);
        }
      }
    }
  }

  for (size_t li = 0; li < stack.layers().size(); ++li) {
    const Lfm3Layer& L = stack.layers()[li];
    L.operator_norm.Forward(x, R, H, xn, H);
    sc.conv_seqs_.clear();
    sc.attn_seqs_.clear();
    size_t row0 = 0;
    for (size_t s = 0; s < states.size(); ++s) {
      if (rows[s] == 0) continue;
      if (L.kind == Lfm3LayerKind::kConv) {
        sc.conv_seqs_.push_back({states[s]->conv_state_[li].data(), row0, rows[s]});
      } else {
        sc.attn_seqs_.push_back({&states[s]->kv_[li], row0, rows[s],
                                 sc.rope_.data() + L.rope * rope_block + row0 * hd, hd,
                                 stack.bidirectional()});
      }
      row0 += rows[s];
    }
    if (L.kind == Lfm3LayerKind::kConv) {
      L.conv.Forward(xn, R, sc.conv_seqs_, wide, wide2, tmp, team);
      if (!keep.empty() && li + 1 == stack.layers().size()) R = KeepRows(keep, H, H, x, xn, tmp);
    } else {
      const Lfm3Attention& a = L.attn;
      float* q = wide;           // [R, Q]
      float* k = sc.kv_.data();  // [R, 2KV]: keys | values
      const LinearOut qkv[] = {{&a.q_proj, q, Q}, {&a.k_proj, k, 2 * KV}, {&a.v_proj, k + KV, 2 * KV}};
      ForwardShared(xn, R, H, qkv, team);
      AttendSequences(shape, a.q_norm, a.k_norm, stack.ropes()[L.rope], sc.attn_seqs_, q, Q, k, k + KV,
                      2 * KV, wide2, Q, sc.attn_, team);
      if (!keep.empty() && li + 1 == stack.layers().size()) R = KeepRows(keep, H, Q, x, xn, wide2);
      if (a.has_gate()) {
        float* g = sc.gate_.data();  // [R, heads]
        a.gate_proj.Forward(xn, R, H, g, heads, team);
        for (size_t r = 0; r < R; ++r) {
          for (size_t h = 0; h < heads; ++h) {
            const float sig = 1.0f / (1.0f + std::exp(-g[r * heads + h]));
            ops::Scale(wide2 + r * Q + h * hd, sig, wide2 + r * Q + h * hd, hd);
          }
        }
      }
      a.o_proj.Forward(wide2, R, Q, tmp, H, team);
    }
    if (L.has_post_operator_norm()) L.post_operator_norm.Forward(tmp, R, H, tmp, H);
    for (size_t r = 0; r < R; ++r) ops::Add(x + r * H, tmp + r * H, x + r * H, H);

    L.ffn_norm.Forward(x, R, H, xn, H);
    L.ffn.Forward(xn, R, wide, wide2, tmp, team);
    if (L.has_post_ffn_norm()) L.post_ffn_norm.Forward(tmp, R, H, tmp, H);
    for (size_t r = 0; r < R; ++r) ops::Add(x + r * H, tmp + r * H, x + r * H, H);
    TraceIndexed(sink, "layer%zu_out", li, x, R, H, H);
  }
  for (size_t s = 0; s < states.size(); ++s) states[s]->pos_ += static_cast<int64_t>(rows[s]);
  return Status::Ok();
}

Status Lfm3Forward(const Lfm3Stack& stack, std::span<Lfm3State* const> states, std::span<const size_t> rows,
                   float* x, Lfm3Scratch& scratch, ThreadTeam& team, TraceSink* sink) {
  return Lfm3ForwardKeep(stack, states, rows, {}, x, scratch, team, sink);
}

Status Lfm3Forward(const Lfm3Stack& stack, Lfm3State& state, float* x, size_t n, Lfm3Scratch& scratch,
                   ThreadTeam& team, TraceSink* sink) {
  Lfm3State* states[1] = {&state};
  const size_t rows[1] = {n};
  return Lfm3Forward(stack, states, rows, x, scratch, team, sink);
}

void Lfm3FinalNorm(const Lfm3Stack& stack, const float* x, size_t n, float* out) {
  const size_t H = static_cast<size_t>(stack.config().hidden_size);
  stack.final_norm().Forward(x, n, H, out, H);
}

}  // namespace lfmvox
