#include "models/lfm25_audio/conformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "blocks/linear.h"
#include "blocks/norm.h"
#include "blocks/weights.h"
#include "ops/nn_ops.h"
#include "threading/thread_team.h"

namespace lfmvox {

using conformer::Layer;

// ---------------------------------------------------------------------------
// Load

namespace {

// A pointwise (1×1) convolution as the Linear it is: `<prefix>.weight` [out, in, 1…] (unit_dims
// trailing 1s: 1 for Conv1d, 2 for Conv2d) used as the matrix [out, in], and `<prefix>.bias` [out].
Status LoadPointwiseConv(const Checkpoint& ckpt, const std::string& prefix, int64_t out, int64_t in,
                         int unit_dims, Linear* l) {
  Shape shape{out, in};
  for (int i = 0; i < unit_dims; ++i) shape.dim[shape.rank++] = 1;
  LFM_ASSIGN_OR_RETURN(l->w, LoadMatrix(ckpt, prefix + ".weight", shape, out, in));
  return LoadF32(ckpt, prefix + ".bias", Shape{out}, &l->bias);
}

// A 3×3 conv with one input channel per filter: [Ch, 1, 3, 3] taps and [Ch] bias.
Status LoadConv3x3(const Checkpoint& ckpt, const std::string& prefix, int64_t c, AlignedBuffer<float>* w,
                   AlignedBuffer<float>* b) {
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, prefix + ".weight", Shape{c, 1, 3, 3}, w));
  return LoadF32(ckpt, prefix + ".bias", Shape{c}, b);
}

Status LoadLayer(const Checkpoint& ckpt, const ConformerConfig& c, size_t i, Layer* L) {
  const std::string p = "conformer.layers." + std::to_string(i) + ".";
  const int64_t d = c.d_model, ff = c.ff_dim(), heads = c.n_heads, hd = c.head_dim(), k = c.conv_kernel_size;
  LFM_RETURN_IF_ERROR(LoadLayerNorm(ckpt, p + "norm_feed_forward1", d, c.norm_eps, &L->norm_ff1));
  LFM_RETURN_IF_ERROR(LoadLayerNorm(ckpt, p + "norm_self_att", d, c.norm_eps, &L->norm_att));
  LFM_RETURN_IF_ERROR(LoadLayerNorm(ckpt, p + "norm_conv", d, c.norm_eps, &L->norm_conv));
  LFM_RETURN_IF_ERROR(LoadLayerNorm(ckpt, p + "norm_feed_forward2", d, c.norm_eps, &L->norm_ff2));
  LFM_RETURN_IF_ERROR(LoadLayerNorm(ckpt, p + "norm_out", d, c.norm_eps, &L->norm_out));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "feed_forward1.linear1", ff, d, true, &L->ff1_in));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "feed_forward1.linear2", d, ff, true, &L->ff1_out));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "feed_forward2.linear1", ff, d, true, &L->ff2_in));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "feed_forward2.linear2", d, ff, true, &L->ff2_out));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.linear_q", d, d, true, &L->q));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.linear_k", d, d, true, &L->k));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.linear_v", d, d, true, &L->v));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.linear_out", d, d, true, &L->out));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, p + "self_attn.linear_pos", d, d, false, &L->pos));
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, p + "self_attn.pos_bias_u", Shape{heads, hd}, &L->pos_bias_u));
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, p + "self_attn.pos_bias_v", Shape{heads, hd}, &L->pos_bias_v));
  LFM_RETURN_IF_ERROR(LoadPointwiseConv(ckpt, p + "conv.pointwise_conv1", 2 * d, d, 1, &L->conv_in));
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, p + "conv.depthwise_conv.weight", Shape{d, 1, k}, &L->conv_dw));
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, p + "conv.depthwise_conv.bias", Shape{d}, &L->conv_dw_bias));
  LFM_RETURN_IF_ERROR(LoadPointwiseConv(ckpt, p + "conv.pointwise_conv2", d, d, 1, &L->conv_out));

  // BatchNorm in eval form, folded the way torch's CPU inference kernel does
  // (in f32): scale = γ · 1/sqrt(var + eps), shift = β − mean·scale; the
  // forward pass is then x·scale + shift.
  AlignedBuffer<float> gamma, beta, mean, var;
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, p + "conv.batch_norm.weight", Shape{d}, &gamma));
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, p + "conv.batch_norm.bias", Shape{d}, &beta));
  if (!ckpt.Has(p + "conv.batch_norm.running_mean") && !ckpt.Has(p + "conv.batch_norm.running_var")) {
    // Already folded (llama.cpp's converter stores scale and shift as weight
    // and bias, and drops the running statistics).
    L->bn_scale = std::move(gamma);
    L->bn_shift = std::move(beta);
    return Status::Ok();
  }
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, p + "conv.batch_norm.running_mean", Shape{d}, &mean));
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, p + "conv.batch_norm.running_var", Shape{d}, &var));
  L->bn_scale.Reset(static_cast<size_t>(d));
  L->bn_shift.Reset(static_cast<size_t>(d));
  for (size_t ch = 0; ch < static_cast<size_t>(d); ++ch) {
    if (!(var[ch] + c.norm_eps > 0.0f)) {
      return InvalidArgument(StrFormat("%sconv.batch_norm.running_var[%zu] = %g is not a variance", p.c_str(),
                                       ch, static_cast<double>(var[ch])));
    }
    const float invstd = 1.0f / std::sqrt(var[ch] + c.norm_eps);
    L->bn_scale[ch] = invstd * gamma[ch];
    L->bn_shift[ch] = beta[ch] - mean[ch] * L->bn_scale[ch];
  }
  return Status::Ok();
}

}  // namespace

Result<AudioEncoder> AudioEncoder::Load(const Checkpoint& ckpt, const ConformerConfig& config,
                                        int backbone_hidden) {
  if (config.feat_in < 1 || config.n_layers < 1 || config.n_heads < 1 ||
      config.d_model % config.n_heads != 0 || config.subsampling_channels < 1 ||
      config.ff_expansion_factor < 1 || config.conv_kernel_size % 2 != 1) {
    return InvalidArgument("the encoder config is incomplete; parse it with ConformerConfig::FromJson");
  }
  if (backbone_hidden < 1) {
    return InvalidArgument(StrFormat("backbone_hidden %d must be positive", backbone_hidden));
  }
  AudioEncoder e;
  e.config_ = config;
  const ConformerConfig& c = e.config_;
  e.backbone_hidden_ = backbone_hidden;
  const int64_t d = c.d_model, C = c.subsampling_channels, W3 = c.subsampled_bins();

  const std::string pre = "conformer.pre_encode.";
  LFM_RETURN_IF_ERROR(LoadConv3x3(ckpt, pre + "conv.0", C, &e.conv0_w_, &e.conv0_b_));
  LFM_RETURN_IF_ERROR(LoadConv3x3(ckpt, pre + "conv.2", C, &e.conv2_w_, &e.conv2_b_));
  LFM_RETURN_IF_ERROR(LoadPointwiseConv(ckpt, pre + "conv.3", C, C, 2, &e.conv3_));
  LFM_RETURN_IF_ERROR(LoadConv3x3(ckpt, pre + "conv.5", C, &e.conv5_w_, &e.conv5_b_));
  LFM_RETURN_IF_ERROR(LoadPointwiseConv(ckpt, pre + "conv.6", C, C, 2, &e.conv6_));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, pre + "out", d, C * W3, true, &e.pre_out_));

  e.layers_.resize(static_cast<size_t>(c.n_layers));
  for (size_t i = 0; i < e.layers_.size(); ++i) LFM_RETURN_IF_ERROR(LoadLayer(ckpt, c, i, &e.layers_[i]));

  // liquid-audio's MLP(d, H, [A]); A (= H in LFM2.5) comes from the file.
  LFM_ASSIGN_OR_RETURN(TensorView a1, ckpt.Get("audio_adapter.model.1.weight"));
  if (a1.shape.rank != 2 || a1.shape[1] != d || a1.shape[0] < 1 || a1.shape[0] > (1 << 20)) {
    return InvalidArgument(StrFormat("audio_adapter.model.1.weight has shape %s; expected [A, %lld]",
                                     a1.shape.ToString().c_str(), static_cast<long long>(d)));
  }
  e.adapter_hidden_ = static_cast<int>(a1.shape[0]);
  LFM_RETURN_IF_ERROR(LoadLayerNorm(ckpt, "audio_adapter.model.0", d, c.norm_eps, &e.adapter_norm_));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, "audio_adapter.model.1", e.adapter_hidden_, d, true, &e.adapter_in_));
  LFM_RETURN_IF_ERROR(
      LoadLinear(ckpt, "audio_adapter.model.3", backbone_hidden, e.adapter_hidden_, true, &e.adapter_out_));
  return e;
}

size_t AudioEncoder::weight_bytes() const {
  auto bytes = [](const Linear& l) { return l.w.bytes(); };
  size_t n = bytes(conv3_) + bytes(conv6_) + bytes(pre_out_) + bytes(adapter_in_) + bytes(adapter_out_);
  for (const Layer& L : layers_) {
    n += bytes(L.ff1_in) + bytes(L.ff1_out) + bytes(L.ff2_in) + bytes(L.ff2_out) + bytes(L.q) + bytes(L.k) +
         bytes(L.v) + bytes(L.out) + bytes(L.pos) + bytes(L.conv_in) + bytes(L.conv_out);
  }
  return n;
}

// ---------------------------------------------------------------------------
// Scratch

EncoderScratch::~EncoderScratch() = default;

Result<std::unique_ptr<EncoderScratch>> EncoderScratch::Create(const AudioEncoder& encoder, size_t max_frames,
                                                               int max_threads) {
  const ConformerConfig& c = encoder.config();
  if (max_frames == 0) return InvalidArgument("EncoderScratch needs max_frames >= 1");
  if (max_threads < 1) return InvalidArgument("EncoderScratch needs max_threads >= 1");
  const size_t d = static_cast<size_t>(c.d_model), C = static_cast<size_t>(c.subsampling_channels);
  const size_t T = ConformerConfig::SubsampledFrames(max_frames);
  const size_t W1 = ConformerConfig::Halved(static_cast<size_t>(c.feat_in));
  const size_t W2 = ConformerConfig::Halved(W1), W3 = ConformerConfig::Halved(W2);
  const size_t wide =
      std::max({static_cast<size_t>(c.ff_dim()), 2 * d, static_cast<size_t>(encoder.adapter_hidden())});
  // Buffers grow as T·width; keep each a sane allocation.
  if (max_frames > (size_t{1} << 24) || 2 * T * wide > (size_t{1} << 31)) {
    return OutOfRange(
        StrFormat("%zu mel frames is too long for one encoder call; split the audio", max_frames));
  }
  auto s = std::unique_ptr<EncoderScratch>(new EncoderScratch());
  s->max_frames_ = max_frames;
  s->max_t_ = T;
  s->max_threads_ = max_threads;
  s->s1_.Reset((4 * kBand + 3) * W1 * C);
  s->s2_.Reset((2 * kBand + 1) * W2 * C);
  s->s2p_.Reset((2 * kBand + 1) * W2 * C);
  s->s3_.Reset(kBand * W3 * C);
  s->s3p_.Reset(kBand * W3 * C);
  s->flat_.Reset(kBand * C * W3);
  s->x_.Reset(T * d);
  s->xn_.Reset(T * d);
  s->tmp_.Reset(T * d);
  s->wide_.Reset(T * wide);
  s->q_.Reset(T * d);
  s->qv_.Reset(T * d);
  s->k_.Reset(T * d);
  s->vt_.Reset(d * T);
  s->p_.Reset((2 * T - 1) * d);
  s->att_.Reset(T * d);
  s->ac_stride_ = kQueryBlock * T;
  s->bd_stride_ = kQueryBlock * (T + kQueryBlock - 1);
  s->ac_.Reset(static_cast<size_t>(max_threads) * s->ac_stride_);
  s->bd_.Reset(static_cast<size_t>(max_threads) * s->bd_stride_);
  for (int i = 0; i < max_threads; ++i) s->solo_.push_back(std::make_unique<ThreadTeam>(1));

  // NeMo RelPositionalEncoding.create_pe, in f32 as torch runs it:
  //   div[m] = exp(f32(2m) · f32(−ln 10000 / d)),  angle = f32(r) · div[m]
  //   pe[r][2m] = sin(angle), pe[r][2m + 1] = cos(angle)
  // (exp, sin and cos evaluated in double and rounded once). A row depends
  // only on r, so the table for max_t holds every shorter input's slice.
  s->pe_.Reset((2 * T - 1) * d);
  const float neg_log_over_d = static_cast<float>(-(std::log(10000.0) / static_cast<double>(d)));
  for (size_t k = 0; k < 2 * T - 1; ++k) {
    const float r = static_cast<float>(static_cast<int64_t>(T) - 1 - static_cast<int64_t>(k));
    float* row = s->pe_.data() + k * d;
    for (size_t m = 0; 2 * m < d; ++m) {
      const float div =
          static_cast<float>(std::exp(static_cast<double>(static_cast<float>(2 * m) * neg_log_over_d)));
      const double angle = static_cast<double>(r * div);
      row[2 * m] = static_cast<float>(std::sin(angle));
      if (2 * m + 1 < d) row[2 * m + 1] = static_cast<float>(std::cos(angle));
    }
  }
  return s;
}

size_t EncoderScratch::bytes() const {
  const AlignedBuffer<float>* all[] = {&s1_,   &s2_, &s2p_, &s3_, &s3p_, &flat_, &pe_,  &x_,  &xn_, &tmp_,
                                       &wide_, &q_,  &qv_,  &k_,  &vt_,  &p_,    &att_, &ac_, &bd_};
  size_t n = 0;
  for (const auto* b : all) n += b->size() * sizeof(float);
  return n;
}

// ---------------------------------------------------------------------------
// Forward

namespace {

// Work below this many floats runs on the calling thread: splitting it would
// cost more in wake-ups than it saves. (Either way every row is computed by
// the same code, so the split never changes a result.)
constexpr size_t kParallelMinFloats = size_t{1} << 14;

// fn(row) for rows [0, n) of row_floats each, spread over the team when large.
template <typename F>
void ForRows(ThreadTeam& team, size_t n, size_t row_floats, F&& fn) {
  if (n * row_floats < kParallelMinFloats) {
    for (size_t r = 0; r < n; ++r) fn(r);
    return;
  }
  team.ParallelFor(n, 1, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) fn(r);
  });
}

// Chunks of element-wise work start at multiples of this many floats. A multiple of 16 (one 64-byte
// cache line, and the widest SIMD vector) keeps two threads off the same line of the output and no
// vector split across chunks; 64 is simply a safe multiple, not a measured optimum (the chunks are
// far longer: this path runs only above kParallelMinFloats, in about 4 chunks per thread). Any split
// gives the same values.
constexpr size_t kElementAlign = 64;

// In-place element-wise kernel(p, p, count) over n floats, spread when large.
void ForElements(ThreadTeam& team, float* p, size_t n, void (*kernel)(const float*, float*, size_t)) {
  if (n < kParallelMinFloats) return kernel(p, p, n);
  team.ParallelFor(n, kElementAlign, [&](size_t b, size_t e) { kernel(p + b, p + b, e - b); });
}

// y [m, out] = x [m, in] · Wᵀ + b, rows packed.
void MatMul(const float* x, size_t m, const Linear& l, float* y, ThreadTeam& team) {
  l.Forward(x, m, l.in(), y, l.out(), team);
}

// y [t, d] = LayerNorm(x [t, d]) row by row, the rows spread over the team when large.
void LayerNormRows(const float* x, size_t t, const LayerNorm& ln, float* y, ThreadTeam& team) {
  const size_t d = ln.dim();
  ForRows(team, t, d, [&](size_t r) { ln.Forward(x + r * d, 1, d, y + r * d, d); });
}

// x[t, n] += scale · y[t, n]: the residual add (NeMo: residual + x · factor,
// with factor 0.5 for the macaron halves, an exact scaling).
void Residual(float* x, float* y, size_t count, float scale) {
  if (scale != 1.0f) ops::Scale(y, scale, y, count);
  ops::Add(x, y, x, count);
}

}  // namespace

// dw_striding: three stride-2 3×3 stages over the (time × freq) image, run
// one band of kBand output frames at a time so the scratch stays small.
// Stage rows needed by a band overlap the next band's by one row per stage;
// those are computed twice, which changes no value.
void AudioEncoder::Subsample(const float* mel, size_t F, EncoderScratch& s, ThreadTeam& team) const {
  const ConformerConfig& c = config_;
  const size_t C = static_cast<size_t>(c.subsampling_channels), d = static_cast<size_t>(c.d_model);
  const size_t W0 = static_cast<size_t>(c.feat_in), W1 = ConformerConfig::Halved(W0);
  const size_t W2 = ConformerConfig::Halved(W1), W3 = ConformerConfig::Halved(W2);
  const size_t T1 = ConformerConfig::Halved(F), T2 = ConformerConfig::Halved(T1);
  const size_t T3 = ConformerConfig::Halved(T2);
  constexpr size_t kBand = EncoderScratch::kBand;
  // Multiply-adds per output pixel and channel of a 3×3 conv (the work ForRows weighs).
  constexpr size_t kTaps3x3 = 3 * 3;

  // Stage output rows [i0, i1) into out (rows of out_w pixels × C). Output
  // row i reads input rows 2i−1, 2i, 2i+1 of in_rows; the buffer holds input
  // rows from `first` on, row q at in + (q − first)·row_stride.
  auto conv_rows = [&](size_t i0, size_t i1, const float* in, size_t first, size_t row_stride, size_t in_rows,
                       size_t width, size_t ps, size_t cs, const float* w, const float* b, float* out,
                       size_t out_w) {
    ForRows(team, i1 - i0, kTaps3x3 * width * C, [&](size_t li) {
      const float* rows[3];
      for (size_t a = 0; a < 3; ++a) {
        const size_t q = 2 * (i0 + li) + a;  // input row q − 1
        rows[a] = q == 0 || q > in_rows ? nullptr : in + (q - 1 - first) * row_stride;
      }
      ops::Conv3x3Stride2Row(rows, width, ps, cs, C, w, b, out + li * out_w * C);
    });
  };
  auto pointwise_relu = [&](const float* in, size_t pixels, const Linear& l, float* out) {
    MatMul(in, pixels, l, out, team);
    ForElements(team, out, pixels * C, ops::Relu);
  };

  for (size_t a = 0; a < T3; a += kBand) {
    const size_t b = std::min(T3, a + kBand);
    const size_t lo2 = a == 0 ? 0 : 2 * a - 1, hi2 = std::min(T2, 2 * b);
    const size_t lo1 = lo2 == 0 ? 0 : 2 * lo2 - 1, hi1 = std::min(T1, 2 * hi2);
    // conv.0 (1 → C) + ReLU. The image row t is mel column t: pixel f at
    // mel[f·F + t], every filter reading the same value.
    conv_rows(lo1, hi1, mel, 0, 1, F, W0, F, 0, conv0_w_.data(), conv0_b_.data(), s.s1_.data(), W1);
    ForElements(team, s.s1_.data(), (hi1 - lo1) * W1 * C, ops::Relu);
    // conv.2 depthwise, conv.3 pointwise + ReLU.
    conv_rows(lo2, hi2, s.s1_.data(), lo1, W1 * C, T1, W1, C, 1, conv2_w_.data(), conv2_b_.data(),
              s.s2_.data(), W2);
    pointwise_relu(s.s2_.data(), (hi2 - lo2) * W2, conv3_, s.s2p_.data());
    // conv.5 depthwise, conv.6 pointwise + ReLU.
    conv_rows(a, b, s.s2p_.data(), lo2, W2 * C, T2, W2, C, 1, conv5_w_.data(), conv5_b_.data(), s.s3_.data(),
              W3);
    pointwise_relu(s.s3_.data(), (b - a) * W3, conv6_, s.s3p_.data());
    // Flatten channel-major, (T', C, W3) → [T', C·W3], then Linear → [T', d].
    for (size_t r = 0; r < b - a; ++r) {
      const float* in = s.s3p_.data() + r * W3 * C;  // [W3, C]
      float* out = s.flat_.data() + r * C * W3;      // [C, W3]
      for (size_t f = 0; f < W3; ++f) {
        for (size_t ch = 0; ch < C; ++ch) out[ch * W3 + f] = in[f * C + ch];
      }
    }
    MatMul(s.flat_.data(), b - a, pre_out_, s.x_.data() + a * d, team);
  }
}

// Rel-pos multi-head self-attention (NeMo RelPositionMultiHeadAttention,
// the non-SDPA path) on s.xn_ [t, d] → s.tmp_ [t, d]:
//   AC[i, j] = (q_i + u)·k_j,  BD[i, j] = (q_i + v)·p_{i−j}  (rel_shift done by indexing)
//   out_i = Σ_j softmax_j((AC + BD) / √hd) v_j, then linear_out.
// One task per (head, block of queries), each with its own one-thread team.
void AudioEncoder::Attention(const Layer& L, size_t t, EncoderScratch& s, ThreadTeam& team) const {
  const size_t d = static_cast<size_t>(config_.d_model), heads = static_cast<size_t>(config_.n_heads);
  const size_t hd = d / heads, np = 2 * t - 1;
  constexpr size_t kQB = EncoderScratch::kQueryBlock;
  float* q = s.q_.data();
  float* qv = s.qv_.data();
  float* k = s.k_.data();
  float* v = s.att_.data();  // V first lands here; it is transposed into vt_ before att_ is written
  float* p = s.p_.data();
  MatMul(s.xn_.data(), t, L.q, q, team);
  MatMul(s.xn_.data(), t, L.k, k, team);
  MatMul(s.xn_.data(), t, L.v, v, team);
  // p = linear_pos(pe) over the 2t−1 rows for r = t−1 … −(t−1).
  MatMul(s.pe_.data() + (s.max_t_ - t) * d, np, L.pos, p, team);
  ForRows(team, t, 2 * d, [&](size_t r) {
    for (size_t h = 0; h < heads; ++h) {
      float* qr = q + r * d + h * hd;
      ops::Add(qr, L.pos_bias_v.data() + h * hd, qv + r * d + h * hd, hd);
      ops::Add(qr, L.pos_bias_u.data() + h * hd, qr, hd);
    }
  });
  // vt [d, t]: row c holds channel c of every value.
  ForRows(team, d, t, [&](size_t ch) {
    for (size_t j = 0; j < t; ++j) s.vt_[ch * t + j] = v[j * d + ch];
  });

  const float sdk = static_cast<float>(std::sqrt(static_cast<double>(hd)));
  const size_t blocks = (t + kQB - 1) / kQB;
  float* att = s.att_.data();
  team.Run(heads * blocks, [&](size_t task, int thread) {
    const size_t h = task / blocks, i0 = (task % blocks) * kQB, i1 = std::min(t, i0 + kQB), nb = i1 - i0;
    const size_t nbd = t + nb - 1;  // relative positions i − j seen by this block
    ThreadTeam& solo = *s.solo_[static_cast<size_t>(thread)];
    float* ac = s.ac_.data() + static_cast<size_t>(thread) * s.ac_stride_;  // [nb, t]
    float* bd = s.bd_.data() + static_cast<size_t>(thread) * s.bd_stride_;  // [nb, nbd]
    const auto kh = ops::Weight::Dense(WeightFormat::kF32, k + h * hd, t, hd, d);
    ops::MatMul(q + i0 * d + h * hd, nb, d, kh, nullptr, ac, t, solo);
    // p rows [t − i1, t − i1 + nbd) hold r = i1 − 1 … i0 − t + 1.
    const auto ph = ops::Weight::Dense(WeightFormat::kF32, p + (t - i1) * d + h * hd, nbd, hd, d);
    ops::MatMul(qv + i0 * d + h * hd, nb, d, ph, nullptr, bd, nbd, solo);
    for (size_t li = 0; li < nb; ++li) {
      // Query i = i0 + li and key j pair with p row t−1−i+j, local row (nb−1−li) + j.
      float* row = ac + li * t;
      const float* shifted = bd + li * nbd + (nb - 1 - li);
      for (size_t j = 0; j < t; ++j) row[j] = (row[j] + shifted[j]) / sdk;
      ops::Softmax(row, t);
    }
    const auto vh = ops::Weight::Dense(WeightFormat::kF32, s.vt_.data() + h * hd * t, hd, t, t);
    ops::MatMul(ac, nb, t, vh, nullptr, att + i0 * d + h * hd, d, solo);
  });
  MatMul(att, t, L.out, s.tmp_.data(), team);
}

// NeMo ConformerConvolution on s.xn_ [t, d] → s.tmp_ [t, d]: pointwise_conv1
// (d → 2d), GLU, depthwise conv (k, symmetric zero padding), BatchNorm
// (eval), SiLU, pointwise_conv2.
void AudioEncoder::ConvModule(const Layer& L, size_t t, EncoderScratch& s, ThreadTeam& team) const {
  const size_t d = static_cast<size_t>(config_.d_model), k = static_cast<size_t>(config_.conv_kernel_size);
  float* g = s.wide_.data();  // [t, 2d]
  float* a = s.att_.data();   // [t, d] GLU output (att_ is free outside Attention)
  float* y = s.xn_.data();    // [t, d] conv output (the normed input is consumed by then)
  MatMul(s.xn_.data(), t, L.conv_in, g, team);
  ForRows(team, t, 2 * d, [&](size_t r) { ops::Glu(g + r * 2 * d, g + r * 2 * d + d, a + r * d, d); });
  ops::DepthwiseConv1d(a, t, d, d, L.conv_dw.data(), k, (k - 1) / 2, L.conv_dw_bias.data(), y, d);
  ForRows(team, t, 2 * d, [&](size_t r) {
    ops::ScaleShift(y + r * d, L.bn_scale.data(), L.bn_shift.data(), y + r * d, d);
    ops::Silu(y + r * d, y + r * d, d);
  });
  MatMul(y, t, L.conv_out, s.tmp_.data(), team);
}

Status AudioEncoder::Encode(const float* mel, size_t frames, float* out, EncoderScratch& s, ThreadTeam& team,
                            TraceSink* sink, const std::atomic<bool>* cancel) const {
  if (frames > s.max_frames_) {
    return OutOfRange(
        StrFormat("%zu mel frames exceed the %zu this encoder scratch was sized for", frames, s.max_frames_));
  }
  if (team.size() > s.max_threads_) {
    return InvalidArgument(StrFormat("a team of %d threads exceeds the %d this encoder scratch was sized for",
                                     team.size(), s.max_threads_));
  }
  if (frames == 0) return Status::Ok();
  if (mel == nullptr || out == nullptr) return InvalidArgument("Encode needs mel and out buffers");
  const ConformerConfig& c = config_;
  const size_t d = static_cast<size_t>(c.d_model), ff = static_cast<size_t>(c.ff_dim());
  const size_t t = ConformerConfig::SubsampledFrames(frames);
  float* x = s.x_.data();
  float* xn = s.xn_.data();
  float* tmp = s.tmp_.data();
  float* wide = s.wide_.data();

  Subsample(mel, frames, s, team);
  if (sink) sink->Record("pre_encode_out", x, t, d, d);
  if (c.xscaling) ops::Scale(x, std::sqrt(static_cast<float>(d)), x, t * d);
  if (sink) sink->Record("pos_emb", s.pe_.data() + (s.max_t_ - t) * d, 2 * t - 1, d, d);

  auto feed_forward = [&](const LayerNorm& norm, const Linear& in, const Linear& out_l) {
    LayerNormRows(x, t, norm, xn, team);
    MatMul(xn, t, in, wide, team);
    ForElements(team, wide, t * ff, ops::Silu);
    MatMul(wide, t, out_l, tmp, team);
    Residual(x, tmp, t * d, 0.5f);
  };
  for (size_t li = 0; li < layers_.size(); ++li) {
    if (cancel && cancel->load(std::memory_order_relaxed))
      return Cancelled("the audio encoding was cancelled");
    const Layer& L = layers_[li];
    feed_forward(L.norm_ff1, L.ff1_in, L.ff1_out);
    LayerNormRows(x, t, L.norm_att, xn, team);
    Attention(L, t, s, team);
    Residual(x, tmp, t * d, 1.0f);
    LayerNormRows(x, t, L.norm_conv, xn, team);
    ConvModule(L, t, s, team);
    Residual(x, tmp, t * d, 1.0f);
    feed_forward(L.norm_ff2, L.ff2_in, L.ff2_out);
    LayerNormRows(x, t, L.norm_out, x, team);
    TraceIndexed(sink, "layer%zu_out", li, x, t, d, d);
  }
  if (sink) sink->Record("out", x, t, d, d);

  // Adapter: LayerNorm → Linear → GELU → Linear.
  const size_t A = static_cast<size_t>(adapter_hidden_);
  LayerNormRows(x, t, adapter_norm_, xn, team);
  MatMul(xn, t, adapter_in_, wide, team);
  ForElements(team, wide, t * A, ops::Gelu);
  MatMul(wide, t, adapter_out_, out, team);
  const size_t H = static_cast<size_t>(backbone_hidden_);
  if (sink) sink->Record("adapter_out", out, t, H, H);
  return Status::Ok();
}

}  // namespace lfmvox
