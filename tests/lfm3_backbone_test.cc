// The LFM3 backbone (src/models/lfm3_audio/backbone.h) on random F32 checkpoints written by this test.
// There is no oracle for the backbone, so this proves what can be proved without one:
//   (a) a prefill of N tokens in one call == N one-token decode steps == chunks of 7, bit for bit
//       (zero tolerance: the MatMul contract, every row and every query is computed alone);
//   (b) a checkpoint without gates and sandwich norms, every layer rotating the whole head with one
//       RoPE base, equals Lfm2Stack (src/models/lfm25_audio) run on the same tensors under the LFM2 names.
//       The op order is the same, but RoPE angles are not: Lfm2 forms them in f32 (transformers), Lfm3 in
//       f64 (oracle decision 1), so cos/sin differ in the last bits from position 1 on. The layers before
//       the first attention layer are therefore compared bit for bit, the rest with a float-rounding
//       tolerance 1e-5 · max|Lfm2| (measured ≤ 4.4e-7 of max|Lfm2| over 7 layers and 19 positions; 2^-23 ≈
//       1.2e-7 is one ulp, so ~25× headroom for a different platform's libm cos/sin);
//   (c) partial rotary: the dims past the rotated share of each cached key equal the k-normed projection
//       bit for bit; the rotated share is the RopeTable of that width applied to it; sliding layers rotate
//       the whole head with their own base;
//   (d) a config missing any required key is an error naming it;
//   (e) the generation loop (generation.h): the hidden states it reads step by step (text slots, frames
//       from the depth decoder fed back as the next input, the interleaved n_text/n_audio turn) equal a
//       prefill of the same input rows, bit for bit, and its slots follow the schedule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/lfm25_audio/lfm2_config.h"
#include "models/lfm25_audio/lfm2_stack.h"
#include "models/lfm3_audio/backbone.h"
#include "models/lfm3_audio/generation.h"
#include "models/lfm3_audio/lfm3_config.h"
#include "models/lfm3_audio/lfm3_stack.h"
#include "threading/thread_team.h"
#include "tools/lfm3_checkpoint_gen.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

using testing::CollectingSink;

struct Spec {
  std::vector<std::string> types = {"conv",           "full_attention",   "conv", "sliding_attention", "conv",
                                    "full_attention", "sliding_attention"};
  int H = 64, heads = 4, kv_heads = 2, hd = 16, F = 96, K = 7, V = 50, window = 5;
  double theta = 1e6, theta_swa = 1e4, partial = 0.5;
  bool gates = true, sandwich = true, tied = false;
  bool lfm2_names = false;  // also write the attention tensors under the LFM2 names
  uint64_t seed = 7;
};

nlohmann::json ConfigJson(const Spec& s) {
  nlohmann::json j = {{"vocab_size", s.V},
                      {"hidden_size", s.H},
                      {"num_hidden_layers", s.types.size()},
                      {"num_attention_heads", s.heads},
                      {"num_key_value_heads", s.kv_heads},
                      {"head_dim", s.hd},
                      {"intermediate_size", s.F},
                      {"conv_L_cache", s.K},
                      {"norm_eps", 1e-5},
                      {"layer_types", s.types},
                      {"sliding_window", s.window},
                      {"rope_theta", s.theta},
                      {"rope_theta_swa", s.theta_swa},
                      {"partial_rotary_factor", s.partial},
                      {"rope_style", "neox"},
                      {"tie_word_embeddings", s.tied},
                      {"max_position_embeddings", 4096},
                      {"bos_token_id", 1},
                      {"eos_token_id", 2}};
  if (s.gates) j["attn_gate_kind"] = "per_head";
  return j;
}

struct Writer {
  uint64_t state;
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> tensors;
  float Uniform() {  // SplitMix64 → [-1, 1)
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(static_cast<int64_t>(z >> 11) - (int64_t{1} << 52)) * 0x1.0p-52f;
  }
  const std::vector<float>& Add(const std::string& name, std::vector<int64_t> shape, float mean,
                                float scale) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float>& v = data.emplace_back(static_cast<size_t>(n));
    for (float& x : v) x = mean + scale * Uniform();
    tensors.push_back({name, DType::kF32, std::move(shape), v.data(), v.size() * 4});
    return v;
  }
  void Alias(const std::string& name, const std::string& of) {  // the same data under another name
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].name == of) {
        TensorToWrite t = tensors[i];
        t.name = name;
        tensors.push_back(t);
        return;
      }
    }
  }
  void Matrix(const std::string& name, int64_t out, int64_t in) {
    Add(name, {out, in}, 0.0f, 1.7f / std::sqrt(static_cast<float>(in)));
  }
  void Norm(const std::string& name, int64_t n) { Add(name, {n}, 1.0f, 0.2f); }
};

std::string WriteCheckpoint(const Spec& s, const std::string& tag) {
  Writer w{s.seed, {}, {}};
  w.data.reserve(1024);
  const int64_t H = s.H, KV = int64_t{s.kv_heads} * s.hd, Q = int64_t{s.heads} * s.hd;
  w.Add("lfm.embed_tokens.weight", {s.V, H}, 0.0f, 1.0f);
  if (!s.tied) w.Matrix("lfm.lm_head.weight", s.V, H);
  for (size_t i = 0; i < s.types.size(); ++i) {
    const std::string p = "lfm.layers." + std::to_string(i) + ".";
    w.Norm(p + "operator_norm.weight", H);
    w.Norm(p + "ffn_norm.weight", H);
    if (s.sandwich) {
      w.Norm(p + "post_operator_norm.weight", H);
      w.Norm(p + "post_ffn_norm.weight", H);
    }
    if (s.types[i] == "conv") {
      w.Matrix(p + "conv.in_proj.weight", 3 * H, H);
      w.Add(p + "conv.conv.weight", {H, 1, s.K}, 0.0f, 0.6f);
      w.Matrix(p + "conv.out_proj.weight", H, H);
    } else {
      w.Matrix(p + "self_attn.q_proj.weight", Q, H);
      w.Matrix(p + "self_attn.k_proj.weight", KV, H);
      w.Matrix(p + "self_attn.v_proj.weight", KV, H);
      w.Matrix(p + "self_attn.o_proj.weight", H, Q);
      w.Norm(p + "self_attn.q_norm.weight", s.hd);
      w.Norm(p + "self_attn.k_norm.weight", s.hd);
      if (s.gates) w.Matrix(p + "self_attn.gate_proj.weight", s.heads, H);
      if (s.lfm2_names) {
        w.Alias(p + "self_attn.out_proj.weight", p + "self_attn.o_proj.weight");
        w.Alias(p + "self_attn.q_layernorm.weight", p + "self_attn.q_norm.weight");
        w.Alias(p + "self_attn.k_layernorm.weight", p + "self_attn.k_norm.weight");
      }
    }
    w.Matrix(p + "feed_forward.w1.weight", s.F, H);
    w.Matrix(p + "feed_forward.w3.weight", s.F, H);
    w.Matrix(p + "feed_forward.w2.weight", H, s.F);
  }
  w.Norm("lfm.embedding_norm.weight", H);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lfm3_backbone_test_" + tag + "_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  const Status st = WriteSafetensors(path, w.tensors);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return path;
}

struct Model {
  Lfm3BackboneConfig config;
  std::unique_ptr<Checkpoint> ckpt;
  Lfm3Backbone backbone;
};

std::unique_ptr<Model> LoadModel(const Spec& s, const std::string& tag) {
  auto m = std::make_unique<Model>();
  Result<Lfm3BackboneConfig> c = Lfm3BackboneConfig::FromJson(ConfigJson(s), "test [lfm]");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return nullptr;
  m->config = std::move(c).value();
  const std::string path = WriteCheckpoint(s, tag);
  Result<Checkpoint> ck = Checkpoint::Open(path);
  EXPECT_TRUE(ck.ok()) << ck.status().ToString();
  if (!ck.ok()) return nullptr;
  m->ckpt = std::make_unique<Checkpoint>(std::move(ck).value());
  std::filesystem::remove(path);  // the mapping stays valid
  Result<Lfm3Backbone> b = Lfm3Backbone::Load(*m->ckpt, m->config);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (!b.ok()) return nullptr;
  m->backbone = std::move(b).value();
  return m;
}

std::vector<int32_t> Tokens(size_t n, int V) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 17 + 3) % static_cast<size_t>(V));
  return t;
}

// Runs the tokens in chunks of `chunk` rows; returns final-normed hidden states [n, H] and logits [n, V].
void RunChunks(const Lfm3Backbone& b, const std::vector<int32_t>& tokens, size_t chunk, std::vector<float>* h,
               std::vector<float>* logits, ThreadTeam& team) {
  const size_t H = static_cast<size_t>(b.hidden()), V = static_cast<size_t>(b.vocab()), n = tokens.size();
  Result<Lfm3State> st = Lfm3State::Create(b.stack(), chunk, 64);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  Result<Lfm3Scratch> sc = Lfm3Scratch::Create(b.stack(), chunk, st->max_keys(), team.size());
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  h->assign(n * H, 0.0f);
  logits->assign(n * V, 0.0f);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(b.EmbedToken(tokens[i], h->data() + i * H).ok());
  for (size_t r0 = 0; r0 < n; r0 += chunk) {
    const size_t m = std::min(chunk, n - r0);
    const Status s = Lfm3Forward(b.stack(), *st, h->data() + r0 * H, m, *sc, team, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(st->position(), static_cast<int64_t>(n));
  Lfm3FinalNorm(b.stack(), h->data(), n, h->data());
  b.TextLogits(h->data(), n, logits->data(), team);
}

TEST(Lfm3Backbone, ReadsTheConfigPerLayer) {
  Result<Lfm3BackboneConfig> r = Lfm3BackboneConfig::FromJson(ConfigJson(Spec{}), "test [lfm]");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Lfm3StackConfig& c = r->stack;
  EXPECT_EQ(c.num_attention_layers(), 4);
  EXPECT_EQ(c.conv_kernel, 7);
  EXPECT_FALSE(c.bidirectional());
  EXPECT_EQ(c.layer_window, (std::vector<int>{0, 0, 0, 5, 0, 0, 5}));
  EXPECT_EQ(c.layer_rotary_dims, (std::vector<int>{0, 8, 0, 16, 0, 8, 16}));
  EXPECT_EQ(c.layer_rope_theta[1], 1e6);
  EXPECT_EQ(c.layer_rope_theta[3], 1e4);
}

TEST(Lfm3Backbone, PrefillEqualsStepByStepAndChunks) {
  const Spec s;
  std::unique_ptr<Model> m = LoadModel(s, "prefill");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->backbone.stack().ropes().size(), 2u);  // (1e6, 8 dims) and (1e4, 16 dims)
  ThreadTeam team(2);
  const std::vector<int32_t> tokens = Tokens(23, s.V);  // > 4 windows: the sliding rings wrap
  std::vector<float> h_all, l_all, h, l;
  RunChunks(m->backbone, tokens, tokens.size(), &h_all, &l_all, team);
  for (size_t chunk : {size_t{1}, size_t{7}}) {
    RunChunks(m->backbone, tokens, chunk, &h, &l, team);
    size_t hd = 0, ld = 0;
    for (size_t i = 0; i < h.size(); ++i) hd += h[i] != h_all[i];
    for (size_t i = 0; i < l.size(); ++i) ld += l[i] != l_all[i];
    EXPECT_EQ(hd, 0u) << "chunks of " << chunk << ": hidden values differing from the prefill";
    EXPECT_EQ(ld, 0u) << "chunks of " << chunk << ": logits differing from the prefill";
  }
  // The model is not trivial: positions differ, and the logits are finite.
  float spread = 0;
  for (size_t i = 0; i < l_all.size(); ++i) {
    ASSERT_TRUE(std::isfinite(l_all[i]));
    spread = std::max(spread, std::abs(l_all[i] - l_all[i % static_cast<size_t>(s.V)]));
  }
  EXPECT_GT(spread, 1e-2f);
}

// Two sequences at different positions in one batched call (each with its own RoPE rows in both
// tables) equal each run alone, bit for bit.
TEST(Lfm3Backbone, BatchedSequencesEqualEachAlone) {
  const Spec s;
  std::unique_ptr<Model> m = LoadModel(s, "batch");
  ASSERT_NE(m, nullptr);
  const Lfm3Stack& st = m->backbone.stack();
  const size_t H = static_cast<size_t>(s.H);
  ThreadTeam team(2);
  auto make = [&](size_t rows) {
    Result<Lfm3State> r = Lfm3State::Create(st, rows, 64);
    EXPECT_TRUE(r.ok());
    return std::move(r).value();
  };
  Lfm3State a = make(8), b = make(8), a1 = make(8), b1 = make(8);
  Result<Lfm3Scratch> sc = Lfm3Scratch::Create(st, 16, a.max_keys(), 2);
  ASSERT_TRUE(sc.ok());
  auto embed = [&](size_t n, int32_t off) {
    std::vector<float> x(n * H);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(m->backbone.EmbedToken(static_cast<int32_t>((i * 7 + off) % s.V), x.data() + i * H).ok());
    }
    return x;
  };
  // Sequence b first advances alone by 6 positions (in both copies), so the two differ in position.
  std::vector<float> pre = embed(6, 9), pre1 = pre;
  ASSERT_TRUE(Lfm3Forward(st, b, pre.data(), 6, *sc, team, nullptr).ok());
  ASSERT_TRUE(Lfm3Forward(st, b1, pre1.data(), 6, *sc, team, nullptr).ok());
  std::vector<float> xa = embed(5, 1), xb = embed(3, 4);
  std::vector<float> both(xa);
  both.insert(both.end(), xb.begin(), xb.end());
  Lfm3State* states[2] = {&a, &b};
  const size_t rows[2] = {5, 3};
  ASSERT_TRUE(Lfm3Forward(st, states, rows, both.data(), *sc, team, nullptr).ok());
  ASSERT_TRUE(Lfm3Forward(st, a1, xa.data(), 5, *sc, team, nullptr).ok());
  ASSERT_TRUE(Lfm3Forward(st, b1, xb.data(), 3, *sc, team, nullptr).ok());
  size_t differ = 0;
  for (size_t i = 0; i < xa.size(); ++i) differ += both[i] != xa[i];
  for (size_t i = 0; i < xb.size(); ++i) differ += both[xa.size() + i] != xb[i];
  EXPECT_EQ(differ, 0u);
  EXPECT_EQ(b.position(), 9);
}

TEST(Lfm3Backbone, FullCausalContextIsBounded) {
  std::unique_ptr<Model> m = LoadModel(Spec{}, "context");
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(Lfm3State::Create(m->backbone.stack(), 4).ok());  // full-causal layers need a context
  Result<Lfm3State> st = Lfm3State::Create(m->backbone.stack(), 4, 6);
  ASSERT_TRUE(st.ok());
  ThreadTeam team(1);
  Result<Lfm3Scratch> sc = Lfm3Scratch::Create(m->backbone.stack(), 4, st->max_keys(), 1);
  ASSERT_TRUE(sc.ok());
  std::vector<float> x(4 * 64, 0.1f);
  ASSERT_TRUE(Lfm3Forward(m->backbone.stack(), *st, x.data(), 4, *sc, team, nullptr).ok());
  const Status s = Lfm3Forward(m->backbone.stack(), *st, x.data(), 3, *sc, team, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
  EXPECT_EQ(st->position(), 4);
}

TEST(Lfm3Backbone, WithoutGatesAndSandwichNormsEqualsTheLfm2Stack) {
  Spec s;
  s.gates = false;
  s.sandwich = false;
  s.partial = 1.0;
  s.theta_swa = s.theta;  // LFM2 has one base for every attention layer
  s.lfm2_names = true;
  s.tied = true;
  std::unique_ptr<Model> m = LoadModel(s, "lfm2");
  ASSERT_NE(m, nullptr);
  Lfm2Config c2;
  c2.hidden_size = s.H;
  c2.num_layers = static_cast<int>(s.types.size());
  c2.num_heads = s.heads;
  c2.num_kv_heads = s.kv_heads;
  c2.head_dim = s.hd;
  c2.ffn_dim = s.F;
  c2.conv_kernel = s.K;
  c2.sliding_window = s.window;
  c2.max_positions = 4096;
  c2.norm_eps = 1e-5f;
  c2.rope_theta = s.theta;
  for (const std::string& t : s.types) {
    c2.layers.push_back(t == "conv"             ? LayerKind::kConv
                        : t == "full_attention" ? LayerKind::kFullAttention
                                                : LayerKind::kSlidingAttention);
  }
  Result<Lfm2Stack> l2 = Lfm2Stack::Load(*m->ckpt, c2, "lfm.");
  ASSERT_TRUE(l2.ok()) << l2.status().ToString();
  const size_t n = 19, H = static_cast<size_t>(s.H);
  ThreadTeam team(1);
  Result<Lfm2State> st2 = Lfm2State::Create(*l2, n, 64);
  ASSERT_TRUE(st2.ok()) << st2.status().ToString();
  Result<Lfm2Scratch> sc2 = Lfm2Scratch::Create(*l2, n, st2->max_keys(), 1);
  ASSERT_TRUE(sc2.ok());
  const Lfm3Stack& l3 = m->backbone.stack();
  Result<Lfm3State> st3 = Lfm3State::Create(l3, n, 64);
  ASSERT_TRUE(st3.ok());
  Result<Lfm3Scratch> sc3 = Lfm3Scratch::Create(l3, n, st3->max_keys(), 1);
  ASSERT_TRUE(sc3.ok());
  std::vector<float> x2(n * H), x3(n * H);
  const std::vector<int32_t> tokens = Tokens(n, s.V);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(m->backbone.EmbedToken(tokens[i], x3.data() + i * H).ok());
  x2 = x3;
  CollectingSink t2, t3;
  ASSERT_TRUE(Lfm2Forward(*l2, *st2, x2.data(), n, *sc2, team, &t2).ok());
  ASSERT_TRUE(Lfm3Forward(l3, *st3, x3.data(), n, *sc3, team, &t3).ok());
  Lfm2FinalNorm(*l2, x2.data(), n, x2.data());
  Lfm3FinalNorm(l3, x3.data(), n, x3.data());
  t2.Record("final_norm", x2.data(), n, H, H);
  t3.Record("final_norm", x3.data(), n, H, H);
  for (const auto& [name, ref] : t2.tensors) {
    const std::vector<float>& got = t3.tensors[name];
    ASSERT_EQ(got.size(), ref.size()) << name;
    double err = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err = std::max(err, std::abs(static_cast<double>(got[i]) - ref[i]));
      scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
    }
    if (name == "layer0_out") {
      EXPECT_EQ(err, 0.0) << name << ": before the first attention layer the two stacks agree bit for bit";
    } else {
      EXPECT_LE(err, 1e-5 * scale) << name;
    }
    std::printf("[lfm2 parity] %-11s max|lfm3 - lfm2| = %.3g (%.3g of max|lfm2| = %.3g)\n", name.c_str(), err,
                err / scale, scale);
  }
  EXPECT_EQ(t2.tensors.size(), s.types.size() + 1);
}

TEST(Lfm3Backbone, PartialRotaryLeavesTheTailOfEachHeadUnrotated) {
  Spec s;
  s.types = {"full_attention", "sliding_attention"};  // layer 0 reads the embeddings directly
  std::unique_ptr<Model> m = LoadModel(s, "partial");
  ASSERT_NE(m, nullptr);
  const Lfm3Stack& st = m->backbone.stack();
  const size_t n = 6, H = static_cast<size_t>(s.H), hd = static_cast<size_t>(s.hd);
  const size_t KV = static_cast<size_t>(s.kv_heads) * hd, rd = hd / 2;
  ThreadTeam team(1);
  Result<Lfm3State> state = Lfm3State::Create(st, n, 16);
  ASSERT_TRUE(state.ok());
  Result<Lfm3Scratch> sc = Lfm3Scratch::Create(st, n, state->max_keys(), 1);
  ASSERT_TRUE(sc.ok());
  std::vector<float> x(n * H);
  const std::vector<int32_t> tokens = Tokens(n, s.V);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(m->backbone.EmbedToken(tokens[i], x.data() + i * H).ok());
  // The expected un-rotated keys of layer 0: k_norm(k_proj(operator_norm(x))), with the stack's blocks.
  const Lfm3Layer& L0 = st.layers()[0];
  std::vector<float> xn(n * H), k(n * KV);
  L0.operator_norm.Forward(x.data(), n, H, xn.data(), H);
  L0.attn.k_proj.Forward(xn.data(), n, H, k.data(), KV, team);
  L0.attn.k_norm.ForwardHeads(k.data(), n, KV, static_cast<size_t>(s.kv_heads));
  ASSERT_TRUE(Lfm3Forward(st, *state, x.data(), n, *sc, team, nullptr).ok());
  const KvCache& c0 = state->kv_cache(0);
  ASSERT_EQ(c0.len, n);
  EXPECT_EQ(st.ropes()[L0.rope].rotary_dims(), rd);
  size_t tail_diff = 0, head_diff = 0, rotated_moved = 0;
  std::vector<float> cs(hd), want(KV);
  for (size_t p = 0; p < n; ++p) {
    std::copy(k.begin() + static_cast<ptrdiff_t>(p * KV), k.begin() + static_cast<ptrdiff_t>((p + 1) * KV),
              want.begin());
    st.ropes()[L0.rope].Angles(static_cast<int64_t>(p), cs.data());
    st.ropes()[L0.rope].Apply(want.data(), static_cast<size_t>(s.kv_heads), cs.data());
    for (size_t h = 0; h < static_cast<size_t>(s.kv_heads); ++h) {
      for (size_t d = 0; d < hd; ++d) {
        const size_t i = h * hd + d;
        const float got = c0.k[p * KV + i];
        if (d >= rd) tail_diff += got != k[p * KV + i];
        head_diff += got != want[i];
        if (d < rd && p > 0) rotated_moved += got != k[p * KV + i];
      }
    }
  }
  EXPECT_EQ(tail_diff, 0u) << "un-rotated dims that differ from the k-normed projection";
  EXPECT_EQ(head_diff, 0u) << "cached keys that differ from the partial RopeTable applied to the projection";
  EXPECT_GT(rotated_moved, (n - 1) * static_cast<size_t>(s.kv_heads) * rd / 2) << "the rotated share moved";
  // The sliding layer rotates the whole head: its last dim moves from position 1 on.
  const KvCache& c1 = state->kv_cache(1);
  EXPECT_EQ(st.ropes()[st.layers()[1].rope].rotary_dims(), hd);
  EXPECT_NE(L0.rope, st.layers()[1].rope);
  EXPECT_EQ(c1.len, static_cast<size_t>(s.window - 1));  // the ring keeps window − 1 rows
}

TEST(Lfm3Backbone, ConfigErrorsNameTheMissingKey) {
  const nlohmann::json full = ConfigJson(Spec{});
  for (const char* key :
       {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "intermediate_size", "conv_L_cache", "norm_eps", "layer_types", "sliding_window",
        "rope_theta", "rope_theta_swa", "partial_rotary_factor", "rope_style", "tie_word_embeddings",
        "max_position_embeddings", "bos_token_id", "eos_token_id"}) {
    nlohmann::json j = full;
    j.erase(key);
    Result<Lfm3BackboneConfig> r = Lfm3BackboneConfig::FromJson(j, "model/config.json [lfm]");
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_NE(r.status().message().find(std::string("\"") + key + "\""), std::string::npos)
        << key << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find("model/config.json [lfm]"), std::string::npos)
        << r.status().ToString();
  }
  nlohmann::json j = full;
  j["layer_types"][1] = "attention";
  Result<Lfm3BackboneConfig> r = Lfm3BackboneConfig::FromJson(j, "c");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"layer_types\"[1]"), std::string::npos) << r.status().ToString();
  j = full;
  j["partial_rotary_factor"] = 0.3;  // 16 · 0.3 = 4.8 → 4 dims: fine; 0.1 → 1 dim: odd
  EXPECT_TRUE(Lfm3BackboneConfig::FromJson(j, "c").ok());
  j["partial_rotary_factor"] = 0.1;
  r = Lfm3BackboneConfig::FromJson(j, "c");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("partial_rotary_factor"), std::string::npos) << r.status().ToString();
}

TEST(Lfm3Backbone, TheHeadFollowsTieWordEmbeddings) {
  Spec s;
  s.tied = true;
  std::unique_ptr<Model> m = LoadModel(s, "tied");
  ASSERT_NE(m, nullptr);
  // Tied: logits of a state equal to embedding row t, dotted with row t, is its squared norm.
  std::vector<float> e(static_cast<size_t>(s.H)), logits(static_cast<size_t>(s.V));
  ASSERT_TRUE(m->backbone.EmbedToken(3, e.data()).ok());
  ThreadTeam team(1);
  m->backbone.TextLogits(e.data(), 1, logits.data(), team);
  double sq = 0;
  for (float v : e) sq += double{v} * v;
  EXPECT_NEAR(logits[3], sq, 1e-4 * sq);
  // An untied config on a checkpoint without lm_head names the tensor.
  Lfm3BackboneConfig c = m->config;
  c.tie_word_embeddings = false;
  Result<Lfm3Backbone> b = Lfm3Backbone::Load(*m->ckpt, c);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("lfm.lm_head.weight"), std::string::npos) << b.status().ToString();
  EXPECT_FALSE(m->backbone.EmbedToken(s.V, e.data()).ok());
}

// A small depth decoder (random, tools/lfm3_checkpoint_gen.h) reading 64-wide backbone states.
struct Depth {
  Lfm3Config config;
  std::unique_ptr<Checkpoint> ckpt;
  Lfm3DepthDecoder decoder;
};

std::unique_ptr<Depth> LoadDepth() {
  tools::Lfm3Shape shape;
  shape.text_hidden = 64;
  shape.codec_hidden = 32;
  shape.codec_heads = 2;
  shape.codec_kv_heads = 1;
  shape.codec_ffn = 48;
  shape.quantizer_dim = 16;
  shape.depth_hidden = 32;
  shape.depth_heads = 2;
  shape.depth_kv_heads = 1;
  shape.depth_ffn = 48;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("lfm3_backbone_test_depth_" + std::to_string(::getpid())))
          .string();
  const Status w = tools::WriteRandomLfm3(dir, shape);
  EXPECT_TRUE(w.ok()) << w.ToString();
  auto d = std::make_unique<Depth>();
  Result<Lfm3Config> c = Lfm3Config::Load(dir + "/config.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  Result<Checkpoint> ck = Checkpoint::Open(dir + "/model.safetensors");
  EXPECT_TRUE(ck.ok()) << ck.status().ToString();
  std::filesystem::remove_all(dir);
  if (!c.ok() || !ck.ok()) return nullptr;
  d->config = std::move(c).value();
  d->ckpt = std::make_unique<Checkpoint>(std::move(ck).value());
  Result<Lfm3DepthDecoder> dec = Lfm3DepthDecoder::Load(*d->ckpt, d->config);
  EXPECT_TRUE(dec.ok()) << dec.status().ToString();
  if (!dec.ok()) return nullptr;
  d->decoder = std::move(dec).value();
  return d;
}

// Runs a turn; returns the slots (0 text, 1 audio, 2 an end-of-audio frame) and checks that every hidden
// state the loop read equals a prefill of the prompt and every row it fed.
std::vector<int> RunTurnAndCheckPrefill(const Lfm3Backbone& b, const Lfm3DepthDecoder& depth,
                                        const Lfm3TurnTokens& tok, const std::vector<int32_t>& prompt,
                                        size_t steps, int n_text, int n_audio) {
  const size_t H = static_cast<size_t>(b.hidden());
  ThreadTeam team(1);
  Lfm3AudioSampling sampling;  // the published LFM3-Audio settings: T 1, top-k 128, penalty 1.1
  Result<Lfm3Generator> g = Lfm3Generator::Create(b, depth, tok, n_text, n_audio, sampling, 5, 256, 32, 1);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return {};
  EXPECT_TRUE(g->Begin(prompt, 11, team).ok());
  std::vector<float> inputs(prompt.size() * H), seen;
  for (size_t i = 0; i < prompt.size(); ++i) EXPECT_TRUE(b.EmbedToken(prompt[i], inputs.data() + i * H).ok());
  seen.insert(seen.end(), g->hidden().begin(), g->hidden().end());
  std::vector<int> slots;
  for (size_t s = 0; s < steps; ++s) {
    Lfm3StepOut out;
    const Status st = g->Step(team, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok() || out.turn_ended) break;
    slots.push_back(out.end_of_audio ? 2 : out.audio ? 1 : 0);
    if (out.audio) {  // the fed row is the frame's FrameRow (EosRow at end of audio)
      std::vector<float> want(H);
      if (out.end_of_audio) {
        depth.EosRow(want.data());
      } else {
        EXPECT_TRUE(depth.FrameRow(g->frame(), want.data()).ok());
      }
      EXPECT_TRUE(std::equal(want.begin(), want.end(), g->last_input().begin()));
    }
    inputs.insert(inputs.end(), g->last_input().begin(), g->last_input().end());
    seen.insert(seen.end(), g->hidden().begin(), g->hidden().end());
  }
  // One prefill of everything fed.
  const size_t n = inputs.size() / H;
  Result<Lfm3State> st = Lfm3State::Create(b.stack(), n, n);
  Result<Lfm3Scratch> sc = Lfm3Scratch::Create(b.stack(), n, st->max_keys(), 1);
  EXPECT_TRUE(Lfm3Forward(b.stack(), *st, inputs.data(), n, *sc, team, nullptr).ok());
  Lfm3FinalNorm(b.stack(), inputs.data(), n, inputs.data());
  const size_t first = prompt.size() - 1;  // the loop saw the prompt's last row, then one row per step
  size_t differ = 0;
  for (size_t r = first; r < n; ++r) {
    for (size_t i = 0; i < H; ++i) differ += inputs[r * H + i] != seen[(r - first) * H + i];
  }
  EXPECT_EQ(differ, 0u) << "hidden values of the step-by-step loop that differ from the prefill";
  EXPECT_EQ(seen.size(), (n - first) * H);
  return slots;
}

TEST(Lfm3Generation, InterleavedTurnFollowsTheScheduleAndEqualsAPrefill) {
  std::unique_ptr<Depth> d = LoadDepth();
  ASSERT_NE(d, nullptr);
  Spec s;
  s.V = 2000;  // a vocabulary wide enough that the greedy text rarely hits a special id by chance
  std::unique_ptr<Model> m = LoadModel(s, "gen");
  ASSERT_NE(m, nullptr);
  const Lfm3TurnTokens tok{
      .audio_start = 1990, .mixed_start = 1991, .text_end = 1992, .im_end = 1993, .eos = 2};
  // <|mixed_start|> ends the prompt: 6 text, 12 audio, 6 text, … (lfmvox takes the counts as config.json's
  // interleaved_n_text / interleaved_n_audio; these are LFM3-Audio's published 6 and 12).
  const std::vector<int32_t> prompt = {1, 17, 33, 250, 1991};
  const std::vector<int> slots = RunTurnAndCheckPrefill(m->backbone, d->decoder, tok, prompt, 30, 6, 12);
  ASSERT_EQ(slots.size(), 30u) << "the turn ended early (a random greedy token hit a special id)";
  // The schedule holds until an end-of-audio frame (random weights may sample the EOS code); after it
  // every slot is text. At least one whole 6 + 12 block must come first.
  const size_t eos = static_cast<size_t>(std::find(slots.begin(), slots.end(), 2) - slots.begin());
  EXPECT_GE(eos, 18u);
  for (size_t i = 0; i < slots.size(); ++i) {
    const int want = i < eos ? ((i % 18) >= 6 ? 1 : 0) : i == eos ? 2 : 0;
    EXPECT_EQ(slots[i], want) << "slot " << i << " (first end-of-audio frame at " << eos << ")";
  }
  std::printf("[interleaved] slots:");
  for (int v : slots) std::printf(" %d", v);
  std::printf("\n");
}

TEST(Lfm3Generation, SpeechAndFreeTextTurnsEqualAPrefill) {
  std::unique_ptr<Depth> d = LoadDepth();
  ASSERT_NE(d, nullptr);
  Spec s;
  s.V = 2000;
  std::unique_ptr<Model> m = LoadModel(s, "gen2");
  ASSERT_NE(m, nullptr);
  const Lfm3TurnTokens tok{
      .audio_start = 1990, .mixed_start = 1991, .text_end = 1992, .im_end = 1993, .eos = 2};
  // <|audio_start|>: every slot is audio until an end-of-audio frame.
  const std::vector<int> audio =
      RunTurnAndCheckPrefill(m->backbone, d->decoder, tok, {1, 40, 41, 1990}, 9, 6, 12);
  ASSERT_FALSE(audio.empty());
  EXPECT_EQ(audio[0], 1);
  // A free-text task prompt: text slots only (the greedy tokens decide; none of the mode switches here).
  const std::vector<int> text =
      RunTurnAndCheckPrefill(m->backbone, d->decoder, tok, {1, 40, 41, 42}, 9, 6, 12);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text[0], 0);
  // A full context ends the turn with an error, and Step refuses after it.
  {
    ThreadTeam team1(1);
    Result<Lfm3Generator> small =
        Lfm3Generator::Create(m->backbone, d->decoder, tok, 6, 12, Lfm3AudioSampling{}, 5, 6, 4, 1);
    ASSERT_TRUE(small.ok()) << small.status().ToString();
    ASSERT_TRUE(small->Begin(std::vector<int32_t>{1, 40, 41, 1990}, 1, team1).ok());
    Lfm3StepOut out;
    EXPECT_TRUE(small->Step(team1, &out).ok());
    EXPECT_TRUE(small->Step(team1, &out).ok());
    EXPECT_EQ(small->position(), 6);
    const Status full = small->Step(team1, &out);
    EXPECT_EQ(full.code(), StatusCode::kOutOfRange) << full.ToString();
    EXPECT_TRUE(small->turn_ended());
    EXPECT_FALSE(small->Step(team1, &out).ok());
  }
  // Without the schedule in the files, the interleaved turn names the missing keys.
  ThreadTeam team(1);
  Result<Lfm3Generator> g =
      Lfm3Generator::Create(m->backbone, d->decoder, tok, 0, 0, Lfm3AudioSampling{}, 5, 64, 8, 1);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const Status st = g->Begin(std::vector<int32_t>{1, 1991}, 1, team);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("interleaved_n_text"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace lfmvox
