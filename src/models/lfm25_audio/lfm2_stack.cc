#include "models/lfm25_audio/lfm2_stack.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "blocks/weights.h"
#include "threading/thread_team.h"

namespace lfmvox {

namespace {

std::string LayerName(const std::string& prefix, size_t i, const char* leaf) {
  return prefix + "layers." + std::to_string(i) + "." + leaf;
}

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
    auto name = [&](const char* leaf) { return LayerName(prefix, i, leaf); };
    LFM_RETURN_IF_ERROR(LoadF32(ckpt, name("operator_norm.weight"), Shape{H}, &L.operator_norm));
    LFM_RETURN_IF_ERROR(LoadF32(ckpt, name("ffn_norm.weight"), Shape{H}, &L.ffn_norm));
    if (L.kind == LayerKind::kConv) {
      LFM_ASSIGN_OR_RETURN(L.in_proj, LoadMatrix(ckpt, name("conv.in_proj.weight"), 3 * H, H));
      LFM_ASSIGN_OR_RETURN(L.conv_out, LoadMatrix(ckpt, name("conv.out_proj.weight"), H, H));
      LFM_RETURN_IF_ERROR(LoadF32(ckpt, name("conv.conv.weight"), Shape{H, 1, c.conv_kernel}, &L.conv));
      if (c.conv_bias) {
        LFM_RETURN_IF_ERROR(LoadF32(ckpt, name("conv.in_proj.bias"), Shape{3 * H}, &L.in_proj_bias));
        LFM_RETURN_IF_ERROR(LoadF32(ckpt, name("conv.conv.bias"), Shape{H}, &L.conv_bias));
        LFM_RETURN_IF_ERROR(LoadF32(ckpt, name("conv.out_proj.bias"), Shape{H}, &L.conv_out_bias));
      }
    } else {
      LFM_ASSIGN_OR_RETURN(L.q_proj, LoadMatrix(ckpt, name("self_attn.q_proj.weight"), Q, H));
      LFM_ASSIGN_OR_RETURN(L.k_proj, LoadMatrix(ckpt, name("self_attn.k_proj.weight"), KV, H));
      LFM_ASSIGN_OR_RETURN(L.v_proj, LoadMatrix(ckpt, name("self_attn.v_proj.weight"), KV, H));
      LFM_ASSIGN_OR_RETURN(L.o_proj, LoadMatrix(ckpt, name("self_attn.out_proj.weight"), H, Q));
      LFM_RETURN_IF_ERROR(LoadF32(ckpt, name("self_attn.q_layernorm.weight"), Shape{hd}, &L.q_norm));
      LFM_RETURN_IF_ERROR(LoadF32(ckpt, name("self_attn.k_layernorm.weight"), Shape{hd}, &L.k_norm));
    }
    LFM_ASSIGN_OR_RETURN(L.w1, LoadMatrix(ckpt, name("feed_forward.w1.weight"), F, H));
    LFM_ASSIGN_OR_RETURN(L.w3, LoadMatrix(ckpt, name("feed_forward.w3.weight"), F, H));
    LFM_ASSIGN_OR_RETURN(L.w2, LoadMatrix(ckpt, name("feed_forward.w2.weight"), H, F));
  }
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, prefix + "embedding_norm.weight", Shape{H}, &s.final_norm_));

  // transformers' default rotary init, in f32 as it runs there:
  // inv_freq[i] = 1 / theta^(f32(2i) / f32(hd)).
  s.inv_freq_.Reset(static_cast<size_t>(hd / 2));
  for (int64_t i = 0; i < hd / 2; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(hd);
    const float p = static_cast<float>(std::pow(c.rope_theta, static_cast<double>(e)));
    s.inv_freq_[static_cast<size_t>(i)] = 1.0f / p;
  }
  return s;
}

size_t Lfm2Stack::weight_bytes() const {
  auto bytes = [](const ops::Weight& w) { return w.bytes(); };
  size_t n = 0;
  for (const Lfm2Layer& L : layers_) {
    n += bytes(L.in_proj) + bytes(L.conv_out) + bytes(L.q_proj) + bytes(L.k_proj) + bytes(L.v_proj) +
         bytes(L.o_proj) + bytes(L.w1) + bytes(L.w2) + bytes(L.w3);
  }
  return n;
}

Result<Lfm2State> Lfm2State::Create(const Lfm2Stack& stack, size_t max_rows, size_t max_positions,
                                    int max_threads) {
  const Lfm2Config& c = stack.config();
  if (max_rows == 0) return InvalidArgument("Lfm2State needs max_rows >= 1");
  if (max_threads < 1) return InvalidArgument("Lfm2State needs max_threads >= 1");
  if (max_positions == 0) max_positions = static_cast<size_t>(c.max_positions);
  // A full-attention cache of max_positions rows must be a sane allocation.
  const size_t H = static_cast<size_t>(c.hidden_size), F = static_cast<size_t>(c.ffn_dim);
  const size_t hd = static_cast<size_t>(c.head_dim);
  const size_t Q = static_cast<size_t>(c.num_heads) * hd, KV = static_cast<size_t>(c.num_kv_heads) * hd;
  Lfm2State s;
  s.max_rows_ = max_rows;
  s.max_threads_ = max_threads;
  s.conv_state_.resize(c.layers.size());
  s.kv_.resize(c.layers.size());
  size_t max_keys = 1;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    switch (c.layers[i]) {
      case LayerKind::kConv:
        s.conv_state_[i].Reset(static_cast<size_t>(c.conv_kernel - 1) * H);
        break;
      case LayerKind::kSlidingAttention:
      case LayerKind::kFullAttention: {
        KvCache& kv = s.kv_[i];
        if (c.layers[i] == LayerKind::kSlidingAttention) {
          kv.window = static_cast<size_t>(c.sliding_window);
          kv.capacity = kv.window - 1 + max_rows;
        } else {
          kv.capacity = max_positions;
        }
        if (kv.capacity > (size_t{1} << 31) / KV) {
          return OutOfRange(
              StrFormat("a K/V cache of %zu positions is too large; lower the context", kv.capacity));
        }
        kv.k.Reset(kv.capacity * KV);
        kv.v.Reset(kv.capacity * KV);
        max_keys = std::max(max_keys, kv.capacity);
        break;
      }
    }
  }
  const size_t wide = std::max({3 * H, Q, F}), wide2 = std::max({H, Q, F});
  s.xn_.Reset(max_rows * H);
  s.tmp_.Reset(max_rows * H);
  s.wide_.Reset(max_rows * wide);
  s.wide2_.Reset(max_rows * wide2);
  s.rope_.Reset(max_rows * hd);
  s.scores_ld_ = RoundUp(max_keys, 16);
  s.scores_.Reset(static_cast<size_t>(max_threads) * s.scores_ld_);
  return s;
}

void Lfm2State::Reset() {
  pos_ = 0;
  for (auto& c : conv_state_) c.Zero();
  for (auto& kv : kv_) {
    kv.len = 0;
    kv.first_pos = 0;
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
  for (const auto& c : conv_state_) n += c.size() * 4;
  for (const auto& kv : kv_) n += (kv.k.size() + kv.v.size()) * 4;
  return n;
}

size_t Lfm2State::scratch_bytes() const {
  return (xn_.size() + tmp_.size() + wide_.size() + wide2_.size() + rope_.size() + scores_.size()) * 4;
}

namespace {

void Trace(TraceSink* sink, const char* fmt, size_t i, const float* x, size_t rows, size_t cols, size_t ld) {
  if (sink == nullptr) return;
  char name[64];
  std::snprintf(name, sizeof name, fmt, i);
  sink->Record(name, x, rows, cols, ld);
}

// ShortConv: BCx = in_proj(xn); u = B ⊙ x; c = causal depthwise conv(u) with
// the carried history; y = out_proj(C ⊙ c).
void ShortConv(const Lfm2Config& cfg, const Lfm2Layer& L, float* conv_state, const float* xn, size_t n,
               float* bcx /* [n, 3H] */, float* conv /* [n, H] */, float* y /* [n, H] */, ThreadTeam& team) {
  const size_t H = static_cast<size_t>(cfg.hidden_size), K = static_cast<size_t>(cfg.conv_kernel);
  ops::MatMul(xn, n, H, L.in_proj, L.in_proj_bias.data(), bcx, 3 * H, team);
  for (size_t r = 0; r < n; ++r) {
    float* row = bcx + r * 3 * H;
    ops::Mul(row, row + 2 * H, row, H);  // B ⊙ x, into the B slot
  }
  ops::CausalDepthwiseConv(bcx, n, 3 * H, H, L.conv.data(), K, conv_state, conv, H);
  for (size_t r = 0; r < n; ++r) {
    float* c = conv + r * H;
    if (L.conv_bias.size()) ops::Add(c, L.conv_bias.data(), c, H);
    ops::Mul(bcx + r * 3 * H + H, c, c, H);  // C ⊙ conv
  }
  ops::MatMul(conv, n, H, L.conv_out, L.conv_out_bias.data(), y, H, team);
}

}  // namespace

Status Lfm2Forward(const Lfm2Stack& stack, Lfm2State& st, float* x, size_t n, ThreadTeam& team,
                   TraceSink* sink) {
  const Lfm2Config& cfg = stack.config();
  if (n == 0) return Status::Ok();
  if (n > st.max_rows_) {
    return OutOfRange(
        StrFormat("%zu positions in one call exceed this session's limit of %zu", n, st.max_rows_));
  }
  if (team.size() > st.max_threads_) {
    return InvalidArgument(StrFormat("a team of %d threads exceeds the %d this session was sized for",
                                     team.size(), st.max_threads_));
  }
  if (n > st.remaining_positions()) {
    return OutOfRange(StrFormat("the context is full: %zu more positions do not fit (%zu left)", n,
                                st.remaining_positions()));
  }
  const size_t H = static_cast<size_t>(cfg.hidden_size), F = static_cast<size_t>(cfg.ffn_dim);
  const size_t hd = static_cast<size_t>(cfg.head_dim), half = hd / 2;
  const size_t heads = static_cast<size_t>(cfg.num_heads), kv_heads = static_cast<size_t>(cfg.num_kv_heads);
  const size_t Q = heads * hd, KV = kv_heads * hd, group = heads / kv_heads;
  const float eps = cfg.norm_eps;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float* xn = st.xn_.data();
  float* tmp = st.tmp_.data();
  float* wide = st.wide_.data();
  float* wide2 = st.wide2_.data();

  // Rotary tables for this call's positions: angle = f32(f32(pos) · inv_freq)
  // as transformers forms it; cos/sin rounded from double.
  if (cfg.num_attention_layers() > 0) {
    for (size_t r = 0; r < n; ++r) {
      const float p = static_cast<float>(st.pos_ + static_cast<int64_t>(r));
      float* cs = st.rope_.data() + r * hd;
      for (size_t i = 0; i < half; ++i) {
        const double a = static_cast<double>(p * stack.inv_freq()[i]);
        cs[i] = static_cast<float>(std::cos(a));
        cs[half + i] = static_cast<float>(std::sin(a));
      }
    }
  }

  for (size_t li = 0; li < stack.layers().size(); ++li) {
    const Lfm2Layer& L = stack.layers()[li];
    for (size_t r = 0; r < n; ++r) ops::RmsNorm(x + r * H, L.operator_norm.data(), H, eps, xn + r * H);

    if (L.kind == LayerKind::kConv) {
      ShortConv(cfg, L, st.conv_state_[li].data(), xn, n, wide, wide2, tmp, team);
    } else {
      KvCache& kv = st.kv_[li];
      const size_t base = kv.len;  // cache row of this call's first position
      float* q = wide;             // [n, Q]
      float* kr = kv.k.data() + base * KV;
      float* vr = kv.v.data() + base * KV;
      ops::MatMul(xn, n, H, L.q_proj, nullptr, q, Q, team);
      ops::MatMul(xn, n, H, L.k_proj, nullptr, kr, KV, team);
      ops::MatMul(xn, n, H, L.v_proj, nullptr, vr, KV, team);
      for (size_t r = 0; r < n; ++r) {
        const float* cs = st.rope_.data() + r * hd;
        for (size_t h = 0; h < heads; ++h) {
          float* v = q + r * Q + h * hd;
          ops::RmsNorm(v, L.q_norm.data(), hd, eps, v);
          ops::RopeSplitHalf(v, hd, cs, cs + half);
        }
        for (size_t h = 0; h < kv_heads; ++h) {
          float* v = kr + r * KV + h * hd;
          ops::RmsNorm(v, L.k_norm.data(), hd, eps, v);
          ops::RopeSplitHalf(v, hd, cs, cs + half);
        }
      }
      kv.len += n;
      const size_t window = kv.window;
      float* out = wide2;  // [n, Q]
      team.Run(n * heads, [&](size_t task, int thread) {
        const size_t r = task / heads, h = task % heads, g = h / group;
        const size_t qi = base + r;  // cache row of this query
        const size_t lo = window && qi + 1 > window ? qi + 1 - window : 0;
        ops::AttendOne(q + r * Q + h * hd, kv.k.data() + lo * KV + g * hd, KV, kv.v.data() + lo * KV + g * hd,
                       KV, qi + 1 - lo, hd, scale,
                       st.scores_.data() + static_cast<size_t>(thread) * st.scores_ld_, out + r * Q + h * hd);
      });
      if (window && kv.len > window - 1) {  // keep the last window-1 rows for the next call
        const size_t drop = kv.len - (window - 1);
        std::memmove(kv.k.data(), kv.k.data() + drop * KV, (window - 1) * KV * sizeof(float));
        std::memmove(kv.v.data(), kv.v.data() + drop * KV, (window - 1) * KV * sizeof(float));
        kv.len = window - 1;
        kv.first_pos += static_cast<int64_t>(drop);
      }
      ops::MatMul(out, n, Q, L.o_proj, nullptr, tmp, H, team);
    }
    for (size_t r = 0; r < n; ++r) ops::Add(x + r * H, tmp + r * H, x + r * H, H);

    // SwiGLU feed-forward.
    for (size_t r = 0; r < n; ++r) ops::RmsNorm(x + r * H, L.ffn_norm.data(), H, eps, xn + r * H);
    ops::MatMul(xn, n, H, L.w1, nullptr, wide, F, team);
    ops::MatMul(xn, n, H, L.w3, nullptr, wide2, F, team);
    ops::SwiGlu(wide, wide2, wide, n * F);
    ops::MatMul(wide, n, F, L.w2, nullptr, tmp, H, team);
    for (size_t r = 0; r < n; ++r) ops::Add(x + r * H, tmp + r * H, x + r * H, H);
    Trace(sink, "layer%zu_out", li, x, n, H, H);
  }
  st.pos_ += static_cast<int64_t>(n);
  return Status::Ok();
}

void Lfm2FinalNorm(const Lfm2Stack& stack, const float* x, size_t n, float* out) {
  const size_t H = static_cast<size_t>(stack.config().hidden_size);
  for (size_t r = 0; r < n; ++r)
    ops::RmsNorm(x + r * H, stack.final_norm(), H, stack.config().norm_eps, out + r * H);
}

}  // namespace lfmvox
