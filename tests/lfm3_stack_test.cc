// The LFM3 config and layer stack against the lfm3_tiny oracle (tests/data/lfm3_tiny; oracle README
// "LFM3-Audio speech output"):
//   causal mode (the codec stack, window 30): codec__T{4,45}__stacked → layer{i}_out → final_norm,
//     model parity tolerance k = 5e-5 of max|oracle| (group codec/lfm);
//   bidirectional mode (the depth decoder's stack): depth__greedy__pass{p}__in → layer{0,1,2}_out →
//     final_norm, k = 1e-5 (group depth/stack).
// Tolerances are the oracle README's measured ones (about 10× its float32-vs-float64 spread), not derived.
// Streaming the causal stack in pieces equals one pass bit for bit (zero tolerance, the MatMul contract);
// config and checkpoint errors name the key or the tensor.
#include "models/lfm3_audio/lfm3_stack.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/json_config.h"
#include "io/safetensors.h"
#include "models/lfm3_audio/lfm3_config.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

using testing::CollectingSink;
using testing::Compare;
using testing::DataPath;
using testing::Diff;
using testing::LoadTrace;

constexpr double kCodecStackTol = 5e-5;  // codec/lfm
constexpr double kDepthStackTol = 1e-5;  // depth/stack

const std::string kConfig = "lfm3_tiny/config.json";

const Lfm3Config& Config() {
  static const Lfm3Config c = [] {
    Result<Lfm3Config> r = Lfm3Config::Load(DataPath(kConfig));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : Lfm3Config{};
  }();
  return c;
}

const Checkpoint& Weights() {
  static const Checkpoint* ck = [] {
    Result<Checkpoint> r = Checkpoint::Open(DataPath("lfm3_tiny/model.safetensors"));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? new Checkpoint(std::move(r).value()) : nullptr;
  }();
  return *ck;
}

TEST(Lfm3Config, ReadsTheOracleConfig) {
  const Lfm3Config& c = Config();
  EXPECT_EQ(c.n_codebooks, 12);
  EXPECT_EQ(c.codebook_size, 2017);
  EXPECT_EQ(c.audio_eos, 2016);
  EXPECT_EQ(c.maskgit, (std::vector<int>{4, 4, 4}));
  EXPECT_EQ(c.text_hidden, 64);
  const Lfm3StackConfig& d = c.depth.stack;
  EXPECT_EQ(d.hidden_size, 128);
  EXPECT_EQ(d.num_heads, 4);
  EXPECT_EQ(d.num_kv_heads, 2);
  EXPECT_EQ(d.head_dim, 32);
  EXPECT_EQ(d.ffn_dim, 352);
  EXPECT_EQ(d.window, 0);
  EXPECT_EQ(d.num_attention_layers(), 3);
  EXPECT_EQ(d.attn_gate, (std::vector<bool>{true, false, true}));
  EXPECT_FLOAT_EQ(c.depth.head_norm_eps, 1e-5f);
  const Lfm3CodecConfig& k = c.codec;
  EXPECT_EQ(k.stack.window, 30);
  EXPECT_EQ(k.stack.conv_kernel, 3);
  EXPECT_EQ(k.stack.head_dim, 64);
  EXPECT_EQ(k.stack.num_attention_layers(), 3);
  EXPECT_EQ(k.fsq_levels, (std::vector<int>{8, 7, 6, 6}));
  EXPECT_EQ(k.num_codes(), 2016);
  EXPECT_EQ(k.latent_dim(), 48);
  EXPECT_EQ(k.quantizer_dim, 256);
  EXPECT_EQ(k.frame_stack, 6);
  EXPECT_EQ(k.n_fft, 1280);
  EXPECT_EQ(k.hop, 320);
  EXPECT_EQ(k.frame_samples, 1920);
  EXPECT_EQ(k.spectrum_dim(), 1282);
}

// Every bad value is an error naming the key and the file (`where`).
TEST(Lfm3Config, BadValuesNameKeyAndFile) {
  Result<nlohmann::json> j = ReadJsonFile(DataPath(kConfig));
  ASSERT_TRUE(j.ok());
  struct Case {
    const char* section;  // nullptr: top level
    const char* key;
    nlohmann::json value;
    const char* expect;  // in the message
  };
  const std::vector<Case> cases = {
      {"codec", "head_dim", 32, "\"head_dim\""},  // 2·32 != 128
      {"depth_decoder", "num_heads", 3, "\"num_heads\""},
      {"codec", "num_kv_heads", 3, "\"num_kv_heads\""},
      {"codec", "layer_types", nlohmann::json::array({"conv"}), "\"layer_types\""},
      {"codec", "rope_style", "interleaved", "\"rope_style\""},
      {"codec", "window", nullptr, "\"window\""},
      {"codec", "window", -1, "\"window\""},
      {"depth_decoder", "window", 12, "\"window\""},
      {"codec", "fsq_basis", nlohmann::json::array({1, 8, 56, 300}), "\"fsq_basis\""},
      {"codec", "n_q", 8, "\"n_q\""},
      {"codec", "frame_samples", 1000, "\"frame_samples\""},
      {"codec", "magnitude_clamp", 10.0, "\"magnitude_clamp\""},
      {"codec", "conv_L_cache", nullptr, "\"conv_L_cache\""},
      {"codec", "attn_gate", nlohmann::json::array({true}), "\"attn_gate\""},
      {"codec", "hidden_size", "wide", "\"hidden_size\""},
      {nullptr, "audio_eos", 2017, "\"audio_eos\""},
      {nullptr, "maskgit", nlohmann::json::array({4, 4}), "\"maskgit\""},
      {nullptr, "n_codebooks", nullptr, "\"n_codebooks\""},
  };
  for (const Case& c : cases) {
    nlohmann::json bad = *j;
    nlohmann::json& obj = c.section ? bad[c.section] : bad;
    if (c.value.is_null()) {
      obj.erase(c.key);
      if (std::string(c.key) == "window") obj[c.key] = nullptr;
    } else {
      obj[c.key] = c.value;
    }
    Result<Lfm3Config> r = Lfm3Config::FromJson(bad, "cfg.json");
    ASSERT_FALSE(r.ok()) << c.key;
    const std::string msg = r.status().ToString();
    EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
    EXPECT_NE(msg.find("cfg.json"), std::string::npos) << msg;
  }
}

// RoPE tables per decision 1: inv_freq = f32(1/θ^(2i/hd)) in f64; cos/sin of the f64 angle.
TEST(Lfm3Stack, RopeTableIsDecisionOne) {
  const RopeTable rope(1e6, 64, RopeStyle::kSplitHalf, RopeAngles::kF64);
  std::vector<float> cs(64);
  rope.Angles(269, cs.data());
  for (size_t i = 0; i < 32; ++i) {
    const float inv = static_cast<float>(1.0 / std::pow(1e6, static_cast<double>(2 * i) / 64.0));
    EXPECT_EQ(rope.inv_freq()[i], inv);
    const double a = 269.0 * static_cast<double>(inv);
    EXPECT_EQ(cs[i], static_cast<float>(std::cos(a)));
    EXPECT_EQ(cs[32 + i], static_cast<float>(std::sin(a)));
  }
}

TEST(Lfm3Stack, LoadsWithDetectedNormsAndGates) {
  Result<Lfm3Stack> codec = Lfm3Stack::Load(Weights(), Config().codec.stack, "codec.decoder.lfm.");
  ASSERT_TRUE(codec.ok()) << codec.status().ToString();
  for (size_t i = 0; i < 8; ++i) {
    const Lfm3Layer& L = codec->layers()[i];
    EXPECT_TRUE(L.has_post_operator_norm() && L.has_post_ffn_norm()) << i;
    EXPECT_EQ(L.kind == Lfm3LayerKind::kAttention, i == 2 || i == 4 || i == 6) << i;
    EXPECT_EQ(L.attn.has_gate(), i == 2 || i == 6) << i;
  }
  Result<Lfm3Stack> depth = Lfm3Stack::Load(Weights(), Config().depth.stack, "depth_decoder.model.");
  ASSERT_TRUE(depth.ok()) << depth.status().ToString();
  EXPECT_TRUE(depth->bidirectional());
  EXPECT_EQ(depth->layers()[1].attn.has_gate(), false);
  EXPECT_EQ(depth->layers()[2].attn.has_gate(), true);
}

// Runs trace `in` ([n, H]) through the stack in pieces of `piece` rows (0: one call) and returns the
// traced layer outputs and final_norm.
std::map<std::string, std::vector<float>> RunStack(const Lfm3Stack& stack, const std::vector<float>& in,
                                                   size_t piece, int threads) {
  const size_t H = static_cast<size_t>(stack.config().hidden_size), n = in.size() / H;
  if (piece == 0) piece = n;
  ThreadTeam team(threads);
  Result<Lfm3State> st = Lfm3State::Create(stack, piece);
  EXPECT_TRUE(st.ok());
  Result<Lfm3Scratch> sc = Lfm3Scratch::Create(stack, piece, st->max_keys(), threads);
  EXPECT_TRUE(sc.ok());
  std::vector<float> x = in;
  CollectingSink sink;
  for (size_t r = 0; r < n; r += piece) {
    const size_t k = std::min(piece, n - r);
    Status s = Lfm3Forward(stack, *st, x.data() + r * H, k, *sc, team, &sink);
    EXPECT_TRUE(s.ok()) << s.ToString();
    Lfm3FinalNorm(stack, x.data() + r * H, k, x.data() + r * H);
  }
  sink.tensors["final_norm"] = x;
  return sink.tensors;
}

void CheckAgainst(const std::map<std::string, std::vector<float>>& got, const std::string& pre, size_t layers,
                  double tol) {
  std::vector<std::string> names;
  for (size_t i = 0; i < layers; ++i) names.push_back("layer" + std::to_string(i) + "_out");
  names.push_back("final_norm");
  for (const std::string& name : names) {
    const std::vector<float> ref = LoadTrace(pre + name + ".npy").ToFloat();
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    ASSERT_EQ(it->second.size(), ref.size()) << pre << name;
    const Diff d = Compare(it->second.data(), ref);
    EXPECT_LE(d.rel(), tol) << pre << name << ": max abs " << d.max_abs << " scale " << d.scale;
    std::printf("  %s%-12s max abs %.3g, %.3g of scale (k = %g)\n", pre.c_str(), name.c_str(), d.max_abs,
                d.rel(), tol);
  }
}

class Lfm3CodecStackTrace : public ::testing::TestWithParam<int> {};

// codec__T{nf}__stacked → layer{0..7}_out → final_norm, causal window 30, positions 0..6nf−1.
TEST_P(Lfm3CodecStackTrace, MatchesLayerOuts) {
  const std::string pre = "lfm3_tiny/traces/codec__T" + std::to_string(GetParam()) + "__";
  Result<Lfm3Stack> stack = Lfm3Stack::Load(Weights(), Config().codec.stack, "codec.decoder.lfm.");
  ASSERT_TRUE(stack.ok()) << stack.status().ToString();
  const std::vector<float> in = LoadTrace(pre + "stacked.npy").ToFloat();
  CheckAgainst(RunStack(*stack, in, 0, 1), pre, 8, kCodecStackTol);
}

INSTANTIATE_TEST_SUITE_P(Lengths, Lfm3CodecStackTrace, ::testing::Values(1, 4, 45));

// Rows in pieces (6 = one code frame, 7, 1) equal one pass bit for bit, on 1 and 2 threads: the window
// ring, the conv histories and the positions carry across calls.
TEST(Lfm3Stack, CausalPiecesEqualOnePassBitForBit) {
  Result<Lfm3Stack> stack = Lfm3Stack::Load(Weights(), Config().codec.stack, "codec.decoder.lfm.");
  ASSERT_TRUE(stack.ok());
  const std::vector<float> in = LoadTrace("lfm3_tiny/traces/codec__T45__stacked.npy").ToFloat();
  const auto whole = RunStack(*stack, in, 0, 1).at("final_norm");
  for (auto [piece, threads] : {std::pair{6, 1}, {7, 2}, {1, 1}, {64, 2}}) {
    const auto part = RunStack(*stack, in, static_cast<size_t>(piece), threads).at("final_norm");
    ASSERT_EQ(part.size(), whole.size());
    EXPECT_EQ(std::memcmp(part.data(), whole.data(), whole.size() * 4), 0) << piece << " rows per call";
  }
}

class Lfm3DepthStackTrace : public ::testing::TestWithParam<int> {};

// depth__greedy__pass{p}__in → layer{0,1,2}_out → final_norm: bidirectional, positions 0..11.
TEST_P(Lfm3DepthStackTrace, MatchesLayerOuts) {
  const std::string pre = "lfm3_tiny/traces/depth__greedy__pass" + std::to_string(GetParam()) + "__";
  Result<Lfm3Stack> stack = Lfm3Stack::Load(Weights(), Config().depth.stack, "depth_decoder.model.");
  ASSERT_TRUE(stack.ok()) << stack.status().ToString();
  const std::vector<float> in = LoadTrace(pre + "in.npy").ToFloat();
  CheckAgainst(RunStack(*stack, in, 0, 1), pre, 3, kDepthStackTol);
}

INSTANTIATE_TEST_SUITE_P(Passes, Lfm3DepthStackTrace, ::testing::Values(0, 1, 2));

// Bidirectional: each call is a whole sequence, so a second call on the same state equals the first,
// and two sequences batched in one call equal each alone, bit for bit.
TEST(Lfm3Stack, BidirectionalCallsAreIndependentAndBatch) {
  Result<Lfm3Stack> stack = Lfm3Stack::Load(Weights(), Config().depth.stack, "depth_decoder.model.");
  ASSERT_TRUE(stack.ok());
  const std::vector<float> a = LoadTrace("lfm3_tiny/traces/depth__greedy__pass0__in.npy").ToFloat();
  const std::vector<float> b = LoadTrace("lfm3_tiny/traces/depth__greedy__pass2__in.npy").ToFloat();
  const size_t H = 128, n = 12;
  ThreadTeam team(2);
  Result<Lfm3State> s1 = Lfm3State::Create(*stack, n), s2 = Lfm3State::Create(*stack, n);
  Result<Lfm3Scratch> sc = Lfm3Scratch::Create(*stack, 2 * n, s1->max_keys(), 2);
  ASSERT_TRUE(s1.ok() && s2.ok() && sc.ok());
  std::vector<float> xa = a, xa2 = a, xb = b;
  ASSERT_TRUE(Lfm3Forward(*stack, *s1, xa.data(), n, *sc, team, nullptr).ok());
  ASSERT_TRUE(Lfm3Forward(*stack, *s1, xa2.data(), n, *sc, team, nullptr).ok());
  EXPECT_EQ(std::memcmp(xa.data(), xa2.data(), n * H * 4), 0);
  ASSERT_TRUE(Lfm3Forward(*stack, *s2, xb.data(), n, *sc, team, nullptr).ok());
  std::vector<float> both = a;
  both.insert(both.end(), b.begin(), b.end());
  Lfm3State* states[2] = {&*s1, &*s2};
  const size_t rows[2] = {n, n};
  ASSERT_TRUE(Lfm3Forward(*stack, states, rows, both.data(), *sc, team, nullptr).ok());
  EXPECT_EQ(std::memcmp(both.data(), xa.data(), n * H * 4), 0);
  EXPECT_EQ(std::memcmp(both.data() + n * H, xb.data(), n * H * 4), 0);
}

// A checkpoint that disagrees with the config, or lacks a tensor, is an error naming it.
TEST(Lfm3Stack, BadCheckpointNamesTheTensor) {
  Lfm3StackConfig c = Config().codec.stack;
  c.layers[2] = Lfm3LayerKind::kConv;
  Result<Lfm3Stack> r = Lfm3Stack::Load(Weights(), c, "codec.decoder.lfm.");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("layer_types"), std::string::npos) << r.status().ToString();

  c = Config().codec.stack;
  c.attn_gate[4] = true;
  r = Lfm3Stack::Load(Weights(), c, "codec.decoder.lfm.");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("layers.4.self_attn.gate_proj.weight"), std::string::npos)
      << r.status().ToString();

  c = Config().codec.stack;
  c.ffn_dim = 256;
  r = Lfm3Stack::Load(Weights(), c, "codec.decoder.lfm.");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("layers.0.feed_forward.w1.weight"), std::string::npos)
      << r.status().ToString();

  c = Config().codec.stack;
  c.layers.pop_back();
  c.num_layers = 7;
  c.post_operator_norm.clear();
  c.post_ffn_norm.clear();
  c.attn_gate.clear();
  r = Lfm3Stack::Load(Weights(), c, "codec.decoder.lfm.");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("layers.7.operator_norm.weight"), std::string::npos)
      << r.status().ToString();

  r = Lfm3Stack::Load(Weights(), Config().codec.stack, "codec.nothing.");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("codec.nothing.layers.0."), std::string::npos)
      << r.status().ToString();
}

// Forward refuses more rows than the state or scratch was sized for, without touching the state.
TEST(Lfm3Stack, ForwardRejectsOversizedCalls) {
  Result<Lfm3Stack> stack = Lfm3Stack::Load(Weights(), Config().codec.stack, "codec.decoder.lfm.");
  ASSERT_TRUE(stack.ok());
  ThreadTeam team(1);
  Result<Lfm3State> st = Lfm3State::Create(*stack, 6);
  Result<Lfm3Scratch> sc = Lfm3Scratch::Create(*stack, 12, st->max_keys(), 1);
  ASSERT_TRUE(st.ok() && sc.ok());
  std::vector<float> x(12 * 128, 0.5f);
  EXPECT_FALSE(Lfm3Forward(*stack, *st, x.data(), 12, *sc, team, nullptr).ok());
  EXPECT_EQ(st->position(), 0);
  EXPECT_EQ(x[0], 0.5f);
  ThreadTeam two(2);
  EXPECT_FALSE(Lfm3Forward(*stack, *st, x.data(), 6, *sc, two, nullptr).ok());
  EXPECT_EQ(st->position(), 0);
}

}  // namespace
}  // namespace lfmvox
