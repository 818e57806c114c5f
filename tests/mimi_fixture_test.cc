// The Mimi decoder on generated checkpoints (tools/mimi_checkpoint_gen.h), on every clone:
//  - a plain double-precision reference written from the PyTorch definitions (Conv1d left-padded k − 1,
//    ConvTranspose1d's full output trimmed on the right, LayerNorm, the masked attention, GELU, ELU) checks
//    the batch path;
//  - streaming == batch bit for bit while the context holds, any split == any other, and the official
//    streaming window (one key less for a frame's first query) differs from the batch one past it;
//  - Kyutai's tensors-only layout loads with the sizes read from the file;
//  - no allocation per frame (tests/alloc_counter), bad input rejected without touching the stream.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "blocks/weights.h"
#include "codecs/mimi/mimi_decoder.h"
#include "io/json_config.h"
#include "threading/thread_team.h"
#include "tools/mimi_checkpoint_gen.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

using testing::ScratchPath;

std::unique_ptr<MimiDecoder> LoadTiny(const std::string& name,
                                      tools::MimiShape shape = tools::MimiShape::Tiny()) {
  const std::string dir = ScratchPath(name);
  EXPECT_TRUE(tools::WriteRandomMimi(dir, shape).ok());
  Result<std::unique_ptr<MimiDecoder>> m = MimiDecoder::Load(dir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

std::vector<int32_t> RandomCodes(size_t frames, size_t C, int bins, uint32_t seed) {
  std::vector<int32_t> c(frames * C);
  for (size_t i = 0; i < c.size(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    c[i] = static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(bins));
  }
  return c;
}

std::vector<float> Decode(const MimiDecoder& m, const std::vector<int32_t>& codes, size_t per_call,
                          MimiWindow w, int threads = 1) {
  ThreadTeam team(threads);
  auto s = MimiSession::Create(m, per_call, threads, w);
  EXPECT_TRUE(s.ok());
  const size_t C = m.codebooks(), spf = m.samples_per_frame(), T = codes.size() / C;
  std::vector<float> pcm(T * spf);
  for (size_t t = 0; t < T; t += per_call) {
    const size_t n = std::min(per_call, T - t);
    Result<size_t> r =
        (*s)->Step(std::span(codes).subspan(t * C, n * C), std::span(pcm).subspan(t * spf, n * spf), team);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  }
  return pcm;
}

// ---- The double-precision reference (conv layout [channels][time], as PyTorch) ----
using Mat = std::vector<std::vector<double>>;  // [channels][time]

std::vector<double> F64(const Checkpoint& ck, const std::string& name) {
  Result<TensorView> t = ck.Get(name);
  EXPECT_TRUE(t.ok()) << name;
  AlignedBuffer<float> b;
  EXPECT_TRUE(LoadF32(ck, name, t->shape, &b).ok());
  return std::vector<double>(b.data(), b.data() + b.size());
}

Mat Conv1d(const Checkpoint& ck, const std::string& n, const Mat& x, size_t out, size_t k) {
  const std::vector<double> w = F64(ck, n + ".weight"), b = F64(ck, n + ".bias");
  const size_t in = x.size(), T = x[0].size();
  Mat y(out, std::vector<double>(T));
  for (size_t o = 0; o < out; ++o)
    for (size_t t = 0; t < T; ++t) {
      double s = b[o];
      for (size_t i = 0; i < in; ++i)
        for (size_t j = 0; j < k; ++j) {
          const ptrdiff_t u = static_cast<ptrdiff_t>(t + j) - static_cast<ptrdiff_t>(k - 1);
          if (u >= 0) s += w[(o * in + i) * k + j] * x[i][u];
        }
      y[o][t] = s;
    }
  return y;
}

Mat ConvTr(const std::vector<double>& w, const std::vector<double>* b, const Mat& x, size_t out, size_t k,
           size_t s, bool depthwise) {
  const size_t in = x.size(), T = x[0].size();
  Mat full(out, std::vector<double>((T - 1) * s + k, 0.0));
  for (size_t i = 0; i < in; ++i)
    for (size_t t = 0; t < T; ++t)
      for (size_t o = depthwise ? i : 0; o < (depthwise ? i + 1 : out); ++o)
        for (size_t j = 0; j < k; ++j)
          full[o][t * s + j] += x[i][t] * w[((depthwise ? i : i * out + o)) * k + j];
  for (size_t o = 0; o < out; ++o) {
    full[o].resize(T * s);  // trim k − s on the right
    if (b)
      for (double& v : full[o]) v += (*b)[o];
  }
  return full;
}

void EluInPlace(Mat& x) {
  for (auto& r : x)
    for (double& v : r) v = v > 0 ? v : std::expm1(v);
}

std::vector<double> Reference(const MimiDecoder& m, const Checkpoint& ck, const std::vector<int32_t>& codes) {
  const MimiConfig& c = m.config();
  const size_t C = c.num_codebooks, T = codes.size() / C, H = c.latent_dim, D = c.codebook_dim;
  Mat z(H, std::vector<double>(T, 0.0));
  for (int part = 0; part < 2; ++part) {
    const std::vector<double> W =
        F64(ck, part ? "quantizer.rvq_rest.output_proj.weight" : "quantizer.rvq_first.output_proj.weight");
    for (size_t t = 0; t < T; ++t) {
      std::vector<double> e(D, 0.0);
      for (size_t k = part ? 1 : 0; k < (part ? C : 1); ++k) {
        const std::string p = k == 0
                                  ? "quantizer.rvq_first.vq.layers.0._codebook."
                                  : "quantizer.rvq_rest.vq.layers." + std::to_string(k - 1) + "._codebook.";
        const std::vector<double> es = F64(ck, p + "embedding_sum"), u = F64(ck, p + "cluster_usage");
        const size_t code = static_cast<size_t>(codes[t * C + k]);
        for (size_t d = 0; d < D; ++d) e[d] += es[code * D + d] / std::max(u[code], 1e-5);
      }
      for (size_t h = 0; h < H; ++h)
        for (size_t d = 0; d < D; ++d) z[h][t] += W[h * D + d] * e[d];
    }
  }
  Mat x = ConvTr(F64(ck, "upsample.convtr.convtr.convtr.weight"), nullptr, z, H, 4, 2, true);
  const size_t L = 2 * T, heads = c.num_heads, hd = H / heads, F = c.dim_feedforward;
  for (int li = 0; li < c.num_layers; ++li) {
    const std::string p = "decoder_transformer.transformer.layers." + std::to_string(li) + ".";
    const auto ln = [&](const std::string& n, size_t t) {
      const std::vector<double> g = F64(ck, p + n + ".weight"), b = F64(ck, p + n + ".bias");
      double mean = 0, var = 0;
      for (size_t h = 0; h < H; ++h) mean += x[h][t];
      mean /= H;
      for (size_t h = 0; h < H; ++h) var += (x[h][t] - mean) * (x[h][t] - mean);
      var /= H;
      std::vector<double> y(H);
      for (size_t h = 0; h < H; ++h) y[h] = (x[h][t] - mean) / std::sqrt(var + 1e-5) * g[h] + b[h];
      return y;
    };
    const std::vector<double> inp = F64(ck, p + "self_attn.in_proj_weight"),
                              outp = F64(ck, p + "self_attn.out_proj.weight");
    const std::vector<double> l1 = F64(ck, p + "linear1.weight"), l2 = F64(ck, p + "linear2.weight");
    const std::vector<double> ls1 = F64(ck, p + "layer_scale_1.scale"),
                              ls2 = F64(ck, p + "layer_scale_2.scale");
    Mat q(L, std::vector<double>(3 * H, 0.0));
    for (size_t t = 0; t < L; ++t) {
      const std::vector<double> xn = ln("norm1", t);
      for (size_t r = 0; r < 3 * H; ++r)
        for (size_t h = 0; h < H; ++h) q[t][r] += inp[r * H + h] * xn[h];
      for (size_t part = 0; part < 2; ++part)
        for (size_t hh = 0; hh < heads; ++hh)
          for (size_t i = 0; i < hd / 2; ++i) {
            const double a = t * std::exp(-std::log(c.max_period) * 2.0 * i / hd);
            double* v = &q[t][part * H + hh * hd + 2 * i];
            const double re = v[0] * std::cos(a) - v[1] * std::sin(a),
                         im = v[0] * std::sin(a) + v[1] * std::cos(a);
            v[0] = re, v[1] = im;
          }
    }
    Mat att(L, std::vector<double>(H, 0.0));
    for (size_t t = 0; t < L; ++t)
      for (size_t hh = 0; hh < heads; ++hh) {
        const size_t lo = t + 1 >= static_cast<size_t>(c.context) ? t + 1 - c.context : 0;
        std::vector<double> s(t + 1 - lo);
        double mx = -1e300, sum = 0;
        for (size_t j = lo; j <= t; ++j) {
          double d = 0;
          for (size_t e = 0; e < hd; ++e) d += q[t][hh * hd + e] * q[j][H + hh * hd + e];
          s[j - lo] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[j - lo]);
        }
        for (double& v : s) sum += (v = std::exp(v - mx));
        for (size_t j = lo; j <= t; ++j)
          for (size_t e = 0; e < hd; ++e) att[t][hh * hd + e] += s[j - lo] / sum * q[j][2 * H + hh * hd + e];
      }
    for (size_t t = 0; t < L; ++t) {
      for (size_t h = 0; h < H; ++h) {
        double a = 0;
        for (size_t e = 0; e < H; ++e) a += outp[h * H + e] * att[t][e];
        x[h][t] += ls1[h] * a;
      }
      const std::vector<double> xn = ln("norm2", t);
      std::vector<double> f(F, 0.0);
      for (size_t r = 0; r < F; ++r) {
        for (size_t h = 0; h < H; ++h) f[r] += l1[r * H + h] * xn[h];
        f[r] = 0.5 * f[r] * (1 + std::erf(f[r] / std::sqrt(2.0)));
      }
      for (size_t h = 0; h < H; ++h) {
        double a = 0;
        for (size_t r = 0; r < F; ++r) a += l2[h * F + r] * f[r];
        x[h][t] += ls2[h] * a;
      }
    }
  }
  size_t ch = c.seanet_width();
  Mat y = Conv1d(ck, "decoder.model.0.conv.conv", x, ch, 7);
  for (size_t i = 0; i < c.ratios.size(); ++i) {
    const size_t r = c.ratios[i];
    EluInPlace(y);
    const std::string t = "decoder.model." + std::to_string(3 * i + 2) + ".convtr.convtr.";
    const std::vector<double> b = F64(ck, t + "bias");
    y = ConvTr(F64(ck, t + "weight"), &b, y, ch / 2, 2 * r, r, false);
    ch /= 2;
    Mat h = y;
    EluInPlace(h);
    const std::string rb = "decoder.model." + std::to_string(3 * i + 3) + ".block.";
    h = Conv1d(ck, rb + "1.conv.conv", h, ch / 2, 3);
    EluInPlace(h);
    h = Conv1d(ck, rb + "3.conv.conv", h, ch, 1);
    for (size_t o = 0; o < ch; ++o)
      for (size_t t2 = 0; t2 < y[o].size(); ++t2) y[o][t2] += h[o][t2];
  }
  EluInPlace(y);
  return Conv1d(ck, "decoder.model." + std::to_string(3 * c.ratios.size() + 2) + ".conv.conv", y, 1, 3)[0];
}

// Batch decode vs the double reference over 10 frames (20 latent steps, past the context of 6). f32 against
// f64: every stage rounds once per product and its sums (γ_K = K·u for K ≤ 7·32 = 224 terms: 1.3e-5 of the
// sum of |terms|) and the 2 + 2 + 5 stages compound; 1e-4 of the PCM scale bounds that with the margin of the
// sums' cancellation (measured: printed).
TEST(MimiFixture, BatchMatchesDoubleReference) {
  const std::string dir = ScratchPath("mimi_ref");
  ASSERT_TRUE(tools::WriteRandomMimi(dir, tools::MimiShape::Tiny()).ok());
  auto m = MimiDecoder::Load(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Result<Checkpoint> ck = Checkpoint::Open(dir + "/model.safetensors");
  ASSERT_TRUE(ck.ok());
  const std::vector<int32_t> codes = RandomCodes(10, (*m)->codebooks(), 64, 7);
  const std::vector<double> ref = Reference(**m, *ck, codes);
  const std::vector<float> pcm = Decode(**m, codes, 10, MimiWindow::kBatch);
  ASSERT_EQ(pcm.size(), ref.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(pcm[i] - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  std::printf("batch vs f64 reference: max|Δ| %.3g at scale %.3g (%.2e)\n", err, scale, err / scale);
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(err, 1e-4 * scale);
}

// Streaming == batch bit for bit within the context (3 frames = 6 steps); any split of the frames gives the
// same PCM bit for bit, in either window, on 1 or 2 threads; past the context the two windows part.
TEST(MimiFixture, StreamingAndSplits) {
  auto m = LoadTiny("mimi_split");
  ASSERT_TRUE(m);
  const size_t C = m->codebooks();
  const std::vector<int32_t> short_codes = RandomCodes(3, C, 64, 3);
  EXPECT_EQ(Decode(*m, short_codes, 1, MimiWindow::kStreaming),
            Decode(*m, short_codes, 3, MimiWindow::kBatch));
  const std::vector<int32_t> codes = RandomCodes(23, C, 64, 5);
  for (MimiWindow w : {MimiWindow::kStreaming, MimiWindow::kBatch}) {
    const std::vector<float> one = Decode(*m, codes, 1, w);
    EXPECT_EQ(one, Decode(*m, codes, 4, w));
    EXPECT_EQ(one, Decode(*m, codes, 23, w, 2));
  }
  const std::vector<float> s = Decode(*m, codes, 1, MimiWindow::kStreaming),
                           b = Decode(*m, codes, 1, MimiWindow::kBatch);
  const size_t spf = m->samples_per_frame();
  EXPECT_TRUE(std::equal(s.begin(), s.begin() + 3 * spf, b.begin()));  // up to step 6: the same keys
  double diff = 0;
  for (size_t i = 3 * spf; i < s.size(); ++i) diff = std::max(diff, std::fabs(double{s[i]} - b[i]));
  EXPECT_GT(diff, 1e-3);  // from step 6 on a frame's first query sees one key less when streaming
}

// Kyutai's released layout: one safetensors file under its own name, no config, encoder tensors and 31
// acoustic codebooks in it: the sizes come from the tensors, get_mimi's defaults for the rest.
TEST(MimiFixture, KyutaiLayoutLoadsFromTensors) {
  tools::MimiShape s;
  s.latent = 64, s.codebook_dim = 8, s.bins = 32, s.layers = 1, s.ffn = 32, s.n_filters = 2,
  s.ratios = {2, 3};
  s.kyutai_layout = true;
  const std::string dir = ScratchPath("mimi_kyutai");
  ASSERT_TRUE(tools::WriteRandomMimi(dir, s).ok());
  EXPECT_TRUE(MimiDecoder::Recognizes(dir));
  for (const std::string& path : {dir, dir + "/" + kMimiCheckpointName}) {
    auto m = MimiDecoder::Load(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const MimiConfig& c = (*m)->config();
    EXPECT_EQ(c.num_layers, 1);
    EXPECT_EQ(c.d_model, 64);
    EXPECT_EQ(c.dim_feedforward, 32);
    EXPECT_EQ(c.codebook_size, 32);
    EXPECT_EQ(c.n_filters, 2);
    EXPECT_EQ(c.ratios, (std::vector<int>{2, 3}));
    EXPECT_EQ(c.num_codebooks, 8);
    EXPECT_EQ((*m)->samples_per_frame(), 12u);
    const std::vector<int32_t> codes = RandomCodes(4, 8, 32, 9);
    const std::vector<float> pcm = Decode(**m, codes, 2, MimiWindow::kStreaming);
    double peak = 0;
    for (float v : pcm) peak = std::max(peak, std::fabs(double{v}));
    EXPECT_GT(peak, 0.0);
  }
}

// Step allocates nothing once the stream exists: a session and its frames, 1 and 2 threads, past the context
// so the K/V rows shift.
TEST(MimiFixture, NoHeapAllocationPerFrame) {
  auto m = LoadTiny("mimi_alloc");
  ASSERT_TRUE(m);
  for (int threads : {1, 2}) {
    ThreadTeam team(threads);
    auto s = MimiSession::Create(*m, 2, threads);
    ASSERT_TRUE(s.ok());
    const std::vector<int32_t> codes = RandomCodes(20, m->codebooks(), 64, 11);
    std::vector<float> pcm(20 * m->samples_per_frame());
    ASSERT_TRUE((*s)->Step(std::span(codes).first(2 * m->codebooks()), pcm, team).ok());  // warm the team
    const long before = testing::AllocationCount();
    for (size_t t = 2; t < 20; t += 2) {
      ASSERT_TRUE(
          (*s)->Step(std::span(codes).subspan(t * m->codebooks(), 2 * m->codebooks()), pcm, team).ok());
    }
    ASSERT_TRUE((*s)->Flush(pcm).ok());
    (*s)->Reset();
    EXPECT_EQ(testing::AllocationCount() - before, 0) << threads << " threads";
  }
}

// Bad input: an error that says what is wrong, and the stream as it was (the next frames decode as if the bad
// call never happened).
TEST(MimiFixture, BadInputChangesNothing) {
  auto m = LoadTiny("mimi_bad");
  ASSERT_TRUE(m);
  const size_t C = m->codebooks(), spf = m->samples_per_frame();
  const std::vector<int32_t> codes = RandomCodes(4, C, 64, 13);
  const std::vector<float> want = Decode(*m, codes, 1, MimiWindow::kStreaming);
  ThreadTeam team(1);
  auto s = MimiSession::Create(*m, 1, 1);
  ASSERT_TRUE(s.ok());
  std::vector<float> pcm(4 * spf);
  ASSERT_TRUE((*s)->Step(std::span(codes).first(C), std::span(pcm).first(spf), team).ok());
  std::vector<int32_t> bad(codes.begin() + C, codes.begin() + 2 * C);
  std::vector<float> junk(spf);
  for (int32_t v : {64, -1, 2048}) {
    bad[1] = v;
    Result<size_t> r = (*s)->Step(bad, junk, team);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("outside [0, 64)"), std::string::npos) << r.status().ToString();
  }
  EXPECT_FALSE((*s)->Step(std::span(codes).subspan(C, C - 1), junk, team).ok());  // not whole frames
  EXPECT_FALSE(
      (*s)->Step(std::span(codes).subspan(C, C), std::span(junk).first(spf - 1), team).ok());  // no room
  for (size_t t = 1; t < 4; ++t)
    ASSERT_TRUE(
        (*s)->Step(std::span(codes).subspan(t * C, C), std::span(pcm).subspan(t * spf, spf), team).ok());
  EXPECT_EQ(pcm, want);
}

TEST(MimiFixture, LoadErrorsSayWhatToDo) {
  auto missing = MimiDecoder::Load(ScratchPath("mimi_nothing_here"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(kMimiCheckpointName), std::string::npos);
  const std::string dir = ScratchPath("mimi_gating");
  ASSERT_TRUE(tools::WriteRandomMimi(dir, tools::MimiShape::Tiny()).ok());
  {
    Result<nlohmann::json> j = ReadJsonFile(dir + "/config.json");
    ASSERT_TRUE(j.ok());
    (*j)["transformer"]["gating"] = "silu";
    std::ofstream(dir + "/config.json") << j->dump();
  }
  auto gated = MimiDecoder::Load(dir);
  ASSERT_FALSE(gated.ok());
  EXPECT_EQ(gated.status().code(), StatusCode::kUnimplemented) << gated.status().ToString();
  EXPECT_NE(gated.status().message().find("gating"), std::string::npos);
}

}  // namespace
}  // namespace lfmvox
