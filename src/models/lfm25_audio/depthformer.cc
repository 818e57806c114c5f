#include "models/lfm25_audio/depthformer.h"

#include <cmath>
#include <cstring>
#include <string>

#include "blocks/weights.h"
#include "ops/ops.h"
#include "threading/stage_policy.h"
#include "threading/thread_team.h"

namespace lfmvox {

namespace {

constexpr int64_t kMaxDepthDim = 1 << 16;  // far above any real width; stops absurd allocations

// The row count of a [rows, cols] tensor whose cols are known.
Result<int> RowsOf(const Checkpoint& ckpt, const std::string& name, int64_t cols) {
  LFM_ASSIGN_OR_RETURN(TensorView t, ckpt.Get(name));
  if (t.shape.rank != 2 || t.shape[1] != cols || t.shape[0] < 1 || t.shape[0] > kMaxDepthDim) {
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

}  // namespace

Result<Depthformer> Depthformer::Load(const Checkpoint& ckpt, const DepthformerConfig& config,
                                      int backbone_hidden) {
  DepthformerConfig c = config;
  if (c.layers < 1 || c.dim < 1 || c.num_codebooks < 1 || c.head_dim < 2 || c.heads * c.head_dim != c.dim ||
      c.kv_heads < 1 || c.heads % c.kv_heads != 0) {
    return InvalidArgument(
        "the depthformer config is incomplete; parse it with Lfm25AudioConfig (num_codebooks set)");
  }
  if (backbone_hidden < 1) return InvalidArgument("the depthformer needs the backbone hidden size (>= 1)");
  const int64_t D = c.dim, H = backbone_hidden, C = c.num_codebooks, hd = c.head_dim;
  const int64_t Q = int64_t{c.heads} * hd, KV = int64_t{c.kv_heads} * hd;
  LFM_ASSIGN_OR_RETURN(c.ffn, RowsOf(ckpt, "depthformer.layers.0.feed_forward.w1.weight", D));
  LFM_ASSIGN_OR_RETURN(c.codebook_vocab, RowsOf(ckpt, "depth_embeddings.0.embedding.weight", D));
  const int64_t F = c.ffn, V = c.codebook_vocab;

  Depthformer m;
  m.config_ = c;
  m.backbone_hidden_ = backbone_hidden;
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, "depth_linear", C * D, H, true, &m.depth_linear_));

  m.layers_.resize(static_cast<size_t>(c.layers));
  for (int j = 0; j < c.layers; ++j) {
    DepthformerLayer& L = m.layers_[static_cast<size_t>(j)];
    const std::string p = "depthformer.layers." + std::to_string(j) + ".";
    LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, p + "operator_norm.weight", D, c.eps, &L.operator_norm));
    LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, p + "ffn_norm.weight", D, c.eps, &L.ffn_norm));
    LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "operator.qkv_proj", Q + 2 * KV, D, false, &L.qkv_proj));
    LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "operator.out_proj", D, Q, false, &L.out_proj));
    LFM_RETURN_IF_ERROR(
        LoadRmsNorm(ckpt, p + "operator.bounded_attention.q_layernorm.weight", hd, c.eps, &L.q_norm));
    LFM_RETURN_IF_ERROR(
        LoadRmsNorm(ckpt, p + "operator.bounded_attention.k_layernorm.weight", hd, c.eps, &L.k_norm));
    LFM_RETURN_IF_ERROR(LoadSwiGluFfn(ckpt, p + "feed_forward.", D, F, &L.ffn));
  }

  m.codebooks_.resize(static_cast<size_t>(C));
  for (int k = 0; k < C; ++k) {
    DepthCodebook& cb = m.codebooks_[static_cast<size_t>(k)];
    const std::string p = "depth_embeddings." + std::to_string(k) + ".";
    LFM_ASSIGN_OR_RETURN(cb.embedding, LoadMatrix(ckpt, p + "embedding.weight", V, D));
    LFM_RETURN_IF_ERROR(LoadRmsNorm(ckpt, p + "embedding_norm.weight", D, c.eps, &cb.norm));
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

  // liquid-audio's precompute_freqs_cis (complex64 table, interleaved pairs) at positions 0..C-1.
  m.rope_ = RopeTable(c.rope_theta, static_cast<size_t>(hd), RopeStyle::kInterleaved);
  m.rope_cs_.Reset(static_cast<size_t>(C * hd));
  for (int64_t pos = 0; pos < C; ++pos) m.rope_.Angles(pos, m.rope_cs_.data() + pos * hd);
  return m;
}

size_t Depthformer::weight_bytes() const {
  size_t stack = 0;  // read once per codebook step
  for (const DepthformerLayer& L : layers_) {
    stack += MatrixBytes(L.qkv_proj.w) + MatrixBytes(L.out_proj.w) + MatrixBytes(L.ffn.w1.w) +
             MatrixBytes(L.ffn.w3.w) + MatrixBytes(L.ffn.w2.w);
  }
  size_t n = MatrixBytes(depth_linear_.w) + codebooks_.size() * stack;
  for (size_t k = 0; k < codebooks_.size(); ++k) {
    n += MatrixBytes(codebooks_[k].to_logits);
    if (k + 1 < codebooks_.size()) n += codebooks_[k].embedding.row_bytes;
  }
  return n;
}

Result<DepthformerScratch> DepthformerScratch::Create(const Depthformer& m, size_t max_batch,
                                                      int max_threads) {
  if (max_batch < 1) return InvalidArgument("DepthformerScratch needs max_batch >= 1");
  if (max_threads < 1) return InvalidArgument("DepthformerScratch needs max_threads >= 1");
  const DepthformerConfig& c = m.config();
  const size_t C = static_cast<size_t>(c.num_codebooks), D = static_cast<size_t>(c.dim);
  const size_t hd = static_cast<size_t>(c.head_dim);
  const size_t Q = static_cast<size_t>(c.heads) * hd, KV = static_cast<size_t>(c.kv_heads) * hd;
  const size_t F = static_cast<size_t>(c.ffn), V = static_cast<size_t>(c.codebook_vocab);
  const size_t B = max_batch, H = static_cast<size_t>(m.backbone_hidden());
  DepthformerScratch s;
  s.model_ = &m;
  s.max_batch_ = B;
  s.h_.Reset(B * H);
  s.in_.Reset(B * C * D);
  s.x_.Reset(B * D);
  s.xn_.Reset(B * D);
  s.tmp_.Reset(B * D);
  s.qkv_.Reset(B * (Q + 2 * KV));
  s.attn_.Reset(B * Q);
  s.gate_.Reset(B * F);
  s.up_.Reset(B * F);
  s.logits_.Reset(B * V);
  s.kv_.resize(B * m.layers_.size());
  for (KvCache& kv : s.kv_) kv.Allocate(C, KV, 0);
  s.scores_.Allocate(C, max_threads);
  s.seqs_.resize(B);
  return s;
}

size_t DepthformerScratch::bytes() const {
  size_t n = (h_.size() + in_.size() + x_.size() + xn_.size() + tmp_.size() + qkv_.size() + attn_.size() +
              gate_.size() + up_.size() + logits_.size() + scores_.scores.size()) *
             sizeof(float);
  for (const KvCache& kv : kv_) n += kv.bytes();
  return n;
}

Status SampleAudioFrames(const Depthformer& m, std::span<const DepthRequest> requests, DepthformerScratch& st,
                         ThreadTeam& team, TraceSink* sink) {
  const DepthformerConfig& c = m.config_;
  const size_t B = requests.size();
  const size_t C = static_cast<size_t>(c.num_codebooks), D = static_cast<size_t>(c.dim);
  const size_t hd = static_cast<size_t>(c.head_dim);
  const size_t heads = static_cast<size_t>(c.heads), kv_heads = static_cast<size_t>(c.kv_heads);
  const size_t Q = heads * hd, KV = kv_heads * hd, QKV = Q + 2 * KV;
  const size_t V = static_cast<size_t>(c.codebook_vocab);
  const size_t H = static_cast<size_t>(m.backbone_hidden_);
  if (st.model_ != &m)
    return InvalidArgument("this DepthformerScratch was created for a different depthformer");
  if (B == 0) return Status::Ok();
  if (B > st.max_batch_) {
    return OutOfRange(
        StrFormat("%zu frames in one call exceed the scratch's batch of %zu", B, st.max_batch_));
  }
  if (team.size() > st.scores_.threads) {
    return InvalidArgument(
        StrFormat("a team of %d threads exceeds the %d this DepthformerScratch was sized for", team.size(),
                  st.scores_.threads));
  }
  for (const DepthRequest& r : requests) {
    if (r.h == nullptr || r.sampler == nullptr || r.rng == nullptr || r.codes == nullptr) {
      return InvalidArgument("a depthformer request lacks its hidden state, sampler, RNG or codes");
    }
    if (r.sampler->max_vocab() < V) {
      return InvalidArgument(StrFormat("the audio sampler takes %zu logits; the depthformer yields %zu",
                                       r.sampler->max_vocab(), V));
    }
  }
  // Parallel or inline, by measure (threading/stage_policy.h).
  const StageTimer timer(st.mode_, team, static_cast<double>(B));
  float* in = st.in_.data();          // [B, C·D]
  float* x = st.x_.data();            // [B, D]
  float* xn = st.xn_.data();          // [B, D]
  float* tmp = st.tmp_.data();        // [B, D]
  float* qkv = st.qkv_.data();        // [B, Q + 2KV]
  float* attn = st.attn_.data();      // [B, Q]
  float* logits = st.logits_.data();  // [B, V]
  const size_t L = m.layers_.size();

  for (size_t b = 0; b < B; ++b) std::memcpy(st.h_.data() + b * H, requests[b].h, H * sizeof(float));
  m.depth_linear_.Forward(st.h_.data(), B, H, in, C * D, team);
  if (sink) sink->Record("depth_linear_out", in, B * C, D, D);  // [B·C, D]
  for (KvCache& kv : st.kv_) kv.Clear();
  const AttentionShape shape{heads, kv_heads, hd};

  for (size_t k = 0; k < C; ++k) {
    for (size_t b = 0; b < B; ++b) {
      float* xb = x + b * D;
      std::memcpy(xb, in + b * C * D + k * D, D * sizeof(float));
      if (k > 0)
        AccumulateRow(m.codebooks_[k - 1].embedding, static_cast<size_t>(requests[b].codes[k - 1]), xb);
    }
    TraceIndexed(sink, "cb%zu_in", k, x, B, D, D);

    for (size_t j = 0; j < L; ++j) {
      const DepthformerLayer& Lj = m.layers_[j];
      Lj.operator_norm.Forward(x, B, D, xn, D);
      Lj.qkv_proj.Forward(xn, B, D, qkv, QKV, team);
      // Each frame's row k of its own per-frame cache; one query per head against the k + 1
      // cached positions: no mask needed.
      for (size_t b = 0; b < B; ++b) st.seqs_[b] = {&st.kv_[b * L + j], b, 1, m.rope_cs_.data() + k * hd, 0};
      AttendSequences(shape, Lj.q_norm, Lj.k_norm, m.rope_, {st.seqs_.data(), B}, qkv, QKV, qkv + Q,
                      qkv + Q + KV, QKV, attn, Q, st.scores_, team);
      Lj.out_proj.Forward(attn, B, Q, tmp, D, team);
      ops::Add(x, tmp, x, B * D);

      Lj.ffn_norm.Forward(x, B, D, xn, D);
      Lj.ffn.Forward(xn, B, st.gate_.data(), st.up_.data(), tmp, team);
      ops::Add(x, tmp, x, B * D);
    }
    TraceIndexed(sink, "cb%zu_out", k, x, B, D, D);

    const DepthCodebook& cb = m.codebooks_[k];
    cb.norm.Forward(x, B, D, xn, D);
    ops::MatMul(xn, B, D, cb.to_logits, nullptr, logits, V, team);
    TraceIndexed(sink, "cb%zu_logits", k, logits, B, V, V);
    for (size_t b = 0; b < B; ++b) {
      const DepthRequest& r = requests[b];
      LFM_ASSIGN_OR_RETURN(r.codes[k], r.sampler->Sample({logits + b * V, V}, *r.rng));
    }
  }
  return Status::Ok();
}

Status SampleAudioFrame(const Depthformer& m, DepthformerScratch& scratch, const float* h, Sampler& sampler,
                        Rng& rng, int32_t* codes, ThreadTeam& team, TraceSink* sink) {
  const DepthRequest r{h, &sampler, &rng, codes};
  return SampleAudioFrames(m, {&r, 1}, scratch, team, sink);
}

}  // namespace lfmvox
