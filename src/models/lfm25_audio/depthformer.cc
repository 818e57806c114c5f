#include "models/lfm25_audio/depthformer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "blocks/weights.h"
#include "io/json_config.h"
#include "threading/thread_team.h"

namespace lfmvox {

using nlohmann::json;

namespace {

constexpr const char* kWhere = "config.json";
const std::string kSection = "config.json [depthformer]";
constexpr int64_t kMaxDim = 1 << 16;  // far above any real width; stops absurd allocations

// Everything but the two widths that only the tensors know (ffn, vocab).
Result<DepthformerConfig> ParseConfig(const json& model) {
  DepthformerConfig c;
  if (!model.is_object()) return InvalidArgument(StrFormat("%s must hold a JSON object", kWhere));
  LFM_RETURN_IF_ERROR(GetInt(model, "codebooks", kWhere, true, 1, 64, &c.num_codebooks));
  auto it = model.find("depthformer");
  if (it == model.end() || !it->is_object()) {
    return NotFound(StrFormat("%s lacks the \"depthformer\" section {\"layers\", \"dim\", \"tie\"}", kWhere));
  }
  const json& d = *it;
  LFM_RETURN_IF_ERROR(GetInt(d, "layers", kSection, true, 1, 256, &c.layers));
  LFM_RETURN_IF_ERROR(GetInt(d, "dim", kSection, true, 1, kMaxDim, &c.dim));
  LFM_RETURN_IF_ERROR(GetInt(d, "heads", kSection, false, 1, kMaxDim, &c.heads));
  LFM_RETURN_IF_ERROR(GetInt(d, "kv_heads", kSection, false, 1, kMaxDim, &c.kv_heads));
  LFM_RETURN_IF_ERROR(GetBool(d, "tie", kSection, &c.tie));
  double eps = c.eps;
  LFM_RETURN_IF_ERROR(GetDouble(d, "rope_theta", kSection, 1.0, 1e12, &c.rope_theta));
  LFM_RETURN_IF_ERROR(GetDouble(d, "norm_eps", kSection, 1e-12, 1.0, &eps));
  c.eps = static_cast<float>(eps);
  if (c.dim % c.heads != 0 || c.heads % c.kv_heads != 0) {
    return InvalidArgument(
        StrFormat("%s: depthformer dim %d, heads %d, kv_heads %d: dim must divide into the heads "
                  "and heads into the kv heads",
                  kWhere, c.dim, c.heads, c.kv_heads));
  }
  c.head_dim = c.dim / c.heads;
  if (c.head_dim % 2 != 0) {
    return InvalidArgument(StrFormat("%s: depthformer head dim %d (dim / heads) must be even for RoPE pairs",
                                     kWhere, c.head_dim));
  }
  return c;
}

// The row count of a [rows, cols] tensor whose cols are known.
Result<int> RowsOf(const Checkpoint& ckpt, const std::string& name, int64_t cols) {
  LFM_ASSIGN_OR_RETURN(TensorView t, ckpt.Get(name));
  if (t.shape.rank != 2 || t.shape[1] != cols || t.shape[0] < 1 || t.shape[0] > kMaxDim) {
    return InvalidArgument(StrFormat("tensor %s has shape %s; expected [rows, %lld]", name.c_str(),
                                     t.shape.ToString().c_str(), static_cast<long long>(cols)));
  }
  return static_cast<int>(t.shape[0]);
}

size_t MatrixBytes(const ops::Weight& w) { return w.bytes(); }

bool SameContents(const ops::Weight& a, const ops::Weight& b) {
  return a.format == b.format && a.rows == b.rows && a.cols == b.cols && a.row_bytes == b.row_bytes &&
         std::memcmp(a.data, b.data, MatrixBytes(a)) == 0;
}

// Records the [D] or [V] vector of codebook k under fmt ("cb%zu_out").
void TraceCodebook(TraceSink* sink, const char* fmt, size_t k, const float* x, size_t n) {
  if (sink == nullptr) return;
  char name[32];
  std::snprintf(name, sizeof name, fmt, k);
  sink->Record(name, x, 1, n, n);
}

}  // namespace

Result<Depthformer> Depthformer::Load(const Checkpoint& ckpt, const json& model_config, int backbone_hidden) {
  LFM_ASSIGN_OR_RETURN(DepthformerConfig c, ParseConfig(model_config));
  if (backbone_hidden < 1) return InvalidArgument("the depthformer needs the backbone hidden size (>= 1)");
  const int64_t D = c.dim, H = backbone_hidden, C = c.num_codebooks, hd = c.head_dim;
  const int64_t Q = int64_t{c.heads} * hd, KV = int64_t{c.kv_heads} * hd;
  LFM_ASSIGN_OR_RETURN(c.ffn, RowsOf(ckpt, "depthformer.layers.0.feed_forward.w1.weight", D));
  LFM_ASSIGN_OR_RETURN(c.codebook_vocab, RowsOf(ckpt, "depth_embeddings.0.embedding.weight", D));
  const int64_t F = c.ffn, V = c.codebook_vocab;

  Depthformer m;
  m.config_ = c;
  m.backbone_hidden_ = backbone_hidden;
  LFM_ASSIGN_OR_RETURN(m.depth_linear_, LoadMatrix(ckpt, "depth_linear.weight", C * D, H));
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, "depth_linear.bias", Shape{C * D}, &m.depth_linear_bias_));

  m.layers_.resize(static_cast<size_t>(c.layers));
  for (int j = 0; j < c.layers; ++j) {
    DepthformerLayer& L = m.layers_[static_cast<size_t>(j)];
    const std::string p = "depthformer.layers." + std::to_string(j) + ".";
    LFM_RETURN_IF_ERROR(LoadF32(ckpt, p + "operator_norm.weight", Shape{D}, &L.operator_norm));
    LFM_RETURN_IF_ERROR(LoadF32(ckpt, p + "ffn_norm.weight", Shape{D}, &L.ffn_norm));
    LFM_ASSIGN_OR_RETURN(L.qkv_proj, LoadMatrix(ckpt, p + "operator.qkv_proj.weight", Q + 2 * KV, D));
    LFM_ASSIGN_OR_RETURN(L.out_proj, LoadMatrix(ckpt, p + "operator.out_proj.weight", D, Q));
    LFM_RETURN_IF_ERROR(
        LoadF32(ckpt, p + "operator.bounded_attention.q_layernorm.weight", Shape{hd}, &L.q_norm));
    LFM_RETURN_IF_ERROR(
        LoadF32(ckpt, p + "operator.bounded_attention.k_layernorm.weight", Shape{hd}, &L.k_norm));
    LFM_ASSIGN_OR_RETURN(L.w1, LoadMatrix(ckpt, p + "feed_forward.w1.weight", F, D));
    LFM_ASSIGN_OR_RETURN(L.w3, LoadMatrix(ckpt, p + "feed_forward.w3.weight", F, D));
    LFM_ASSIGN_OR_RETURN(L.w2, LoadMatrix(ckpt, p + "feed_forward.w2.weight", D, F));
  }

  m.codebooks_.resize(static_cast<size_t>(C));
  for (int k = 0; k < C; ++k) {
    DepthCodebook& cb = m.codebooks_[static_cast<size_t>(k)];
    const std::string p = "depth_embeddings." + std::to_string(k) + ".";
    LFM_ASSIGN_OR_RETURN(cb.embedding, LoadMatrix(ckpt, p + "embedding.weight", V, D));
    LFM_RETURN_IF_ERROR(LoadF32(ckpt, p + "embedding_norm.weight", Shape{D}, &cb.norm));
    const std::string logits_name = p + "to_logits.weight";
    if (ckpt.Has(logits_name)) {
      LFM_ASSIGN_OR_RETURN(cb.to_logits, LoadMatrix(ckpt, logits_name, V, D));
      // Tied in the model, so a stored copy must be the same table; a
      // different one would make the result depend on load order.
      if (c.tie && !SameContents(cb.to_logits, cb.embedding)) {
        return InvalidArgument(
            logits_name + " differs from " + p +
            "embedding.weight although config.json sets depthformer.tie = true; drop the copy "
            "or set tie to false");
      }
    } else if (c.tie) {
      cb.to_logits = cb.embedding;
    } else {
      return NotFound(logits_name +
                      " is missing and config.json sets depthformer.tie = false, so it is required");
    }
  }

  // liquid-audio's precompute_freqs_cis, in f32 as it runs there:
  // freq[m] = 1 / θ^(f32(2m) / hd), angle = f32(pos · freq[m]); cos/sin of
  // the angle rounded from double (complex64 table).
  const size_t half = static_cast<size_t>(hd / 2);
  m.rope_cos_.Reset(static_cast<size_t>(C) * half);
  m.rope_sin_.Reset(static_cast<size_t>(C) * half);
  for (size_t i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(hd);
    const float freq = 1.0f / static_cast<float>(std::pow(c.rope_theta, static_cast<double>(e)));
    for (int64_t pos = 0; pos < C; ++pos) {
      const double a = static_cast<double>(static_cast<float>(pos) * freq);
      m.rope_cos_[static_cast<size_t>(pos) * half + i] = static_cast<float>(std::cos(a));
      m.rope_sin_[static_cast<size_t>(pos) * half + i] = static_cast<float>(std::sin(a));
    }
  }
  return m;
}

size_t Depthformer::weight_bytes() const {
  size_t stack = 0;  // read once per codebook step
  for (const DepthformerLayer& L : layers_) {
    stack += MatrixBytes(L.qkv_proj) + MatrixBytes(L.out_proj) + MatrixBytes(L.w1) + MatrixBytes(L.w3) +
             MatrixBytes(L.w2);
  }
  size_t n = MatrixBytes(depth_linear_) + codebooks_.size() * stack;
  for (size_t k = 0; k < codebooks_.size(); ++k) {
    n += MatrixBytes(codebooks_[k].to_logits);
    if (k + 1 < codebooks_.size()) n += codebooks_[k].embedding.row_bytes;
  }
  return n;
}

Result<DepthformerState> DepthformerState::Create(const Depthformer& m, int max_threads) {
  if (max_threads < 1) return InvalidArgument("DepthformerState needs max_threads >= 1");
  const DepthformerConfig& c = m.config();
  const size_t C = static_cast<size_t>(c.num_codebooks), D = static_cast<size_t>(c.dim);
  const size_t hd = static_cast<size_t>(c.head_dim);
  const size_t Q = static_cast<size_t>(c.heads) * hd, KV = static_cast<size_t>(c.kv_heads) * hd;
  const size_t F = static_cast<size_t>(c.ffn), V = static_cast<size_t>(c.codebook_vocab);
  DepthformerState s;
  s.max_threads_ = max_threads;
  s.k_.Reset(static_cast<size_t>(c.layers) * C * KV);
  s.v_.Reset(static_cast<size_t>(c.layers) * C * KV);
  s.in_.Reset(C * D);
  s.x_.Reset(D);
  s.xn_.Reset(D);
  s.tmp_.Reset(D);
  s.qkv_.Reset(Q + 2 * KV);
  s.attn_.Reset(Q);
  s.gate_.Reset(F);
  s.up_.Reset(F);
  s.logits_.Reset(V);
  s.scores_ld_ = RoundUp(C, 16);
  s.scores_.Reset(static_cast<size_t>(max_threads) * s.scores_ld_);
  return s;
}

size_t DepthformerState::bytes() const {
  return (k_.size() + v_.size() + in_.size() + x_.size() + xn_.size() + tmp_.size() + qkv_.size() +
          attn_.size() + gate_.size() + up_.size() + logits_.size() + scores_.size()) *
         sizeof(float);
}

Status SampleAudioFrame(const Depthformer& m, DepthformerState& st, const float* h, Sampler& sampler,
                        Rng& rng, int32_t* codes, ThreadTeam& team, TraceSink* sink) {
  const DepthformerConfig& c = m.config_;
  const size_t C = static_cast<size_t>(c.num_codebooks), D = static_cast<size_t>(c.dim);
  const size_t hd = static_cast<size_t>(c.head_dim), half = hd / 2;
  const size_t heads = static_cast<size_t>(c.heads), kv_heads = static_cast<size_t>(c.kv_heads);
  const size_t Q = heads * hd, KV = kv_heads * hd, group = heads / kv_heads;
  const size_t F = static_cast<size_t>(c.ffn), V = static_cast<size_t>(c.codebook_vocab);
  if (st.in_.size() != C * D || st.logits_.size() != V || st.k_.size() != m.layers_.size() * C * KV ||
      st.gate_.size() != F) {
    return InvalidArgument("this DepthformerState was created for a different depthformer");
  }
  if (team.size() > st.max_threads_) {
    return InvalidArgument(
        StrFormat("a team of %d threads exceeds the %d this DepthformerState was sized for", team.size(),
                  st.max_threads_));
  }
  if (sampler.max_vocab() < V) {
    return InvalidArgument(
        StrFormat("the audio sampler takes %zu logits; the depthformer yields %zu", sampler.max_vocab(), V));
  }
  const float eps = c.eps;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float* in = st.in_.data();
  float* x = st.x_.data();
  float* xn = st.xn_.data();
  float* tmp = st.tmp_.data();
  float* q = st.qkv_.data();  // [Q] then K [KV], V [KV]
  float* attn = st.attn_.data();
  float* logits = st.logits_.data();

  ops::MatMul(h, 1, static_cast<size_t>(m.backbone_hidden_), m.depth_linear_, m.depth_linear_bias_.data(), in,
              C * D, team);
  if (sink) sink->Record("depth_linear_out", in, C, D, D);

  for (size_t k = 0; k < C; ++k) {
    std::memcpy(x, in + k * D, D * sizeof(float));
    if (k > 0) AccumulateRow(m.codebooks_[k - 1].embedding, static_cast<size_t>(codes[k - 1]), x);
    TraceCodebook(sink, "cb%zu_in", k, x, D);
    const float* cos = m.rope_cos_.data() + k * half;
    const float* sin = m.rope_sin_.data() + k * half;

    for (size_t j = 0; j < m.layers_.size(); ++j) {
      const DepthformerLayer& L = m.layers_[j];
      float* kc = st.k_.data() + j * C * KV;  // [C, KV] this layer's keys; row k is this step's
      float* vc = st.v_.data() + j * C * KV;

      ops::RmsNorm(x, L.operator_norm.data(), D, eps, xn);
      ops::MatMul(xn, 1, D, L.qkv_proj, nullptr, q, Q + 2 * KV, team);
      for (size_t hh = 0; hh < heads; ++hh) {
        float* v = q + hh * hd;
        ops::RmsNorm(v, L.q_norm.data(), hd, eps, v);
        ops::RopeInterleaved(v, hd, cos, sin);
      }
      for (size_t g = 0; g < kv_heads; ++g) {
        float* v = q + Q + g * hd;
        ops::RmsNorm(v, L.k_norm.data(), hd, eps, v);
        ops::RopeInterleaved(v, hd, cos, sin);
      }
      std::memcpy(kc + k * KV, q + Q, KV * sizeof(float));
      std::memcpy(vc + k * KV, q + Q + KV, KV * sizeof(float));
      // One query per head against the k + 1 cached positions: no mask needed.
      team.Run(heads, [&](size_t hh, int thread) {
        const size_t g = hh / group;
        ops::AttendOne(q + hh * hd, kc + g * hd, KV, vc + g * hd, KV, k + 1, hd, scale,
                       st.scores_.data() + static_cast<size_t>(thread) * st.scores_ld_, attn + hh * hd);
      });
      ops::MatMul(attn, 1, Q, L.out_proj, nullptr, tmp, D, team);
      ops::Add(x, tmp, x, D);

      ops::RmsNorm(x, L.ffn_norm.data(), D, eps, xn);
      ops::MatMul(xn, 1, D, L.w1, nullptr, st.gate_.data(), F, team);
      ops::MatMul(xn, 1, D, L.w3, nullptr, st.up_.data(), F, team);
      ops::SwiGlu(st.gate_.data(), st.up_.data(), st.gate_.data(), F);
      ops::MatMul(st.gate_.data(), 1, F, L.w2, nullptr, tmp, D, team);
      ops::Add(x, tmp, x, D);
    }
    TraceCodebook(sink, "cb%zu_out", k, x, D);

    const DepthCodebook& cb = m.codebooks_[k];
    ops::RmsNorm(x, cb.norm.data(), D, eps, xn);
    ops::MatMul(xn, 1, D, cb.to_logits, nullptr, logits, V, team);
    TraceCodebook(sink, "cb%zu_logits", k, logits, V);
    LFM_ASSIGN_OR_RETURN(codes[k], sampler.Sample({logits, V}, rng));
  }
  return Status::Ok();
}

}  // namespace lfmvox
