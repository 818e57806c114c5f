#include "models/lfm25_audio/lfm2_stack.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/memory_budget.h"
#include "blocks/weights.h"
#include "ops/ops.h"
#include "threading/thread_team.h"

namespace lfmvox {

namespace {

std::string LayerPrefix(const std::string& prefix, size_t i) {
  return prefix + "layers." + std::to_string(i) + ".";
}

// A full-attention cache of this many rows is the most one state may allocate (2 GiB of f32 per
// K or V at KV = 1: far above any context the models support).
constexpr size_t kMaxCacheFloats = size_t{1} << 31;

}  // namespace

Result<Lfm2Stack> Lfm2Stack::Load(const Checkpoint& ckpt, const Lfm2Config& c, const std::string& prefix) {
  Lfm2Stack s;
  s.config_ = c;
  const int64_t H = c.hidden_size, F = c.ffn_dim, hd = c.head_dim;
  const int64_t Q = int64_t{c.num_heads} * hd, KV = int64_t{c.num_kv_heads} * hd;
  s.layers_.resize(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i) {
    Lfm2Layer& L = s.layers_[i];
    L.kind = c.layers[i];
    const std::string p = LayerPrefix(prefix, i);
    LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, p + "operator_norm.weight", H, c.norm_eps, &L.operator_norm));
    LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, p + "ffn_norm.weight", H, c.norm_eps, &L.ffn_norm));
    if (L.kind == LayerKind::kConv) {
      LFM_RETURN_IF_ERROR(LoadShortConv(ckpt, p + "conv.", H, c.conv_kernel, c.conv_bias, &L.conv));
    } else {
      Lfm2Attention& a = L.attn;
      LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.q_proj", Q, H, false, &a.q_proj));
      LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.k_proj", KV, H, false, &a.k_proj));
      LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.v_proj", KV, H, false, &a.v_proj));
      LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.out_proj", H, Q, false, &a.out_proj));
      LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, p + "self_attn.q_layernorm.weight", hd, c.norm_eps, &a.q_norm));
      LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, p + "self_attn.k_layernorm.weight", hd, c.norm_eps, &a.k_norm));
    }
    LFM_RETURN_IF_ERROR(LoadSwiGluFfn(ckpt, p + "feed_forward.", H, F, &L.ffn));
  }
  LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, prefix + "embedding_norm.weight", H, c.norm_eps, &s.final_norm_));
  // transformers' default rotary init (split-half pairs), in f32 as it runs there.
  s.rope_ = RopeTable(c.rope_theta, static_cast<size_t>(hd), RopeStyle::kSplitHalf);
  return s;
}

AttentionShape Lfm2Stack::attention_shape() const {
  return {static_cast<size_t>(config_.num_heads), static_cast<size_t>(config_.num_kv_heads),
          static_cast<size_t>(config_.head_dim)};
}

size_t Lfm2Stack::weight_bytes() const {
  auto bytes = [](const Linear& l) { return l.w.bytes(); };
  size_t n = 0;
  for (const Lfm2Layer& L : layers_) {
    n += bytes(L.conv.in_proj) + bytes(L.conv.out_proj) + bytes(L.attn.q_proj) + bytes(L.attn.k_proj) +
         bytes(L.attn.v_proj) + bytes(L.attn.out_proj) + bytes(L.ffn.w1) + bytes(L.ffn.w2) + bytes(L.ffn.w3);
  }
  return n;
}

Result<Lfm2State> Lfm2State::Create(const Lfm2Stack& stack, size_t max_rows, size_t max_positions) {
  const Lfm2Config& c = stack.config();
  if (max_rows == 0) return InvalidArgument("Lfm2State needs max_rows >= 1");
  if (max_positions == 0) max_positions = static_cast<size_t>(c.max_positions);
  const size_t H = static_cast<size_t>(c.hidden_size);
  const size_t KV = stack.attention_shape().kv_dim();
  // Every cache's size first, against the memory budget, before anything is allocated, so a config that
  // asks for gigabytes is refused with the sizes instead of failing an allocation halfway.
  double cache_bytes = 0;
  size_t largest = 0;
  for (LayerKind k : c.layers) {
    if (k == LayerKind::kConv) continue;
    const size_t capacity = k == LayerKind::kSlidingAttention
                                ? static_cast<size_t>(c.sliding_window) - 1 + max_rows
                                : max_positions;
    cache_bytes += 2.0 * static_cast<double>(capacity) * static_cast<double>(KV) * sizeof(float);
    largest = std::max(largest, capacity);
  }
  LFM_RETURN_IF_ERROR(CheckMemoryBudget(
      cache_bytes, StrFormat("the K/V caches of %d attention layers", c.num_attention_layers()),
      StrFormat("up to %zu positions of %zu keys and values each, from the context or the sliding_window",
                largest, KV)));
  Lfm2State s;
  s.max_rows_ = max_rows;
  s.conv_state_.resize(c.layers.size());
  s.kv_.resize(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i) {
    if (c.layers[i] == LayerKind::kConv) {
      s.conv_state_[i].Reset(static_cast<size_t>(c.conv_kernel - 1) * H);
      continue;
    }
    const bool sliding = c.layers[i] == LayerKind::kSlidingAttention;
    const size_t window = sliding ? static_cast<size_t>(c.sliding_window) : 0;
    const size_t capacity = sliding ? window - 1 + max_rows : max_positions;
    if (capacity > kMaxCacheFloats / KV) {
      return OutOfRange(StrFormat("a K/V cache of %zu positions is too large; lower the context", capacity));
    }
    s.kv_[i].Allocate(capacity, KV, window);
    s.max_keys_ = std::max(s.max_keys_, capacity);
  }
  return s;
}

void Lfm2State::Reset() {
  pos_ = 0;
  for (auto& c : conv_state_) c.Zero();
  for (auto& kv : kv_) kv.Clear();
}

Status Lfm2State::StartProbe(int64_t key_first, size_t key_n, int64_t from) {
  if (kv_.empty() || std::all_of(kv_.begin(), kv_.end(), [](const KvCache& c) { return c.capacity == 0; })) {
    return Unimplemented("this stack has no attention layer to probe");
  }
  for (const KvCache& c : kv_) {
    if (c.capacity != 0 && c.window != 0) {
      return Unimplemented("attention probes need full-attention layers (a sliding window drops keys)");
    }
  }
  if (key_first < 0 || key_n == 0 || from < key_first + static_cast<int64_t>(key_n)) {
    return InvalidArgument(StrFormat("an attention probe needs keys [%lld, %lld) before its first row %lld",
                                     static_cast<long long>(key_first),
                                     static_cast<long long>(key_first) + static_cast<long long>(key_n),
                                     static_cast<long long>(from)));
  }
  probe_.on = true;
  probe_.key_first = key_first;
  probe_.key_n = key_n;
  probe_.from = from;
  probe_.rows.clear();
  probe_.scores.assign(key_n, 0.0f);
  return Status::Ok();
}

void Lfm2State::StopProbe() { probe_ = Probe{}; }

// Attention layer `layer`'s share of the probe rows of st's rows [row0, row0 + n) in this call (q normed
// and rotated, the call's keys already in the cache). Serial: a probe row costs heads × key_n dot products.
void RecordProbe(Lfm2State& st, size_t layer, const AttentionShape& shape, const float* q, size_t ldq,
                 size_t row0, size_t n) {
  Lfm2State::Probe& p = st.probe_;
  const KvCache& c = st.kv_[layer];
  if (p.key_first < c.first_pos ||
      p.key_first + static_cast<int64_t>(p.key_n) > c.first_pos + static_cast<int64_t>(c.len)) {
    return;  // keys not (or no longer) cached: StartProbe's conditions make this unreachable
  }
  const size_t hd = shape.head_dim, KV = shape.kv_dim(), group = shape.heads / shape.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* keys = c.k.data() + static_cast<size_t>(p.key_first - c.first_pos) * KV;
  float* sc = p.scores.data();
  for (size_t r = 0; r < n; ++r) {
    const int64_t pos = st.pos_ + static_cast<int64_t>(r);
    if (pos < p.from) continue;
    float* out = p.rows.data() + static_cast<size_t>(pos - p.from) * p.key_n;
    for (size_t h = 0; h < shape.heads; ++h) {
      const float* qh = q + (row0 + r) * ldq + h * hd;
      const float* kh = keys + (h / group) * hd;
      for (size_t j = 0; j < p.key_n; ++j) sc[j] = scale * ops::Dot(qh, kh + j * KV, hd);
      ops::Softmax(sc, p.key_n);
      ops::Add(out, sc, out, p.key_n);
    }
  }
}

size_t Lfm2State::remaining_positions() const {
  size_t r = SIZE_MAX;
  for (const KvCache& kv : kv_) {
    // Sliding caches shift; only growing (full) caches run out.
    if (kv.capacity != 0 && kv.window == 0) r = std::min(r, kv.capacity - kv.len);
  }
  return r;
}

size_t Lfm2State::state_bytes() const {
  size_t n = 0;
  for (const auto& c : conv_state_) n += c.size() * sizeof(float);
  for (const auto& kv : kv_) n += kv.bytes();
  return n;
}

Result<Lfm2Scratch> Lfm2Scratch::Create(const Lfm2Stack& stack, size_t max_rows, size_t max_keys,
                                        int max_threads) {
  if (max_rows == 0) return InvalidArgument("Lfm2Scratch needs max_rows >= 1");
  if (max_threads < 1) return InvalidArgument("Lfm2Scratch needs max_threads >= 1");
  const Lfm2Config& c = stack.config();
  const size_t H = static_cast<size_t>(c.hidden_size), F = static_cast<size_t>(c.ffn_dim);
  const AttentionShape a = stack.attention_shape();
  const size_t Q = a.q_dim(), KV = a.kv_dim();
  Lfm2Scratch s;
  s.max_rows_ = max_rows;
  s.xn_.Reset(max_rows * H);
  s.tmp_.Reset(max_rows * H);
  s.wide_.Reset(max_rows * std::max({3 * H, Q, F}));
  s.wide2_.Reset(max_rows * std::max({H, Q, F}));
  if (c.num_attention_layers() > 0) {
    s.kv_.Reset(max_rows * 2 * KV);
    s.rope_.Reset(max_rows * a.head_dim);
    s.attn_.Allocate(std::max<size_t>(max_keys, 1), max_threads);
  }
  // A call takes at most one entry per row (a sequence has at least one row).
  s.attn_seqs_.reserve(max_rows);
  s.conv_seqs_.reserve(max_rows);
  return s;
}

size_t Lfm2Scratch::bytes() const {
  return (xn_.size() + tmp_.size() + wide_.size() + wide2_.size() + kv_.size() + rope_.size() +
          attn_.scores.size()) *
         sizeof(float);
}

Status Lfm2Forward(const Lfm2Stack& stack, std::span<Lfm2State* const> states, std::span<const size_t> rows,
                   float* x, Lfm2Scratch& sc, ThreadTeam& team, TraceSink* sink) {
  const Lfm2Config& cfg = stack.config();
  if (states.size() != rows.size()) return InvalidArgument("Lfm2Forward needs one row count per state");
  size_t R = 0;
  for (size_t s = 0; s < states.size(); ++s) {
    const Lfm2State& st = *states[s];
    const size_t n = rows[s];
    if (st.conv_state_.size() != stack.layers().size()) {
      return InvalidArgument("an Lfm2State was created for a different stack");
    }
    if (n > st.max_rows_) {
      return OutOfRange(
          StrFormat("%zu positions in one call exceed this session's limit of %zu", n, st.max_rows_));
    }
    if (n > st.remaining_positions()) {
      return OutOfRange(StrFormat("the context is full: %zu more positions do not fit (%zu left)", n,
                                  st.remaining_positions()));
    }
    if (cfg.num_attention_layers() > 0 && st.max_keys_ > sc.attn_.ld) {
      return InvalidArgument("this scratch was sized for shorter caches than a state it is asked to run");
    }
    for (size_t t = 0; t < s; ++t) {
      if (states[t] == states[s]) return InvalidArgument("a sequence appears twice in one batched call");
    }
    R += n;
  }
  if (R == 0) return Status::Ok();
  if (R > sc.max_rows_) {
    return OutOfRange(StrFormat("%zu rows in one call exceed the scratch's %zu", R, sc.max_rows_));
  }
  if (cfg.num_attention_layers() > 0 && team.size() > sc.attn_.threads) {
    return InvalidArgument(StrFormat("a team of %d threads exceeds the %d this scratch was sized for",
                                     team.size(), sc.attn_.threads));
  }
  const size_t H = static_cast<size_t>(cfg.hidden_size), hd = static_cast<size_t>(cfg.head_dim);
  const AttentionShape shape = stack.attention_shape();
  const size_t Q = shape.q_dim(), KV = shape.kv_dim();
  float* xn = sc.xn_.data();    // [R, H]
  float* tmp = sc.tmp_.data();  // [R, H]
  float* wide = sc.wide_.data();
  float* wide2 = sc.wide2_.data();

  // Rotary angles of every row at its own sequence's position.
  if (cfg.num_attention_layers() > 0) {
    size_t row = 0;
    for (size_t s = 0; s < states.size(); ++s) {
      for (size_t r = 0; r < rows[s]; ++r, ++row) {
        stack.rope().Angles(states[s]->pos_ + static_cast<int64_t>(r), sc.rope_.data() + row * hd);
      }
    }
  }

  // Probed sequences: the rows of this call's positions start from zero (a rerun rewrites them).
  for (size_t s = 0; s < states.size(); ++s) {
    Lfm2State::Probe& p = states[s]->probe_;
    const int64_t end = states[s]->pos_ + static_cast<int64_t>(rows[s]);
    if (!p.on || end <= p.from) continue;
    const int64_t first = std::max(states[s]->pos_, p.from);
    const size_t need = static_cast<size_t>(end - p.from) * p.key_n;
    if (p.rows.size() < need) p.rows.resize(need, 0.0f);
    std::fill(p.rows.begin() + (first - p.from) * static_cast<int64_t>(p.key_n),
              p.rows.begin() + static_cast<int64_t>(need), 0.0f);
  }

  for (size_t li = 0; li < stack.layers().size(); ++li) {
    const Lfm2Layer& L = stack.layers()[li];
    L.operator_norm.Forward(x, R, H, xn, H);
    sc.conv_seqs_.clear();
    sc.attn_seqs_.clear();
    size_t row0 = 0;
    for (size_t s = 0; s < states.size(); ++s) {
      if (rows[s] == 0) continue;
      if (L.kind == LayerKind::kConv) {
        sc.conv_seqs_.push_back({states[s]->conv_state_[li].data(), row0, rows[s]});
      } else {
        sc.attn_seqs_.push_back({&states[s]->kv_[li], row0, rows[s], sc.rope_.data() + row0 * hd, hd});
      }
      row0 += rows[s];
    }
    if (L.kind == LayerKind::kConv) {
      L.conv.Forward(xn, R, sc.conv_seqs_, wide, wide2, tmp, team);
    } else {
      const Lfm2Attention& a = L.attn;
      float* q = wide;           // [R, Q]
      float* k = sc.kv_.data();  // [R, 2KV]: keys | values
      a.q_proj.Forward(xn, R, H, q, Q, team);
      a.k_proj.Forward(xn, R, H, k, 2 * KV, team);
      a.v_proj.Forward(xn, R, H, k + KV, 2 * KV, team);
      AttendSequences(shape, a.q_norm, a.k_norm, stack.rope(), sc.attn_seqs_, q, Q, k, k + KV, 2 * KV, wide2,
                      Q, sc.attn_, team);
      for (size_t s = 0, r0 = 0; s < states.size(); r0 += rows[s], ++s) {
        if (states[s]->probe_.on) RecordProbe(*states[s], li, shape, q, Q, r0, rows[s]);
      }
      a.out_proj.Forward(wide2, R, Q, tmp, H, team);
    }
    for (size_t r = 0; r < R; ++r) ops::Add(x + r * H, tmp + r * H, x + r * H, H);

    L.ffn_norm.Forward(x, R, H, xn, H);
    L.ffn.Forward(xn, R, wide, wide2, tmp, team);
    for (size_t r = 0; r < R; ++r) ops::Add(x + r * H, tmp + r * H, x + r * H, H);
    TraceIndexed(sink, "layer%zu_out", li, x, R, H, H);
  }
  for (size_t s = 0; s < states.size(); ++s) states[s]->pos_ += static_cast<int64_t>(rows[s]);
  return Status::Ok();
}

Status Lfm2Forward(const Lfm2Stack& stack, Lfm2State& state, float* x, size_t n, Lfm2Scratch& scratch,
                   ThreadTeam& team, TraceSink* sink) {
  Lfm2State* states[1] = {&state};
  const size_t rows[1] = {n};
  return Lfm2Forward(stack, states, rows, x, scratch, team, sink);
}

void Lfm2FinalNorm(const Lfm2Stack& stack, const float* x, size_t n, float* out) {
  const size_t H = static_cast<size_t>(stack.config().hidden_size);
  stack.final_norm().Forward(x, n, H, out, H);
}

}  // namespace lfmvox
