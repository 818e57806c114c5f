// The LFM2.5 depthformer against the oracle traces
//   tests/data/lfm25_{tiny,small}/traces/depth__{in_hidden,depth_linear_out,cb{k}_in,cb{k}_out,cb{k}_logits,
//   codes,top2_gap}.npy
// (official liquid-audio `_sample_audio_frame`, float32, greedy), loading
// with and without the tied `to_logits` copy, load errors, and zero heap
// allocation per frame.
//
// Tolerance, measured by the oracle (not derived): its README's k = 5e-5 for the depth group, per tensor
// max|port − oracle| ≤ k·max|oracle|. Its observed float32-vs-float64 spread
// is 2.1e-6 of scale; two f32 implementations that differ in summation order
// land within a few times that, so 5e-5 is ~10× headroom. Greedy codes must
// match exactly: the smallest top-1/top-2 gap (0.049 tiny, 0.386 small) is
// checked to exceed 10× our largest logit error.
#include "models/lfm25_audio/depthformer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "blocks/sampling.h"
#include "io/json_config.h"
#include "io/safetensors.h"
#include "model_files.h"
#include "models/lfm25_audio/config.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

using testing::CollectingSink;
using testing::Compare;
using testing::DataPath;
using testing::Diff;
using testing::LoadTrace;

constexpr double kDepthTol = 5e-5;

// A checkpoint, its config.json and the depthformer loaded from them.
struct Loaded {
  std::unique_ptr<Checkpoint> ckpt;
  nlohmann::json config;
  int hidden = 0;
  std::unique_ptr<Depthformer> model;
};

// Opens `ckpt_path` (a file or a case folder) with the case's config.json,
// optionally edited; returns the load status in *status.
Loaded Load(const std::string& ckpt_path, const std::string& case_name, Status* status,
            void (*edit)(nlohmann::json&) = nullptr) {
  Loaded l;
  Result<Checkpoint> ckpt = Checkpoint::Open(ckpt_path);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  Result<nlohmann::json> cfg = ReadJsonFile(DataPath(case_name + "/config.json"));
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
  if (!ckpt.ok() || !cfg.ok()) {
    *status = Internal("test setup failed");
    return l;
  }
  l.ckpt = std::make_unique<Checkpoint>(std::move(ckpt).value());
  l.config = std::move(cfg).value();
  if (edit) edit(l.config);
  Result<Lfm25AudioConfig> parsed =
      Lfm25AudioConfig::FromJson(l.config, DataPath(case_name + "/config.json"));
  if (!parsed.ok()) {
    *status = parsed.status();
    return l;
  }
  l.hidden = parsed->lfm.hidden_size;
  Result<Depthformer> df = Depthformer::Load(*l.ckpt, parsed->depthformer, l.hidden);
  *status = df.status();
  if (df.ok()) l.model = std::make_unique<Depthformer>(std::move(df).value());
  return l;
}

// The case in the test's weights format (model_files.h).
Loaded LoadCase(const std::string& case_name) {
  Loaded l;
  testing::ModelFiles files = testing::OpenModelFiles(case_name);
  if (!files.weights) return l;
  l.ckpt = std::make_unique<Checkpoint>(std::move(*files.weights));
  l.config = files.config;
  Result<Lfm25AudioConfig> parsed = Lfm25AudioConfig::FromJson(l.config, files.where);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (!parsed.ok()) return l;
  l.hidden = parsed->lfm.hidden_size;
  Result<Depthformer> df = Depthformer::Load(*l.ckpt, parsed->depthformer, l.hidden);
  EXPECT_TRUE(df.ok()) << df.status().ToString();
  if (df.ok()) l.model = std::make_unique<Depthformer>(std::move(df).value());
  return l;
}

std::vector<float> InHidden(const std::string& case_name) {
  return LoadTrace(case_name + "/traces/depth__in_hidden.npy").ToFloat();
}

// Runs one greedy frame; returns the codes and fills sink.
std::vector<int32_t> GreedyFrame(const Depthformer& df, const std::vector<float>& h, int threads,
                                 TraceSink* sink) {
  ThreadTeam team(threads);
  Result<DepthformerScratch> st = DepthformerScratch::Create(df, 1, threads);
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  Result<Sampler> sampler =
      Sampler::Create(SamplingParams::Greedy(), static_cast<size_t>(df.config().codebook_vocab));
  EXPECT_TRUE(sampler.ok());
  if (!st.ok() || !sampler.ok()) return {};
  Rng rng(1);
  std::vector<int32_t> codes(static_cast<size_t>(df.config().num_codebooks), -1);
  const Status s = SampleAudioFrame(df, *st, h.data(), *sampler, rng, codes.data(), team, sink);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(rng.state(), 1u) << "a greedy frame must not draw random numbers";
  return codes;
}

class DepthParity : public ::testing::TestWithParam<const char*> {};

TEST_P(DepthParity, MatchesOracleTracesAndGreedyCodes) {
  const std::string c = GetParam();
  Loaded l = LoadCase(c);
  ASSERT_TRUE(l.model);
  const DepthformerConfig& cfg = l.model->config();
  // The oracle's configuration table: dim 128, 32 q / 8 kv heads of 4, 8 codebooks of 2049.
  EXPECT_EQ(cfg.heads, 32);
  EXPECT_EQ(cfg.kv_heads, 8);
  EXPECT_EQ(cfg.head_dim, 4);
  EXPECT_EQ(cfg.num_codebooks, 8);
  EXPECT_EQ(cfg.codebook_vocab, 2049);
  EXPECT_EQ(cfg.ffn, 512);  // 256·ceil(int(2·4·128/3)/256)
  // Bytes per frame (2 per weight in bf16 and F16, 4 in F32): depth_linear
  // [1024, H]; per codebook the 2 layers' qkv [192,128], out [128,128],
  // w1/w3 [512,128], w2 [128,512]; 8 logit tables [2049,128]; 7 embedding rows of 128.
  const size_t layer = 192 * 128 + 128 * 128 + 3 * 512 * 128;
  const size_t elem = testing::WeightsVariant() == "gguf-f32" ? 4 : 2;
  EXPECT_EQ(l.model->weight_bytes(),
            elem * (1024 * static_cast<size_t>(l.hidden) + 8 * 2 * layer + 8 * 2049 * 128 + 7 * 128));

  const std::vector<float> h = InHidden(c);
  ASSERT_EQ(h.size(), static_cast<size_t>(l.hidden));
  CollectingSink sink;
  const std::vector<int32_t> codes = GreedyFrame(*l.model, h, 1, &sink);
  ASSERT_EQ(codes.size(), 8u);

  const std::string pre = c + "/traces/depth__";
  double worst = 0, worst_logit_abs = 0;
  auto check = [&](const std::string& name) {
    const std::vector<float> ref = LoadTrace(pre + name + ".npy").ToFloat();
    const std::vector<float>& port = sink.tensors[name];
    ASSERT_EQ(port.size(), ref.size()) << name;
    const Diff d = Compare(port.data(), ref);
    EXPECT_LE(d.rel(), kDepthTol) << "depth__" << name << ".npy: max abs " << d.max_abs << ", scale "
                                  << d.scale;
    worst = std::max(worst, d.rel());
    if (name.find("logits") != std::string::npos) worst_logit_abs = std::max(worst_logit_abs, d.max_abs);
    if (std::getenv("LFMVOX_TEST_VERBOSE")) {
      std::printf("  %-18s max abs %.3g, %.3g of scale\n", name.c_str(), d.max_abs, d.rel());
    }
  };
  check("depth_linear_out");
  for (int k = 0; k < 8; ++k) {
    for (const char* what : {"_in", "_out", "_logits"}) check("cb" + std::to_string(k) + what);
  }

  // depth__codes.npy: exact.
  const std::vector<int64_t> ref_codes = LoadTrace(pre + "codes.npy").ToInt64();
  ASSERT_EQ(ref_codes.size(), 8u);
  for (size_t k = 0; k < 8; ++k) EXPECT_EQ(codes[k], ref_codes[k]) << "codebook " << k;

  // Our own top-1/top-2 gaps against depth__top2_gap.npy, and the margin.
  const std::vector<float> ref_gap = LoadTrace(pre + "top2_gap.npy").ToFloat();
  double min_gap = 1e30;
  for (size_t k = 0; k < 8; ++k) {
    std::vector<float> lg = sink.tensors["cb" + std::to_string(k) + "_logits"];
    std::partial_sort(lg.begin(), lg.begin() + 2, lg.end(), std::greater<float>());
    const double gap = static_cast<double>(lg[0]) - lg[1];
    EXPECT_NEAR(gap, ref_gap[k], 2 * worst_logit_abs + 1e-6) << "codebook " << k;
    min_gap = std::min(min_gap, gap);
  }
  EXPECT_GT(min_gap, 10 * worst_logit_abs)
      << "greedy decisions are too close to the logit error to be reliable";
  std::printf("[%s] worst tensor error %.3g of scale; max logit error %.3g; min top-2 gap %.4f (%.0fx)\n",
              c.c_str(), worst, worst_logit_abs, min_gap, min_gap / std::max(worst_logit_abs, 1e-30));
  RecordProperty("worst_rel_error", std::to_string(worst));
  RecordProperty("min_top2_gap", std::to_string(min_gap));

  // The MatMul determinism contract and per-head attention tasks make the
  // result independent of the team size, bit for bit.
  CollectingSink sink2;
  EXPECT_EQ(GreedyFrame(*l.model, h, 2, &sink2), codes);
  for (const auto& [name, v] : sink.tensors)
    EXPECT_EQ(sink2.tensors[name], v) << name << " differs with 2 threads";
}

INSTANTIATE_TEST_SUITE_P(Cases, DepthParity, ::testing::Values("lfm25_tiny", "lfm25_small"));

// ---------------------------------------------------------------------------
// Loading variants, written as depth-only safetensors files into a temp dir.

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("lfmvox_depthformer_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// The depthformer's tensors of a checkpoint, in name order, as views.
std::vector<TensorToWrite> DepthTensors(const Checkpoint& ckpt) {
  std::vector<TensorToWrite> out;
  for (const std::string& name : ckpt.Names()) {
    if (name.rfind("depth", 0) != 0) continue;  // depth_linear.*, depthformer.*, depth_embeddings.*
    Result<TensorView> t = ckpt.Get(name);
    EXPECT_TRUE(t.ok());
    if (!t.ok()) continue;
    TensorToWrite w;
    w.name = name;
    w.dtype = t->dtype;
    w.shape.assign(t->shape.dim.begin(), t->shape.dim.begin() + t->shape.rank);
    w.data = t->data;
    w.size = t->bytes();
    out.push_back(w);
  }
  return out;
}

std::string ToLogitsName(int k) { return "depth_embeddings." + std::to_string(k) + ".to_logits.weight"; }
std::string EmbeddingName(int k) { return "depth_embeddings." + std::to_string(k) + ".embedding.weight"; }

void EraseTensor(std::vector<TensorToWrite>& ts, const std::string& name) {
  std::erase_if(ts, [&](const TensorToWrite& t) { return t.name == name; });
}

TensorToWrite* Find(std::vector<TensorToWrite>& ts, const std::string& name) {
  for (TensorToWrite& t : ts)
    if (t.name == name) return &t;
  return nullptr;
}

// Writes ts, loads the depthformer from it with the case's (edited) config,
// and returns the status; on success, also the greedy codes for the case's
// depth__in_hidden.npy.
Status WriteAndLoad(const TempDir& dir, const std::string& case_name, const std::vector<TensorToWrite>& ts,
                    std::vector<int32_t>* codes = nullptr, void (*edit)(nlohmann::json&) = nullptr) {
  const std::string path = dir.File("model.safetensors");
  const Status w = WriteSafetensors(path, ts);
  EXPECT_TRUE(w.ok()) << w.ToString();
  Status s;
  Loaded l = Load(path, case_name, &s, edit);
  if (s.ok() && codes) *codes = GreedyFrame(*l.model, InHidden(case_name), 1, nullptr);
  return s;
}

std::vector<int32_t> OracleCodes(const std::string& case_name) {
  std::vector<int32_t> out;
  for (int64_t v : LoadTrace(case_name + "/traces/depth__codes.npy").ToInt64())
    out.push_back(static_cast<int32_t>(v));
  return out;
}

TEST(DepthformerLoad, TiedToLogitsMayBeAbsentOrAnIdenticalCopy) {
  if (!testing::WeightsVariant().empty()) GTEST_SKIP() << "edits the safetensors snapshot";
  TempDir dir;
  {
    // lfm25_tiny stores the copies; drop them.
    Loaded tiny = LoadCase("lfm25_tiny");
    ASSERT_TRUE(tiny.ckpt->Has(ToLogitsName(0)));
    std::vector<TensorToWrite> ts = DepthTensors(*tiny.ckpt);
    for (int k = 0; k < 8; ++k) EraseTensor(ts, ToLogitsName(k));
    std::vector<int32_t> codes;
    const Status s = WriteAndLoad(dir, "lfm25_tiny", ts, &codes);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(codes, OracleCodes("lfm25_tiny"));
  }
  {
    // lfm25_small lacks them (as the released file does); add identical copies.
    Loaded small = LoadCase("lfm25_small");
    ASSERT_FALSE(small.ckpt->Has(ToLogitsName(0)));
    std::vector<TensorToWrite> ts = DepthTensors(*small.ckpt);
    for (int k = 0; k < 8; ++k) {
      TensorToWrite copy = *Find(ts, EmbeddingName(k));
      copy.name = ToLogitsName(k);
      ts.push_back(copy);
    }
    std::vector<int32_t> codes;
    const Status s = WriteAndLoad(dir, "lfm25_small", ts, &codes);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(codes, OracleCodes("lfm25_small"));

    // Untied (tie = false) reads the stored to_logits: same tables, same codes.
    std::vector<int32_t> untied;
    const Status u = WriteAndLoad(dir, "lfm25_small", ts, &untied,
                                  [](nlohmann::json& j) { j["depthformer"]["tie"] = false; });
    ASSERT_TRUE(u.ok()) << u.ToString();
    EXPECT_EQ(untied, OracleCodes("lfm25_small"));
  }
}

TEST(DepthformerLoad, ErrorsNameTheTensor) {
  if (!testing::WeightsVariant().empty()) GTEST_SKIP() << "edits the safetensors snapshot";
  TempDir dir;
  Loaded small = LoadCase("lfm25_small");
  const std::vector<TensorToWrite> base = DepthTensors(*small.ckpt);

  {  // A missing layer tensor.
    std::vector<TensorToWrite> ts = base;
    EraseTensor(ts, "depthformer.layers.1.feed_forward.w2.weight");
    const Status s = WriteAndLoad(dir, "lfm25_small", ts);
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
    EXPECT_NE(s.message().find("depthformer.layers.1.feed_forward.w2.weight"), std::string::npos)
        << s.message();
  }
  {  // A wrong shape: depth_linear.bias one element short.
    std::vector<TensorToWrite> ts = base;
    TensorToWrite* b = Find(ts, "depth_linear.bias");
    ASSERT_NE(b, nullptr);
    b->shape = {b->shape[0] - 1};
    b->size -= DTypeSize(b->dtype);
    const Status s = WriteAndLoad(dir, "lfm25_small", ts);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("depth_linear.bias"), std::string::npos) << s.message();
  }
  {  // A qkv_proj with 32 rows fewer than Q + 2·KV = 192.
    std::vector<TensorToWrite> ts = base;
    TensorToWrite* q = Find(ts, "depthformer.layers.0.operator.qkv_proj.weight");
    ASSERT_NE(q, nullptr);
    q->shape[0] -= 32;
    q->size = static_cast<size_t>(q->shape[0] * q->shape[1]) * DTypeSize(q->dtype);
    const Status s = WriteAndLoad(dir, "lfm25_small", ts);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("depthformer.layers.0.operator.qkv_proj.weight"), std::string::npos)
        << s.message();
  }
  {  // tie = false needs to_logits.
    const Status s = WriteAndLoad(dir, "lfm25_small", base, nullptr,
                                  [](nlohmann::json& j) { j["depthformer"]["tie"] = false; });
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
    EXPECT_NE(s.message().find(ToLogitsName(0)), std::string::npos) << s.message();
  }
  {  // A stored to_logits that differs from the tied embedding.
    std::vector<TensorToWrite> ts = base;
    TensorToWrite copy = *Find(ts, EmbeddingName(3));
    std::vector<uint8_t> bytes(static_cast<const uint8_t*>(copy.data),
                               static_cast<const uint8_t*>(copy.data) + copy.size);
    bytes[1] ^= 0x40;  // flip an exponent bit of element 0
    copy.name = ToLogitsName(3);
    copy.data = bytes.data();
    ts.push_back(copy);
    const Status s = WriteAndLoad(dir, "lfm25_small", ts);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(ToLogitsName(3)), std::string::npos) << s.message();
  }
  {  // Config errors name the key.
    const Status s = WriteAndLoad(dir, "lfm25_small", base, nullptr,
                                  [](nlohmann::json& j) { j["depthformer"].erase("dim"); });
    EXPECT_EQ(s.code(), StatusCode::kNotFound);
    EXPECT_NE(s.message().find("[depthformer] lacks the required key \"dim\""), std::string::npos)
        << s.message();
    const Status h = WriteAndLoad(dir, "lfm25_small", base, nullptr,
                                  [](nlohmann::json& j) { j["depthformer"]["heads"] = 24; });
    EXPECT_EQ(h.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(h.message().find("heads"), std::string::npos) << h.message();
  }
}

TEST(DepthformerRun, RejectsMismatchedSamplerAndTeam) {
  Loaded l = LoadCase("lfm25_tiny");
  ASSERT_TRUE(l.model);
  const std::vector<float> h = InHidden("lfm25_tiny");
  auto st = DepthformerScratch::Create(*l.model, 1, 1);
  ASSERT_TRUE(st.ok());
  std::vector<int32_t> codes(8);
  Rng rng(0);
  {
    auto small_sampler = Sampler::Create(SamplingParams::Greedy(), 2048);  // one short of 2049
    ASSERT_TRUE(small_sampler.ok());
    ThreadTeam team(1);
    EXPECT_FALSE(
        SampleAudioFrame(*l.model, *st, h.data(), *small_sampler, rng, codes.data(), team, nullptr).ok());
  }
  {
    auto sampler = Sampler::Create(SamplingParams::Greedy(), 2049);
    ThreadTeam team(2);  // the state was sized for one thread
    EXPECT_FALSE(SampleAudioFrame(*l.model, *st, h.data(), *sampler, rng, codes.data(), team, nullptr).ok());
  }
}

// ---------------------------------------------------------------------------

TEST(DepthformerAllocation, NoHeapAllocationPerFrame) {
  Loaded l = LoadCase("lfm25_tiny");
  ASSERT_TRUE(l.model);
  const std::vector<float> h = InHidden("lfm25_tiny");
  std::vector<int32_t> codes(8);
  for (int threads : {1, 2}) {
    for (const SamplingParams& p : {SamplingParams::Greedy(), SamplingParams::Lfm25TtsAudio()}) {
      ThreadTeam team(threads);
      auto st = DepthformerScratch::Create(*l.model, 1, threads);
      auto sampler = Sampler::Create(p, 2049);
      ASSERT_TRUE(st.ok() && sampler.ok());
      Rng rng(7);
      for (int frame = 0; frame < 4; ++frame) {
        const long before = testing::AllocationCount();
        const Status s =
            SampleAudioFrame(*l.model, *st, h.data(), *sampler, rng, codes.data(), team, nullptr);
        const long during = testing::AllocationCount() - before;
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(during, 0) << "frame " << frame << ", threads " << threads << ", top_k " << p.top_k;
      }
    }
  }
}

}  // namespace
}  // namespace lfmvox
