// Parity of the LFM2.5 detokenizer with the oracle traces
// tests/data/lfm25_detok/traces/detok__T{1,3,7,45}__*.npy and detok__turns__*,
// streaming == batch, A→B→A, several streams in one StepStreams pass == each
// alone (bit for bit), and error handling. Tolerances are measured by the
// oracle (not derived), its README's (max|port − oracle| ≤ k·max|oracle|): k = 5e-5 for the stack and the
// head, 1e-4 for the inverse-STFT frames and PCM (about 10× the observed
// float32-vs-float64 spread of each group).
#include "models/lfm25_audio/detokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "model_files.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

using testing::CollectingSink;
using testing::Compare;
using testing::DataPath;
using testing::Diff;
using testing::LoadTrace;
using testing::SnrDb;

constexpr double kStackTol = 5e-5;
constexpr double kPcmTol = 1e-4;

const Lfm25Detokenizer& Model() {
  static std::unique_ptr<Lfm25Detokenizer> m = [] {
    auto r = Lfm25Detokenizer::Load(testing::DetokenizerDir("lfm25_detok"));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }();
  return *m;
}

// The trace holds codes as [8, T] (codebook-major); sessions take [T, 8].
std::vector<int32_t> FrameMajor(const NpyArray& a) {
  const size_t cb = static_cast<size_t>(a.shape[0]), t = static_cast<size_t>(a.shape[1]);
  std::vector<int64_t> v = a.ToInt64();
  std::vector<int32_t> out(cb * t);
  for (size_t k = 0; k < cb; ++k)
    for (size_t f = 0; f < t; ++f) out[f * cb + k] = static_cast<int32_t>(v[k * t + f]);
  return out;
}

// Decodes codes with frames_per_call frames per Decode call, then flushes.
std::vector<float> DecodeAll(Lfm25DetokenizerSession& s, const std::vector<int32_t>& codes,
                             size_t frames_per_call, ThreadTeam& team, TraceSink* sink = nullptr) {
  const size_t cb = 8, frames = codes.size() / cb, spf = 1920;
  std::vector<float> pcm(frames * spf + s.tail_samples());
  size_t n = 0;
  for (size_t f = 0; f < frames; f += frames_per_call) {
    const size_t k = std::min(frames_per_call, frames - f);
    Result<size_t> w = s.Step({codes.data() + f * cb, k * cb}, {pcm.data() + n, k * spf}, team, sink);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (!w.ok()) return {};
    n += *w;
  }
  Result<size_t> tail = s.Flush({pcm.data() + n, pcm.size() - n});
  EXPECT_TRUE(tail.ok());
  n += tail.ok() ? *tail : 0;
  pcm.resize(n);
  return pcm;
}

class DetokenizerTrace : public ::testing::TestWithParam<int> {};

TEST_P(DetokenizerTrace, MatchesEveryBoundary) {
  const int T = GetParam();
  const std::string pre = "lfm25_detok/traces/detok__T" + std::to_string(T) + "__";
  const std::vector<int32_t> codes = FrameMajor(LoadTrace(pre + "codes.npy"));
  ASSERT_EQ(codes.size(), static_cast<size_t>(8 * T));

  ThreadTeam team(1);
  auto s = Lfm25DetokenizerSession::Create(Model(), static_cast<size_t>(T), 1);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  CollectingSink sink;
  const std::vector<float> pcm = DecodeAll(**s, codes, static_cast<size_t>(T), team, &sink);

  auto check = [&](const std::string& trace, const std::string& name, double tol) {
    const std::string path = pre + trace + ".npy";
    if (!std::filesystem::exists(DataPath(path))) return;  // upsampled etc. not stored for T = 45
    const std::vector<float> ref = LoadTrace(path).ToFloat();
    const std::vector<float>& port = sink.tensors[name];
    ASSERT_EQ(port.size(), ref.size()) << trace;
    const Diff d = Compare(port.data(), ref);
    EXPECT_LE(d.rel(), tol) << trace << ": max abs " << d.max_abs << " scale " << d.scale;
    RecordProperty(trace, std::to_string(d.rel()));
    if (std::getenv("LFMVOX_TEST_VERBOSE"))
      std::printf("  %-14s max abs %.3g, %.3g of scale\n", trace.c_str(), d.max_abs, d.rel());
  };
  check("fused_emb", "fused_emb", kStackTol);
  check("upsampled", "upsampled", kStackTol);
  for (int i = 0; i < 8; ++i)
    check("layer" + std::to_string(i) + "_out", "layer" + std::to_string(i) + "_out", kStackTol);
  check("final_norm", "final_norm", kStackTol);
  check("lin_out", "lin_out", kStackTol);

  // log_magnitude / angle are the two halves of lin_out, transposed [641, 6T].
  const std::vector<float>& lin = sink.tensors["lin_out"];
  for (const char* half : {"log_magnitude", "angle"}) {
    const std::string path = pre + half + ".npy";
    if (!std::filesystem::exists(DataPath(path))) continue;
    const std::vector<float> ref = LoadTrace(path).ToFloat();
    const size_t N = 6 * static_cast<size_t>(T), off = std::string(half) == "angle" ? 641 : 0;
    std::vector<float> port(641 * N);
    for (size_t b = 0; b < 641; ++b)
      for (size_t r = 0; r < N; ++r) port[b * N + r] = lin[r * 1282 + off + b];
    const Diff d = Compare(port.data(), ref);
    EXPECT_LE(d.rel(), kStackTol) << half;
  }

  const std::vector<float> ref = LoadTrace(pre + "pcm.npy").ToFloat();
  ASSERT_EQ(pcm.size(), ref.size());
  ASSERT_EQ(pcm.size(), 1920u * static_cast<size_t>(T));
  const Diff d = Compare(pcm.data(), ref);
  EXPECT_LE(d.rel(), kPcmTol) << "pcm max abs " << d.max_abs << " scale " << d.scale;
  const double snr = SnrDb(pcm.data(), ref, 0, ref.size());
  const double head = SnrDb(pcm.data(), ref, 0, 1920),
               tail = SnrDb(pcm.data(), ref, ref.size() - 1920, ref.size());
  EXPECT_GE(snr, 100.0);
  EXPECT_GE(head, 100.0);
  EXPECT_GE(tail, 100.0);
  std::printf("T=%d pcm: max abs %.3g (%.3g of scale), SNR %.1f dB (first 1920: %.1f, last 1920: %.1f)\n", T,
              d.max_abs, d.rel(), snr, head, tail);
}

INSTANTIATE_TEST_SUITE_P(AllLengths, DetokenizerTrace, ::testing::Values(1, 3, 7, 45));

// One frame per call, then Flush, equals one call for all frames, bit for bit,
// for one and two threads; the total is 1920 samples per frame.
TEST(Detokenizer, StreamingEqualsBatchBitForBit) {
  const std::vector<int32_t> codes = FrameMajor(LoadTrace("lfm25_detok/traces/detok__T45__codes.npy"));
  ThreadTeam one(1), two(2);
  auto batch = Lfm25DetokenizerSession::Create(Model(), 45, 2);
  auto stream = Lfm25DetokenizerSession::Create(Model(), 1, 2);
  auto chunks = Lfm25DetokenizerSession::Create(Model(), 7, 2);
  ASSERT_TRUE(batch.ok() && stream.ok() && chunks.ok());
  const std::vector<float> a = DecodeAll(**batch, codes, 45, one);
  const std::vector<float> b = DecodeAll(**stream, codes, 1, two);
  const std::vector<float> c = DecodeAll(**chunks, codes, 5, one);  // pieces of 5 frames, 7 per pass
  ASSERT_EQ(a.size(), 45u * 1920u);
  ASSERT_EQ(b.size(), a.size());
  ASSERT_EQ(c.size(), a.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0);
}

// Each frame emits 1920 samples except the first (1920 − 480); Flush the last 480.
TEST(Detokenizer, ChunkSizes) {
  const std::vector<int32_t> codes = FrameMajor(LoadTrace("lfm25_detok/traces/detok__T3__codes.npy"));
  ThreadTeam team(1);
  auto s = Lfm25DetokenizerSession::Create(Model(), 1, 1);
  ASSERT_TRUE(s.ok());
  std::vector<float> out(1920);
  std::vector<size_t> sizes;
  for (size_t f = 0; f < 3; ++f) {
    Result<size_t> w = (*s)->Step({codes.data() + 8 * f, 8}, out, team);
    ASSERT_TRUE(w.ok());
    sizes.push_back(*w);
  }
  Result<size_t> tail = (*s)->Flush(out);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(sizes, (std::vector<size_t>{1440, 1920, 1920}));
  EXPECT_EQ(*tail, 480u);
}

// detok__turns: A, B, A as separate streams of one session (Reset between).
// Both A decodings are identical bit for bit and match the trace.
TEST(Detokenizer, TurnsAThenBThenA) {
  const std::vector<int32_t> a = FrameMajor(LoadTrace("lfm25_detok/traces/detok__turns__codes_A.npy"));
  const std::vector<int32_t> b = FrameMajor(LoadTrace("lfm25_detok/traces/detok__turns__codes_B.npy"));
  ThreadTeam team(1);
  auto s = Lfm25DetokenizerSession::Create(Model(), 1, 1);
  ASSERT_TRUE(s.ok());
  const std::vector<float> a1 = DecodeAll(**s, a, 1, team);
  (*s)->Reset();
  const std::vector<float> pb = DecodeAll(**s, b, 1, team);
  (*s)->Reset();
  const std::vector<float> a2 = DecodeAll(**s, a, 1, team);
  ASSERT_EQ(a1.size(), 9600u);
  ASSERT_EQ(a2.size(), 9600u);
  ASSERT_EQ(pb.size(), 7680u);
  EXPECT_EQ(std::memcmp(a1.data(), a2.data(), a1.size() * 4), 0);
  for (auto [pcm, name] : {std::pair{&a1, "pcm_A1"}, {&pb, "pcm_B"}, {&a2, "pcm_A2"}}) {
    const std::vector<float> ref =
        LoadTrace(std::string("lfm25_detok/traces/detok__turns__") + name + ".npy").ToFloat();
    const Diff d = Compare(pcm->data(), ref);
    EXPECT_LE(d.rel(), kPcmTol) << name;
    EXPECT_GE(SnrDb(pcm->data(), ref, 0, ref.size()), 100.0) << name;
  }
}

// The frames of `codes` rotated by `shift` frames: a different, still valid code sequence.
std::vector<int32_t> Rotated(const std::vector<int32_t>& codes, size_t shift) {
  std::vector<int32_t> r(codes.size());
  const size_t frames = codes.size() / 8;
  for (size_t f = 0; f < frames; ++f)
    std::copy_n(codes.data() + ((f + shift) % frames) * 8, 8, r.data() + f * 8);
  return r;
}

// Four streams on one scratch, one StepStreams call per tick over the oracle codes
// detok__T45__codes and detok__T7__codes and rotated copies: stream 0 from tick 0, stream 1 joins
// at tick 3, flushes after its 7 frames and restarts the same state with new codes, stream 2 joins
// at tick 5 and takes two frames per tick, stream 3 joins at tick 20. Each stream's PCM (every
// segment, tail included) equals that segment decoded alone by its own session, bit for bit.
TEST(Detokenizer, StepStreamsEqualsEachStreamAlone) {
  const std::vector<int32_t> t45 = FrameMajor(LoadTrace("lfm25_detok/traces/detok__T45__codes.npy"));
  const std::vector<int32_t> t7 = FrameMajor(LoadTrace("lfm25_detok/traces/detok__T7__codes.npy"));
  struct Stream {
    size_t start;                                // tick it joins
    size_t per_tick;                             // frames it takes per tick
    std::vector<std::vector<int32_t>> segments;  // code sequences, flushed after each
    std::vector<std::vector<float>> pcm;         // what StepStreams produced, per segment
    size_t segment = 0, frame = 0;
  };
  std::vector<Stream> streams = {
      {0, 1, {t45}, {}},
      {3, 1, {t7, Rotated(t45, 20)}, {}},
      {5, 2, {Rotated(t45, 11)}, {}},
      {20, 1, {Rotated(t7, 3)}, {}},
  };
  const Lfm25Detokenizer& m = Model();
  ThreadTeam team(2);
  auto scratch = Lfm25DetokenizerScratch::Create(m, 2, streams.size(), 2);
  ASSERT_TRUE(scratch.ok()) << scratch.status().ToString();
  std::vector<Lfm25DetokenizerState> states;
  for (size_t i = 0; i < streams.size(); ++i) {
    auto st = Lfm25DetokenizerState::Create(m, 2);
    ASSERT_TRUE(st.ok());
    states.push_back(std::move(st).value());
    streams[i].pcm.resize(streams[i].segments.size());
  }
  std::vector<std::vector<float>> out(streams.size(), std::vector<float>(2 * 1920));
  size_t max_batch = 0;
  for (size_t tick = 0;; ++tick) {
    std::vector<Lfm25DetokenizerRequest> requests;
    std::vector<size_t> who;
    for (size_t i = 0; i < streams.size(); ++i) {
      Stream& s = streams[i];
      if (tick < s.start || s.segment == s.segments.size()) continue;
      const std::vector<int32_t>& codes = s.segments[s.segment];
      const size_t n = std::min(s.per_tick, codes.size() / 8 - s.frame);
      requests.push_back({&states[i], {codes.data() + s.frame * 8, n * 8}, out[i], 0});
      who.push_back(i);
    }
    if (requests.empty()) break;
    max_batch = std::max(max_batch, requests.size());
    const Status st = StepStreams(m, requests, *scratch, team);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (size_t r = 0; r < requests.size(); ++r) {
      Stream& s = streams[who[r]];
      std::vector<float>& pcm = s.pcm[s.segment];
      pcm.insert(pcm.end(), out[who[r]].begin(), out[who[r]].begin() + requests[r].written);
      s.frame += requests[r].codes.size() / 8;
      if (s.frame == s.segments[s.segment].size() / 8) {  // end of this segment: flush, maybe restart
        std::vector<float> tail(m.tail_samples());
        Result<size_t> n = Flush(m, states[who[r]], tail);
        ASSERT_TRUE(n.ok());
        EXPECT_EQ(states[who[r]].frames(), 0u);
        pcm.insert(pcm.end(), tail.begin(), tail.begin() + *n);
        ++s.segment;
        s.frame = 0;
      }
    }
  }
  EXPECT_EQ(max_batch, 4u);

  ThreadTeam one(1);
  for (size_t i = 0; i < streams.size(); ++i) {
    for (size_t g = 0; g < streams[i].segments.size(); ++g) {
      auto alone = Lfm25DetokenizerSession::Create(m, 1, 1);
      ASSERT_TRUE(alone.ok());
      const std::vector<float> want = DecodeAll(**alone, streams[i].segments[g], 1, one);
      const std::vector<float>& got = streams[i].pcm[g];
      ASSERT_EQ(got.size(), streams[i].segments[g].size() / 8 * 1920) << "stream " << i << " segment " << g;
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
          << "stream " << i << " segment " << g;
    }
  }
  // The first stream is also the oracle's detok__T45__pcm.
  const std::vector<float> ref = LoadTrace("lfm25_detok/traces/detok__T45__pcm.npy").ToFloat();
  ASSERT_EQ(streams[0].pcm[0].size(), ref.size());
  EXPECT_LE(Compare(streams[0].pcm[0].data(), ref).rel(), kPcmTol);
}

// StepStreams validates every request before it changes any stream.
TEST(Detokenizer, StepStreamsRejectsWithoutSideEffects) {
  const Lfm25Detokenizer& m = Model();
  ThreadTeam team(1), three(3);
  auto scratch = Lfm25DetokenizerScratch::Create(m, 1, 2, 1);
  auto a = Lfm25DetokenizerState::Create(m, 1);
  auto b = Lfm25DetokenizerState::Create(m, 1);
  auto c = Lfm25DetokenizerState::Create(m, 1);
  auto wide = Lfm25DetokenizerState::Create(m, 4);  // rings for 4 frames per call: too long for the scratch
  ASSERT_TRUE(scratch.ok() && a.ok() && b.ok() && c.ok() && wide.ok());
  std::vector<int32_t> good(8, 5), bad(8, 5);
  bad[6] = 4096;
  std::vector<float> pa(1920), pb(1920), pc(1920);
  auto run = [&](std::vector<Lfm25DetokenizerRequest> r, ThreadTeam& t) {
    return StepStreams(m, r, *scratch, t);
  };
  EXPECT_FALSE(run({{&*a, good, pa}, {&*b, bad, pb}}, team).ok());   // bad code in the second
  EXPECT_FALSE(run({{&*a, good, pa}, {&*a, good, pb}}, team).ok());  // a state twice
  EXPECT_FALSE(run({{&*a, good, pa}, {&*b, good, pb}, {&*c, good, pc}}, team).ok());  // > max_streams
  EXPECT_FALSE(run({{&*a, good, pa}, {&*wide, good, pb}}, team).ok());                // rings > scratch
  EXPECT_FALSE(run({{&*a, good, pa}, {&*b, good, {pb.data(), 100}}}, team).ok());     // no room
  EXPECT_FALSE(run({{&*a, good, pa}}, three).ok());                                   // team > scratch
  EXPECT_EQ(a->frames(), 0u);
  EXPECT_EQ(b->frames(), 0u);
  // Then the same states run normally, and an empty request is skipped.
  std::vector<Lfm25DetokenizerRequest> ok = {{&*a, good, pa}, {&*b, {}, pb}};
  ASSERT_TRUE(StepStreams(m, ok, *scratch, team).ok());
  EXPECT_EQ(ok[0].written, 1440u);
  EXPECT_EQ(ok[1].written, 0u);
  EXPECT_EQ(a->frames(), 1u);
  EXPECT_EQ(b->frames(), 0u);
  Reset(*a);
  EXPECT_EQ(a->frames(), 0u);
}

TEST(Detokenizer, RejectsBadCodesWithoutSideEffects) {
  ThreadTeam team(1);
  auto s = Lfm25DetokenizerSession::Create(Model(), 2, 1);
  ASSERT_TRUE(s.ok());
  std::vector<float> out(4 * 1920);
  std::vector<int32_t> frame(8, 5);
  frame[3] = 2048;
  Result<size_t> r = (*s)->Step(frame, out, team);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("codebook 3"), std::string::npos) << r.status().message();
  frame[3] = -1;
  EXPECT_FALSE((*s)->Step(frame, out, team).ok());
  EXPECT_FALSE((*s)->Step(std::vector<int32_t>(7, 0), out, team).ok());                 // not a whole frame
  EXPECT_FALSE((*s)->Step(std::vector<int32_t>(16, 0), {out.data(), 100}, team).ok());  // no room
  EXPECT_EQ((*s)->frames_decoded(), 0u);
}

// A copy of the oracle checkpoint with one tensor changed.
std::string WriteVariant(const std::string& name, const std::string& drop, const std::string& reshape) {
  const std::string dir = testing::ScratchPath("detok_" + name);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(DataPath("lfm25_detok/config.json"), dir + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto ck = Checkpoint::Open(DataPath("lfm25_detok/model.safetensors"));
  EXPECT_TRUE(ck.ok());
  std::vector<TensorToWrite> ts;
  for (const std::string& n : ck->Names()) {
    if (n == drop) continue;
    TensorView v = *ck->Get(n);
    TensorToWrite t{n, v.dtype, std::vector<int64_t>(v.shape.dim.begin(), v.shape.dim.begin() + v.shape.rank),
                    v.data, v.bytes()};
    if (n == reshape) t.shape = {v.shape[1], v.shape[0]};  // same bytes, transposed shape
    ts.push_back(t);
  }
  EXPECT_TRUE(WriteSafetensors(dir + "/model.safetensors", ts).ok());
  return dir;
}

TEST(Detokenizer, LoadErrorsNameTheProblem) {
  if (!testing::WeightsVariant().empty()) GTEST_SKIP() << "edits the safetensors snapshot";
  auto missing = Lfm25Detokenizer::Load(WriteVariant("missing", "lfm.layers.2.self_attn.k_proj.weight", ""));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("lfm.layers.2.self_attn.k_proj.weight"), std::string::npos)
      << missing.status().message();
  auto shaped = Lfm25Detokenizer::Load(WriteVariant("shaped", "", "lfm.layers.0.conv.in_proj.weight"));
  ASSERT_FALSE(shaped.ok());
  EXPECT_NE(shaped.status().message().find("[512, 1536]"), std::string::npos) << shaped.status().message();
  EXPECT_FALSE(Lfm25Detokenizer::Load(testing::ScratchPath("no_such_dir")).ok());

  // A truncated file and a config with impossible values.
  const std::string dir = testing::ScratchPath("detok_truncated");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(DataPath("lfm25_detok/config.json"), dir + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  {
    std::ifstream in(DataPath("lfm25_detok/model.safetensors"), std::ios::binary);
    std::vector<char> head(1 << 20);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(dir + "/model.safetensors", std::ios::binary).write(head.data(), in.gcount());
  }
  auto truncated = Lfm25Detokenizer::Load(dir);
  EXPECT_FALSE(truncated.ok());
  std::ofstream(dir + "/config.json")
      << R"({"hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 3,
      "layer_types": ["conv", "conv"]})";
  auto bad_heads = Lfm25Detokenizer::Load(dir);
  ASSERT_FALSE(bad_heads.ok());
  EXPECT_NE(bad_heads.status().message().find("does not divide"), std::string::npos)
      << bad_heads.status().message();
  std::ofstream(dir + "/config.json")
      << R"({"hidden_size": 512, "num_hidden_layers": 1, "num_attention_heads": 16,
      "layer_types": ["mamba"]})";
  auto bad_kind = Lfm25Detokenizer::Load(dir);
  ASSERT_FALSE(bad_kind.ok());
  EXPECT_NE(bad_kind.status().message().find("mamba"), std::string::npos);
}

// A window the config allows (max_position_embeddings raised with it) but whose K/V caches exceed the memory
// budget is refused before anything is allocated, saying how much and why.
TEST(Detokenizer, CachesBeyondTheMemoryBudgetAreRefused) {
  if (!testing::WeightsVariant().empty()) GTEST_SKIP() << "edits the safetensors snapshot";
  const std::string dir = testing::ScratchPath("detok_budget");
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/model.safetensors");
  std::filesystem::create_symlink(DataPath("lfm25_detok/model.safetensors"), dir + "/model.safetensors");
  std::string config;
  {
    std::ifstream in(DataPath("lfm25_detok/config.json"));
    config.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"\"sliding_window\": 30", "\"sliding_window\": 8000000"},
        {"\"max_position_embeddings\": 128000", "\"max_position_embeddings\": 8000000"}}) {
    const size_t at = config.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    config.replace(at, from.size(), to);
  }
  std::ofstream(dir + "/config.json") << config;
  ::setenv("LFMVOX_MEMORY_LIMIT", "1G", 1);
  auto model = Lfm25Detokenizer::Load(dir);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto state = Lfm25DetokenizerState::Create(**model, 1);
  ::unsetenv("LFMVOX_MEMORY_LIMIT");
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), StatusCode::kOutOfRange);
  const std::string& m = state.status().message();
  EXPECT_NE(m.find("K/V caches"), std::string::npos) << m;
  EXPECT_NE(m.find("45.78 GiB"), std::string::npos) << m;  // 3 layers x 2 x (8e6 + 5) x 256 floats
  EXPECT_NE(m.find("LFMVOX_MEMORY_LIMIT"), std::string::npos) << m;
}

}  // namespace
}  // namespace lfmvox
