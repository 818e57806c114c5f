// The LFM3 depth decoder against the lfm3_tiny oracle (/work/shared/oracle/README.md, "LFM3-Audio speech
// output"), traces tests/data/lfm3_tiny/traces/:
//   depth__slots; depth__greedy__pass{p}__{want,in,layer{l}_out,final_norm,head_norm,logits},
//   depth__greedy__codes, depth__greedy__top2_gap; depth__sampled__{rng_seed,history,order,codes},
//   depth__sampled__pass{p}__{want,in,logits,logits_penalized}; frame_row__{codes,row,eos_row}.
// Tolerances are the oracle's measured ones (not derived): max|port − oracle| ≤ k·max|oracle| with
// k = 1e-5 for the stack (slots, in, layer outs, final_norm) and the logits (head_norm, logits,
// penalized), 1e-6 for the frame row (it is exact: bf16 rows summed in f32 in codebook order). Codes,
// the reveal order and the RNG's consumption are exact. Batching and thread count are exact (the MatMul
// contract). Also: end of audio, bad input, the sampling settings from config.json, no allocation per
// frame.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "io/json_config.h"
#include "io/safetensors.h"
#include "models/lfm3_audio/depth_decoder.h"
#include "models/lfm3_audio/lfm3_config.h"
#include "ops/matmul_kernels.h"
#include "ops/ops.h"
#include "tensor/dtype.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

using testing::CollectingSink;
using testing::Compare;
using testing::DataPath;
using testing::Diff;
using testing::LoadTrace;

constexpr double kStackTol = 1e-5;     // oracle README: depth/stack
constexpr double kLogitTol = 1e-5;     // oracle README: depth/logits
constexpr double kFrameRowTol = 1e-6;  // oracle README: frame_row
const char* const kTraces = "lfm3_tiny/traces/";

bool HaveData() { return std::filesystem::exists(DataPath("lfm3_tiny/model.safetensors")); }

std::vector<float> Trace(const std::string& name) { return LoadTrace(kTraces + name + ".npy").ToFloat(); }
std::vector<int64_t> TraceInt(const std::string& name) {
  return LoadTrace(kTraces + name + ".npy").ToInt64();
}

nlohmann::json Config() {
  Result<nlohmann::json> j = ReadJsonFile(DataPath("lfm3_tiny/config.json"));
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : nlohmann::json::object();
}

struct Loaded {
  std::unique_ptr<Checkpoint> ckpt;
  std::unique_ptr<Lfm3DepthDecoder> model;
};

// Loads the decoder from `ckpt` with config.json (optionally edited); the status in *status.
Loaded LoadFrom(Checkpoint ckpt, Status* status, const std::function<void(nlohmann::json&)>& edit = nullptr) {
  Loaded l;
  l.ckpt = std::make_unique<Checkpoint>(std::move(ckpt));
  nlohmann::json j = Config();
  if (edit) edit(j);
  Result<Lfm3Config> cfg = Lfm3Config::FromJson(j, "lfm3_tiny/config.json");
  if (!cfg.ok()) {
    *status = cfg.status();
    return l;
  }
  Result<Lfm3DepthDecoder> m = Lfm3DepthDecoder::Load(*l.ckpt, *cfg);
  *status = m.status();
  if (m.ok()) l.model = std::make_unique<Lfm3DepthDecoder>(std::move(m).value());
  return l;
}

Loaded LoadTiny() {
  Result<Checkpoint> ckpt = Checkpoint::Open(DataPath("lfm3_tiny/model.safetensors"));
  EXPECT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  if (!ckpt.ok()) return {};
  Status s;
  Loaded l = LoadFrom(std::move(ckpt).value(), &s);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return l;
}

Lfm3AudioSampling Greedy() {
  Lfm3AudioSampling s;
  s.temperature = 0;
  s.repetition_penalty = 1;
  s.fixed_order = true;
  return s;
}

// One frame for h with `sampling`, seed and history; the frame's state and the traces.
struct Frame {
  std::vector<int32_t> codes, order;
  bool eos = false;
  uint64_t rng_state = 0;
  CollectingSink sink;
};

std::unique_ptr<Frame> Decode(const Lfm3DepthDecoder& m, const std::vector<float>& h,
                              const Lfm3AudioSampling& s, uint64_t seed, const std::vector<int64_t>& history,
                              int threads, bool trace, bool all_rows = true) {
  auto f = std::make_unique<Frame>();
  Result<Lfm3DepthState> state = Lfm3DepthState::Create(m, s, seed);
  Result<Lfm3DepthScratch> scratch = Lfm3DepthScratch::Create(m, 1, threads);
  EXPECT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_TRUE(scratch.ok()) << scratch.status().ToString();
  if (!state.ok() || !scratch.ok()) return f;
  scratch->set_all_rows(all_rows);
  const size_t C = static_cast<size_t>(m.codebooks());
  for (size_t r = 0; r + C <= history.size(); r += C) {
    std::vector<int32_t> frame(history.begin() + static_cast<long>(r),
                               history.begin() + static_cast<long>(r + C));
    EXPECT_TRUE(state->PushHistory(frame).ok());
  }
  ThreadTeam team(threads);
  const Status st = DecodeFrame(m, h.data(), *state, *scratch, team, trace ? &f->sink : nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  f->codes.assign(state->codes().begin(), state->codes().end());
  f->order.assign(state->order().begin(), state->order().end());
  f->eos = state->end_of_audio();
  f->rng_state = state->rng().state();
  return f;
}

// Compares the port's traced `port_name` with the oracle trace `ref_name`; returns the relative error.
double Check(CollectingSink& sink, const std::string& port_name, const std::string& ref_name, double tol) {
  const std::vector<float> ref = Trace(ref_name);
  const std::vector<float>& port = sink.tensors[port_name];
  EXPECT_EQ(port.size(), ref.size()) << port_name << " vs " << ref_name;
  if (port.size() != ref.size()) return 1e30;
  const Diff d = Compare(port.data(), ref);
  EXPECT_LE(d.rel(), tol) << ref_name << ".npy: max abs " << d.max_abs << ", scale " << d.scale;
  if (std::getenv("LFMVOX_TEST_VERBOSE")) {
    std::printf("  %-40s max abs %.3g, %.3g of scale\n", ref_name.c_str(), d.max_abs, d.rel());
  }
  return d.rel();
}

TEST(Lfm3Depth, SlotsAndGreedyPassesMatchTheOracle) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  Loaded l = LoadTiny();
  ASSERT_TRUE(l.model);
  const Lfm3DepthDecoder& m = *l.model;
  // The oracle's configuration table: 12 × 2017, EOS 2016, width 128, passes of 4, text hidden 64.
  EXPECT_EQ(m.codebooks(), 12);
  EXPECT_EQ(m.codebook_size(), 2017);
  EXPECT_EQ(m.eos(), 2016);
  EXPECT_EQ(m.width(), 128);
  EXPECT_EQ(m.text_hidden(), 64);
  EXPECT_EQ(m.maskgit(), (std::vector<int>{4, 4, 4}));

  const std::vector<float> h = Trace("depth__h");
  ASSERT_EQ(h.size(), 64u);
  const uint64_t seed = 7;
  std::unique_ptr<Frame> f = Decode(m, h, Greedy(), seed, {}, 1, true);
  EXPECT_EQ(f->rng_state, seed) << "a greedy frame in fixed order must not draw random numbers";

  double worst = 0, worst_logit_abs = 0;
  worst = std::max(worst, Check(f->sink, "slots", "depth__slots", kStackTol));
  for (int p = 0; p < 3; ++p) {
    const std::string ps = "pass" + std::to_string(p) + "/",
                      ref = "depth__greedy__pass" + std::to_string(p) + "__";
    const std::vector<int64_t> want = TraceInt(ref + "want");
    ASSERT_EQ(want.size(), 4u);
    for (size_t r = 0; r < 4; ++r) EXPECT_EQ(f->order[4 * p + r], want[r]) << ref << "want " << r;
    worst = std::max(worst, Check(f->sink, ps + "in", ref + "in", kStackTol));
    for (int layer = 0; layer < 3; ++layer) {
      const std::string n = "layer" + std::to_string(layer) + "_out";
      worst = std::max(worst, Check(f->sink, ps + n, ref + n, kStackTol));
    }
    worst = std::max(worst, Check(f->sink, ps + "final_norm", ref + "final_norm", kStackTol));
    worst = std::max(worst, Check(f->sink, ps + "head_norm", ref + "head_norm", kLogitTol));
    worst = std::max(worst, Check(f->sink, ps + "logits", ref + "logits", kLogitTol));
    const Diff d = Compare(f->sink.tensors[ps + "logits"].data(), Trace(ref + "logits"));
    worst_logit_abs = std::max(worst_logit_abs, d.max_abs);
    // No penalty in the greedy set: the penalized row is the raw one.
    EXPECT_EQ(f->sink.tensors[ps + "logits_penalized"], f->sink.tensors[ps + "logits"]);
  }

  // depth__greedy__codes: exact, and our top-1/top-2 gaps against depth__greedy__top2_gap.
  const std::vector<int64_t> codes = TraceInt("depth__greedy__codes");
  ASSERT_EQ(codes.size(), 12u);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(f->codes[i], codes[i]) << "codebook " << i;
  EXPECT_FALSE(f->eos);
  const std::vector<float> gap = Trace("depth__greedy__top2_gap");
  double min_gap = 1e30;
  for (size_t p = 0; p < 3; ++p) {
    const std::vector<float>& lg = f->sink.tensors["pass" + std::to_string(p) + "/logits"];
    for (size_t r = 0; r < 4; ++r) {
      std::vector<float> row(lg.begin() + static_cast<long>(r * 2017),
                             lg.begin() + static_cast<long>((r + 1) * 2017));
      std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
      const double g = static_cast<double>(row[0]) - row[1];
      EXPECT_NEAR(g, gap[4 * p + r], 2 * worst_logit_abs + 1e-6) << "codebook " << 4 * p + r;
      min_gap = std::min(min_gap, g);
    }
  }
  EXPECT_GT(min_gap, 10 * worst_logit_abs) << "greedy decisions are too close to the logit error";
  std::printf(
      "[lfm3_tiny greedy] worst tensor error %.3g of scale; max logit error %.3g; min top-2 gap %.4f\n",
      worst, worst_logit_abs, min_gap);
  RecordProperty("worst_rel_error", std::to_string(worst));

  // Two threads: the same frame and every trace bit for bit.
  std::unique_ptr<Frame> f2 = Decode(m, h, Greedy(), seed, {}, 2, true);
  EXPECT_EQ(f2->codes, f->codes);
  for (const auto& [name, v] : f->sink.tensors) EXPECT_EQ(f2->sink.tensors[name], v) << name << ", 2 threads";
}

TEST(Lfm3Depth, SampledFrameMatchesTheOracle) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  Loaded l = LoadTiny();
  ASSERT_TRUE(l.model);
  const Lfm3DepthDecoder& m = *l.model;
  // The file carries no sampling section: LFM3-Audio's published defaults, the oracle's settings.
  Result<Lfm3AudioSampling> s = Lfm3AudioSampling::FromJson(Config(), "lfm3_tiny/config.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->temperature, 1.0f);
  EXPECT_EQ(s->top_k, 128);
  EXPECT_EQ(s->repetition_penalty, 1.1f);
  EXPECT_EQ(s->repetition_window, 4096);
  EXPECT_FALSE(s->fixed_order);

  const uint64_t seed = static_cast<uint64_t>(TraceInt("depth__sampled__rng_seed").at(0));
  const std::vector<int64_t> history = TraceInt("depth__sampled__history");  // [6, 12]
  ASSERT_EQ(history.size(), 72u);
  std::unique_ptr<Frame> f = Decode(m, Trace("depth__h"), *s, seed, history, 1, true);

  // depth__sampled__order: exact.
  const std::vector<int64_t> order = TraceInt("depth__sampled__order");
  ASSERT_EQ(order.size(), 12u);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(f->order[i], order[i]) << "order " << i;
  // 11 NextU64 for the shuffle, then one NextFloat (one NextU64) per codebook.
  Rng expect(seed);
  for (int i = 0; i < 11 + 12; ++i) expect.NextU64();
  EXPECT_EQ(f->rng_state, expect.state());

  double worst = 0;
  for (int p = 0; p < 3; ++p) {
    const std::string ps = "pass" + std::to_string(p) + "/",
                      ref = "depth__sampled__pass" + std::to_string(p) + "__";
    const std::vector<int64_t> want = TraceInt(ref + "want");
    for (size_t r = 0; r < 4; ++r) EXPECT_EQ(f->order[4 * p + r], want[r]) << ref << "want " << r;
    worst = std::max(worst, Check(f->sink, ps + "in", ref + "in", kStackTol));
    worst = std::max(worst, Check(f->sink, ps + "logits", ref + "logits", kLogitTol));
    worst = std::max(worst, Check(f->sink, ps + "logits_penalized", ref + "logits_penalized", kLogitTol));
    // The penalty changed something (the history shares codes with the frame's neighbourhood).
    EXPECT_NE(f->sink.tensors[ps + "logits_penalized"], f->sink.tensors[ps + "logits"]);
  }
  const std::vector<int64_t> codes = TraceInt("depth__sampled__codes");
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(f->codes[i], codes[i]) << "codebook " << i;
  EXPECT_FALSE(f->eos);
  std::printf("[lfm3_tiny sampled] worst tensor error %.3g of scale\n", worst);

  // Without the history the penalty does nothing, so the frame differs from the oracle's (the test
  // above depends on the history it was given).
  std::unique_ptr<Frame> bare = Decode(m, Trace("depth__h"), *s, seed, {}, 1, true);
  EXPECT_EQ(bare->order, f->order);
  EXPECT_EQ(bare->sink.tensors["pass0/logits_penalized"], bare->sink.tensors["pass0/logits"]);
}

// Greedy (T ≤ 0) in the random order draws only the shuffle's 11 NextU64; top-k 1 at T = 1 gives the same
// codes (one code kept) but, as the seed's draw, one NextFloat per codebook.
TEST(Lfm3Depth, RngConsumptionOfGreedyAndTopOne) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  Loaded l = LoadTiny();
  ASSERT_TRUE(l.model);
  const std::vector<float> h = Trace("depth__h");
  Lfm3AudioSampling greedy = Greedy(), top1;
  greedy.fixed_order = false;
  top1.top_k = 1;
  top1.repetition_penalty = 1;
  std::unique_ptr<Frame> g = Decode(*l.model, h, greedy, 45, {}, 1, false);
  std::unique_ptr<Frame> t = Decode(*l.model, h, top1, 45, {}, 1, false);
  EXPECT_EQ(g->order, t->order);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(g->order[i], TraceInt("depth__sampled__order")[i]) << i;
  EXPECT_EQ(g->codes, t->codes);
  Rng after_shuffle(45), after_draws(45);
  for (int i = 0; i < 11; ++i) after_shuffle.NextU64();
  for (int i = 0; i < 23; ++i) after_draws.NextU64();
  EXPECT_EQ(g->rng_state, after_shuffle.state());
  EXPECT_EQ(t->rng_state, after_draws.state());
}

TEST(Lfm3Depth, BatchedStreamsEqualEachAlone) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  Loaded l = LoadTiny();
  ASSERT_TRUE(l.model);
  const Lfm3DepthDecoder& m = *l.model;
  Lfm3AudioSampling sampled;  // defaults
  const std::vector<float> h0 = Trace("depth__h");
  std::vector<float> h1 = h0;
  for (size_t i = 0; i < h1.size(); ++i) h1[i] = -0.5f * h0[h0.size() - 1 - i];
  struct Stream {
    const std::vector<float>* h;
    Lfm3AudioSampling s;
    uint64_t seed;
  };
  const std::vector<Stream> streams = {{&h0, Greedy(), 1}, {&h1, sampled, 45}, {&h0, sampled, 3}};
  const int threads = 2;
  ThreadTeam team(threads);
  Result<Lfm3DepthScratch> scratch = Lfm3DepthScratch::Create(m, streams.size(), threads);
  ASSERT_TRUE(scratch.ok()) << scratch.status().ToString();
  std::vector<Lfm3DepthState> states;
  for (const Stream& st : streams) {
    Result<Lfm3DepthState> s = Lfm3DepthState::Create(m, st.s, st.seed);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    states.push_back(std::move(s).value());
  }
  // Three frames, each batched; the history grows with every frame.
  std::vector<std::vector<int32_t>> batched(streams.size());
  for (int frame = 0; frame < 3; ++frame) {
    std::vector<const float*> hs;
    std::vector<Lfm3DepthState*> ptrs;
    for (size_t b = 0; b < streams.size(); ++b) {
      hs.push_back(streams[b].h->data());
      ptrs.push_back(&states[b]);
    }
    ASSERT_TRUE(DecodeFrames(m, hs, ptrs, *scratch, team, nullptr).ok());
    for (size_t b = 0; b < streams.size(); ++b)
      batched[b].insert(batched[b].end(), states[b].codes().begin(), states[b].codes().end());
  }
  for (size_t b = 0; b < streams.size(); ++b) {
    Result<Lfm3DepthState> s = Lfm3DepthState::Create(m, streams[b].s, streams[b].seed);
    Result<Lfm3DepthScratch> one = Lfm3DepthScratch::Create(m, 1, 1);
    ASSERT_TRUE(s.ok() && one.ok());
    ThreadTeam solo(1);
    std::vector<int32_t> alone;
    for (int frame = 0; frame < 3; ++frame) {
      ASSERT_TRUE(DecodeFrame(m, streams[b].h->data(), *s, *one, solo, nullptr).ok());
      alone.insert(alone.end(), s->codes().begin(), s->codes().end());
    }
    EXPECT_EQ(batched[b], alone) << "stream " << b;
    EXPECT_EQ(s->history_frames(), streams[b].s.repetition_penalty != 1 ? 3u : 0u);
  }
}

// Only the revealed codebooks through the last layer (the default) gives the same head norms, logits and
// codes as every slot, bit for bit; its final_norm rows are the full run's rows of the wanted slots.
TEST(Lfm3Depth, KeepingOnlyTheWantedRowsChangesNoBit) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  Loaded l = LoadTiny();
  ASSERT_TRUE(l.model);
  const std::vector<float> h = Trace("depth__h");
  const std::vector<int64_t> history = TraceInt("depth__sampled__history");
  for (const Lfm3AudioSampling& s : {Greedy(), Lfm3AudioSampling{}}) {
    for (int threads : {1, 2}) {
      std::unique_ptr<Frame> full = Decode(*l.model, h, s, 45, history, threads, true, true);
      std::unique_ptr<Frame> kept = Decode(*l.model, h, s, 45, history, threads, true, false);
      EXPECT_EQ(kept->codes, full->codes);
      EXPECT_EQ(kept->order, full->order);
      EXPECT_EQ(kept->rng_state, full->rng_state);
      for (int p = 0; p < 3; ++p) {
        const std::string ps = "pass" + std::to_string(p) + "/";
        for (const char* t : {"in", "layer0_out", "layer1_out", "head_norm", "logits", "logits_penalized"}) {
          EXPECT_EQ(kept->sink.tensors[ps + t], full->sink.tensors[ps + t]) << ps << t;
        }
        // final_norm: 4 rows, the wanted slots ascending, equal to those rows of the full run.
        std::vector<int32_t> want(full->order.begin() + 4 * p, full->order.begin() + 4 * p + 4);
        std::sort(want.begin(), want.end());
        const std::vector<float>& kf = kept->sink.tensors[ps + "final_norm"];
        const std::vector<float>& ff = full->sink.tensors[ps + "final_norm"];
        ASSERT_EQ(kf.size(), 4u * 128);
        ASSERT_EQ(ff.size(), 12u * 128);
        for (size_t k = 0; k < 4; ++k) {
          const auto a = kf.begin() + static_cast<long>(k * 128);
          const auto b = ff.begin() + static_cast<long>(want[k] * 128);
          EXPECT_TRUE(std::equal(a, a + 128, b)) << ps << "final_norm row of codebook " << want[k];
        }
      }
    }
  }
}

// Matrices converted to Q8_0 at load: fewer bytes per frame, and a frame whose logits stay near the
// oracle's. The bound is this test's own measure (not the oracle's): Q8_0 rounds each weight to 1/254
// of its block's maximum, which moves these logits by about 3 % of their scale.
TEST(Lfm3Depth, Q8_0MatricesAtLoad) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  Result<Checkpoint> ckpt = Checkpoint::Open(DataPath("lfm3_tiny/model.safetensors"));
  ASSERT_TRUE(ckpt.ok());
  Result<Lfm3Config> cfg = Lfm3Config::FromJson(Config(), "lfm3_tiny/config.json");
  ASSERT_TRUE(cfg.ok());
  Result<Lfm3DepthDecoder> bf16 = Lfm3DepthDecoder::Load(*ckpt, *cfg);
  Result<Lfm3DepthDecoder> q8 = Lfm3DepthDecoder::Load(*ckpt, *cfg, WeightFormat::kQ8_0);
  ASSERT_TRUE(bf16.ok() && q8.ok()) << q8.status().ToString();
  EXPECT_LT(q8->weight_bytes(), bf16->weight_bytes() * 6 / 10);
  std::unique_ptr<Frame> f = Decode(*q8, Trace("depth__h"), Greedy(), 1, {}, 1, true);
  double worst = 0;
  for (int p = 0; p < 3; ++p) {
    const std::string n = "pass" + std::to_string(p) + "/logits";
    const Diff d =
        Compare(f->sink.tensors[n].data(), Trace("depth__greedy__pass" + std::to_string(p) + "__logits"));
    worst = std::max(worst, d.rel());
  }
  std::printf("[lfm3_tiny Q8_0] logits max error %.3g of scale\n", worst);
  EXPECT_LT(worst, 0.05);
  EXPECT_GT(worst, 0.0) << "the matrices were not converted";
}

// On a CPU with AMX the stack's BF16 matrices are repacked into AMX tiles at load (ops.h: X split into three
// bf16 parts, f32-accurate, not the stored layout's bits), so the oracle tests above run through them there.
// This loads the decoder a second time with AMX switched off (the stored layout, the f32 tiles) and asks
// for the same greedy codes and logits within the oracle's tolerance of each other.
TEST(Lfm3Depth, AmxTilesAgreeWithTheStoredLayout) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  if (!ops::PrefersTilesLayout(WeightFormat::kBF16)) GTEST_SKIP() << "no AMX here: the stored layout only";
  ops::internal::SetTilesAmxForTest(false);
  Loaded stored = LoadTiny();
  ops::internal::SetTilesAmxForTest(true);
  Loaded tiles = LoadTiny();
  ASSERT_TRUE(stored.model && tiles.model);
  const Linear& q_stored = stored.model->stack().layers()[0].attn.q_proj;
  const Linear& q_tiles = tiles.model->stack().layers()[0].attn.q_proj;
  ASSERT_EQ(q_stored.w.layout, WeightLayout::kBlocks);
  ASSERT_EQ(q_tiles.w.layout, WeightLayout::kTiles);
  std::unique_ptr<Frame> a = Decode(*stored.model, Trace("depth__h"), Greedy(), 1, {}, 2, true);
  std::unique_ptr<Frame> b = Decode(*tiles.model, Trace("depth__h"), Greedy(), 1, {}, 2, true);
  EXPECT_EQ(a->codes, b->codes);
  double worst = 0;
  for (int p = 0; p < 3; ++p) {
    const std::string n = "pass" + std::to_string(p) + "/logits";
    ASSERT_EQ(a->sink.tensors[n].size(), b->sink.tensors[n].size()) << n;
    const Diff d = Compare(b->sink.tensors[n].data(), a->sink.tensors[n]);
    worst = std::max(worst, d.rel());
  }
  std::printf("[lfm3_tiny AMX tiles] logits differ from the stored layout's by %.3g of scale\n", worst);
  EXPECT_LE(worst, kLogitTol);
}

TEST(Lfm3Depth, FrameRowsMatchTheOracle) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  Loaded l = LoadTiny();
  ASSERT_TRUE(l.model);
  const std::vector<int64_t> codes64 = TraceInt("frame_row__codes");
  const std::vector<int32_t> codes(codes64.begin(), codes64.end());
  ASSERT_EQ(codes.size(), 12u);
  std::vector<float> row(64), eos(64);
  ASSERT_TRUE(l.model->FrameRow(codes, row.data()).ok());
  l.model->EosRow(eos.data());
  const Diff d = Compare(row.data(), Trace("frame_row__row"));
  const Diff e = Compare(eos.data(), Trace("frame_row__eos_row"));
  EXPECT_LE(d.rel(), kFrameRowTol) << "frame_row__row: max abs " << d.max_abs;
  EXPECT_LE(e.rel(), kFrameRowTol) << "frame_row__eos_row: max abs " << e.max_abs;
  EXPECT_GT(d.scale, 0.1);
  std::printf("[lfm3_tiny frame_row] row max abs %.3g (scale %.3g), eos_row max abs %.3g (scale %.3g)\n",
              d.max_abs, d.scale, e.max_abs, e.scale);
  // Bad frames.
  EXPECT_FALSE(l.model->FrameRow({codes.data(), 11}, row.data()).ok());
  std::vector<int32_t> bad = codes;
  bad[3] = 2017;
  const Status s = l.model->FrameRow(bad, row.data());
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("codebook 3"), std::string::npos) << s.ToString();
}

// ---------------------------------------------------------------------------
// Checkpoints edited in memory: the depth decoder's tensors copied, changed, written to a temp file.

struct Tensors {
  std::vector<std::vector<uint8_t>> data;
  std::vector<TensorToWrite> list;
  TensorToWrite* Find(const std::string& name) {
    for (TensorToWrite& t : list)
      if (t.name == name) return &t;
    return nullptr;
  }
  void Erase(const std::string& name) {
    std::erase_if(list, [&](const TensorToWrite& t) { return t.name == name; });
  }
};

Tensors DepthTensors() {
  Tensors out;
  Result<Checkpoint> ckpt = Checkpoint::Open(DataPath("lfm3_tiny/model.safetensors"));
  EXPECT_TRUE(ckpt.ok());
  if (!ckpt.ok()) return out;
  std::vector<std::string> names;
  for (const std::string& n : ckpt->Names())
    if (n.rfind("depth_decoder.", 0) == 0 || n == "codebook_embedding.weight") names.push_back(n);
  out.data.reserve(names.size());
  for (const std::string& n : names) {
    Result<TensorView> t = ckpt->Get(n);
    const auto* p = static_cast<const uint8_t*>(t->data);
    std::vector<uint8_t>& d = out.data.emplace_back(p, p + t->bytes());
    TensorToWrite w;
    w.name = n;
    w.dtype = t->dtype;
    w.shape.assign(t->shape.dim.begin(), t->shape.dim.begin() + t->shape.rank);
    w.data = d.data();
    w.size = d.size();
    out.list.push_back(w);
  }
  return out;
}

Loaded WriteAndLoad(const Tensors& t, Status* status,
                    const std::function<void(nlohmann::json&)>& edit = nullptr) {
  const std::string path = testing::ScratchPath("lfm3_depth.safetensors");
  Status w = WriteSafetensors(path, t.list);
  EXPECT_TRUE(w.ok()) << w.ToString();
  Result<Checkpoint> ckpt = Checkpoint::Open(path);
  std::filesystem::remove(path);  // the mapping stays valid
  EXPECT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  if (!ckpt.ok()) return {};
  return LoadFrom(std::move(ckpt).value(), status, edit);
}

TEST(Lfm3Depth, EndOfAudioFrame) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  // Pass 0 (all masked) gives codebook 0 the logits of depth__greedy__pass0__logits row 0; scaling
  // E_0[EOS] by ±2^10 (exact in bf16) scales its logit alike, which makes EOS codebook 0's maximum.
  const std::vector<float> lg = Trace("depth__greedy__pass0__logits");
  const float eos_logit = lg[2016];
  ASSERT_NE(eos_logit, 0.0f);
  Tensors t = DepthTensors();
  TensorToWrite* e0 = t.Find("depth_decoder.depth_embeddings.0.embedding.weight");
  ASSERT_TRUE(e0 && e0->dtype == DType::kBF16);
  uint16_t* row = static_cast<uint16_t*>(const_cast<void*>(e0->data)) + 2016 * 128;
  const float scale = eos_logit > 0 ? 1024.0f : -1024.0f;
  for (int i = 0; i < 128; ++i) row[i] = F32ToBf16(Bf16ToF32(row[i]) * scale);
  Status s;
  Loaded l = WriteAndLoad(t, &s);
  ASSERT_TRUE(s.ok()) << s.ToString();

  Lfm3AudioSampling greedy = Greedy();
  greedy.repetition_penalty = 1.1f;  // a window, so that the history is kept
  greedy.repetition_window = 8;
  Result<Lfm3DepthState> state = Lfm3DepthState::Create(*l.model, greedy, 1);
  Result<Lfm3DepthScratch> scratch = Lfm3DepthScratch::Create(*l.model, 1, 1);
  ASSERT_TRUE(state.ok() && scratch.ok());
  ThreadTeam team(1);
  const std::vector<float> h = Trace("depth__h");
  ASSERT_TRUE(DecodeFrame(*l.model, h.data(), *state, *scratch, team, nullptr).ok());
  EXPECT_EQ(state->codes()[0], 2016);
  EXPECT_TRUE(state->end_of_audio());
  EXPECT_EQ(state->history_frames(), 0u) << "an end-of-audio frame does not enter the history";
  // Every codebook is still decoded: the others are codes of the frame, not EOS placeholders.
  for (size_t i = 1; i < 12; ++i) EXPECT_GE(state->codes()[i], 0);
  std::vector<float> fb(64), eos(64);
  ASSERT_TRUE(FeedbackRow(*l.model, *state, fb.data()).ok());
  l.model->EosRow(eos.data());
  EXPECT_EQ(fb, eos) << "an end-of-audio frame feeds back the all-EOS row";
}

TEST(Lfm3Depth, BadCheckpointsNameTheTensor) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  for (const char* name :
       {"depth_decoder.mask_embedding", "depth_decoder.depth_linear.bias",
        "depth_decoder.depth_embeddings.11.embedding_norm.weight", "codebook_embedding.weight",
        "depth_decoder.depth_embeddings.4.embedding.weight"}) {
    Tensors t = DepthTensors();
    t.Erase(name);
    Status s;
    WriteAndLoad(t, &s);
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << name << ": " << s.ToString();
    EXPECT_NE(s.message().find(name), std::string::npos) << s.ToString();
  }
  // Wrong shapes: a depth_linear for 11 codebooks, a codebook table of 2016 rows.
  {
    Tensors t = DepthTensors();
    TensorToWrite* w = t.Find("depth_decoder.depth_linear.weight");
    w->shape = {11 * 128, 64};
    w->size = 11 * 128 * 64 * 2;
    Status s;
    WriteAndLoad(t, &s);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("depth_decoder.depth_linear.weight"), std::string::npos) << s.ToString();
  }
  {
    Tensors t = DepthTensors();
    TensorToWrite* w = t.Find("depth_decoder.depth_embeddings.2.embedding.weight");
    w->shape = {2016, 128};
    w->size = 2016 * 128 * 2;
    Status s;
    WriteAndLoad(t, &s);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("depth_decoder.depth_embeddings.2.embedding.weight"), std::string::npos)
        << s.ToString();
  }
}

TEST(Lfm3Depth, SamplingSettingsComeFromTheFiles) {
  nlohmann::json j = nlohmann::json::object();
  j["generation"] = {{"audio_temperature", 0.4},
                     {"audio_top_k", nullptr},
                     {"audio_repetition_penalty", 1.2},
                     {"audio_repetition_window", 64}};
  Result<Lfm3AudioSampling> omni = Lfm3AudioSampling::FromJson(j, "config.json");
  ASSERT_TRUE(omni.ok()) << omni.status().ToString();
  EXPECT_EQ(omni->temperature, 0.4f);
  EXPECT_EQ(omni->top_k, 0);
  EXPECT_EQ(omni->repetition_penalty, 1.2f);
  EXPECT_EQ(omni->repetition_window, 64);
  EXPECT_FALSE(omni->fixed_order);

  j["generation"] = {{"audio_top_k", 32}, {"maskgit_order", "fixed"}};
  Result<Lfm3AudioSampling> partial = Lfm3AudioSampling::FromJson(j, "config.json");
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  EXPECT_EQ(partial->top_k, 32);
  EXPECT_EQ(partial->temperature, 1.0f);  // the default, not given
  EXPECT_TRUE(partial->fixed_order);

  for (const nlohmann::json& bad :
       {nlohmann::json{{"audio_top_k", -1}}, nlohmann::json{{"audio_temperature", "hot"}},
        nlohmann::json{{"maskgit_order", "confidence"}}, nlohmann::json{{"audio_repetition_window", 0}}}) {
    j["generation"] = bad;
    Result<Lfm3AudioSampling> r = Lfm3AudioSampling::FromJson(j, "config.json");
    EXPECT_FALSE(r.ok()) << bad.dump();
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("config.json"), std::string::npos) << r.status().ToString();
    }
  }
  // The section sits beside the rest of config.json: the model's own parser accepts the file with it.
  if (HaveData()) {
    nlohmann::json cfg = Config();
    cfg["generation"] = {{"audio_temperature", 0.4}, {"audio_top_k", nullptr}};
    EXPECT_TRUE(Lfm3Config::FromJson(cfg, "config.json").ok());
    Result<Lfm3AudioSampling> r = Lfm3AudioSampling::FromJson(cfg, "config.json");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->temperature, 0.4f);
    EXPECT_EQ(r->repetition_window, 4096);  // not given: LFM3-Audio's default
  }
  // A caller's override is validated when a state is made.
  Lfm3AudioSampling s;
  s.repetition_penalty = 0;
  EXPECT_FALSE(s.Validate().ok());
}

TEST(Lfm3Depth, BadCallsAreErrors) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  Loaded l = LoadTiny();
  ASSERT_TRUE(l.model);
  const Lfm3DepthDecoder& m = *l.model;
  Result<Lfm3DepthState> a = Lfm3DepthState::Create(m, {}, 1);
  Result<Lfm3DepthScratch> scratch = Lfm3DepthScratch::Create(m, 1, 1);
  ASSERT_TRUE(a.ok() && scratch.ok());
  ThreadTeam team(1), two(2);
  const std::vector<float> h = Trace("depth__h");
  std::vector<const float*> hs = {h.data(), h.data()};
  std::vector<Lfm3DepthState*> ss = {&*a, &*a};
  EXPECT_EQ(DecodeFrames(m, hs, ss, *scratch, team, nullptr).code(), StatusCode::kOutOfRange);  // batch > 1
  EXPECT_FALSE(DecodeFrames(m, {hs.data(), 1}, ss, *scratch, team, nullptr).ok());  // counts differ
  EXPECT_FALSE(DecodeFrame(m, h.data(), *a, *scratch, two, nullptr).ok());  // team larger than the scratch
  EXPECT_FALSE(DecodeFrame(m, nullptr, *a, *scratch, team, nullptr).ok());
  EXPECT_FALSE(a->PushHistory(std::vector<int32_t>(12, 2017)).ok());
  EXPECT_FALSE(a->PushHistory(std::vector<int32_t>(11, 0)).ok());
  Result<Lfm3DepthScratch> s0 = Lfm3DepthScratch::Create(m, 0, 1);
  EXPECT_FALSE(s0.ok());
  // A feedback row before any frame.
  std::vector<float> row(64);
  EXPECT_FALSE(FeedbackRow(m, *a, row.data()).ok());
  // Config edits: passes that do not cover the frame, an EOS outside the codebook.
  Tensors t = DepthTensors();
  Status s;
  WriteAndLoad(t, &s, [](nlohmann::json& j) { j["maskgit"] = {4, 4, 3}; });
  EXPECT_FALSE(s.ok());
  WriteAndLoad(t, &s, [](nlohmann::json& j) { j["audio_eos"] = 2017; });
  EXPECT_FALSE(s.ok());
}

TEST(Lfm3Depth, OneFrameAllocatesNothing) {
  if (!HaveData()) GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  Loaded l = LoadTiny();
  ASSERT_TRUE(l.model);
  const Lfm3DepthDecoder& m = *l.model;
  Result<Lfm3DepthState> a = Lfm3DepthState::Create(m, {}, 5);
  Result<Lfm3DepthState> b = Lfm3DepthState::Create(m, Greedy(), 6);
  Result<Lfm3DepthScratch> scratch = Lfm3DepthScratch::Create(m, 2, 2);
  ASSERT_TRUE(a.ok() && b.ok() && scratch.ok());
  ThreadTeam team(2);
  const std::vector<float> h = Trace("depth__h");
  const std::vector<const float*> hs = {h.data(), h.data()};
  const std::vector<Lfm3DepthState*> ss = {&*a, &*b};
  std::vector<float> row(64);
  ASSERT_TRUE(DecodeFrames(m, hs, ss, *scratch, team, nullptr).ok());  // warm-up
  const long before = testing::AllocationCount();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(DecodeFrames(m, hs, ss, *scratch, team, nullptr).ok());
    ASSERT_TRUE(FeedbackRow(m, *a, row.data()).ok());
  }
  EXPECT_EQ(testing::AllocationCount() - before, 0);
  EXPECT_EQ(a->history_frames(), 6u);
}

}  // namespace
}  // namespace lfmvox
