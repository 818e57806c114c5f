// The LiquidCodec decoder against the lfm3_tiny oracle traces (tests/data/lfm3_tiny/traces/codec__*;
// oracle README "LFM3-Audio speech output"): every boundary for 1, 4 and 45 frames, the A→B→A turns,
// streaming == batch bit for bit (several splits, tail and flush included), several streams in one
// StepStreams pass == each alone, no heap allocation per frame, and error handling.
// Tolerances are model parity tolerances measured by the oracle (not derived): max|port − oracle| ≤
// k·max|oracle| with its README's k per group: codec/lfm and codec/head 5e-5, codec/istft_frames and
// codec/pcm 1e-4 (the oracle's spectrum-to-PCM runs in f64, ours in f32; its README says an f32 port
// should sit inside 1e-4). Streaming, batching and thread-count comparisons are exact.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "alloc_counter.h"
#include "dsp/istft.h"
#include "io/safetensors.h"
#include "models/lfm3_audio/codec.h"
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

constexpr double kLfmTol = 5e-5;     // codec/lfm: fsq_latents … final_norm
constexpr double kHeadTol = 5e-5;    // codec/head: lin_out, log_magnitude, phase
constexpr double kFramesTol = 1e-4;  // codec/istft_frames: ifft_windowed
constexpr double kPcmTol = 1e-4;     // codec/pcm: ola, envelope, pcm, turns
constexpr size_t kCb = 12, kSpf = 1920;

const Lfm3Codec& Model() {
  static std::unique_ptr<Lfm3Codec> m = [] {
    auto r = Lfm3Codec::Load(DataPath("lfm3_tiny"));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }();
  return *m;
}

std::vector<int32_t> Codes(const std::string& trace) {
  std::vector<int64_t> v = LoadTrace(trace).ToInt64();
  return std::vector<int32_t>(v.begin(), v.end());
}

// Decodes codes in calls of frames_per_call frames, then flushes.
std::vector<float> DecodeAll(Lfm3CodecSession& s, const std::vector<int32_t>& codes, size_t frames_per_call,
                             ThreadTeam& team, TraceSink* sink = nullptr) {
  const size_t frames = codes.size() / kCb;
  std::vector<float> pcm(frames * kSpf + s.tail_samples());
  size_t n = 0;
  for (size_t f = 0; f < frames; f += frames_per_call) {
    const size_t k = std::min(frames_per_call, frames - f);
    Result<size_t> w = s.Step({codes.data() + f * kCb, k * kCb}, {pcm.data() + n, k * kSpf}, team, sink);
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

void Check(const std::string& trace, const float* port, size_t n, double tol) {
  const std::vector<float> ref = LoadTrace(trace).ToFloat();
  ASSERT_EQ(n, ref.size()) << trace;
  const Diff d = Compare(port, ref);
  EXPECT_LE(d.rel(), tol) << trace << ": max abs " << d.max_abs << " scale " << d.scale;
  std::printf("  %-40s max abs %.3g, %.3g of scale (k = %g)\n", trace.c_str(), d.max_abs, d.rel(), tol);
}

class Lfm3CodecTrace : public ::testing::TestWithParam<int> {};

// codec__T{nf}__*: every stored boundary, decoded in one pass of nf frames.
TEST_P(Lfm3CodecTrace, MatchesEveryBoundary) {
  const int T = GetParam();
  const std::string pre = "lfm3_tiny/traces/codec__T" + std::to_string(T) + "__";
  const std::vector<int32_t> codes = Codes(pre + "codes.npy");
  ASSERT_EQ(codes.size(), kCb * static_cast<size_t>(T));
  ThreadTeam team(1);
  auto s = Lfm3CodecSession::Create(Model(), static_cast<size_t>(T), 1);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  CollectingSink sink;
  const std::vector<float> pcm = DecodeAll(**s, codes, static_cast<size_t>(T), team, &sink);

  std::vector<std::string> lfm = {"fsq_latents", "project_out", "from_quantizer", "stacked"};
  for (int i = 0; i < 8; ++i) lfm.push_back("layer" + std::to_string(i) + "_out");
  lfm.push_back("final_norm");
  for (const std::string& name : lfm) {
    const std::vector<float>& port = sink.tensors[name];
    Check(pre + name + ".npy", port.data(), port.size(), kLfmTol);
  }
  const std::vector<float>& lin = sink.tensors["lin_out"];
  Check(pre + "lin_out.npy", lin.data(), lin.size(), kHeadTol);
  const size_t N = 6 * static_cast<size_t>(T), bins = 641;
  ASSERT_EQ(lin.size(), N * 2 * bins);
  // log_magnitude / phase: the halves of lin_out, row-major [N, 641] (not stored for T = 45).
  for (auto [half, off] : {std::pair{"log_magnitude", size_t{0}}, {"phase", bins}}) {
    const std::string path = pre + half + ".npy";
    if (!std::filesystem::exists(DataPath(path))) continue;
    std::vector<float> port(N * bins);
    for (size_t r = 0; r < N; ++r) std::copy_n(lin.data() + r * 2 * bins + off, bins, port.data() + r * bins);
    Check(path, port.data(), port.size(), kHeadTol);
  }
  // The inverse STFT's intermediates, through the batch form of the same f32 code (dsp::IstftBatch) on
  // this decoder's own lin_out; the streaming PCM below is checked to equal its PCM bit for bit.
  Result<dsp::IstftBatchOutput> b =
      dsp::IstftBatch(lin.data(), lin.data() + bins, 2 * bins, N, 1280, 320, Model().window());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Check(pre + "ifft_windowed.npy", b->frames.data(), b->frames.size(), kFramesTol);
  Check(pre + "ola.npy", b->ola.data(), b->ola.size(), kPcmTol);
  Check(pre + "envelope.npy", b->envelope.data(), b->envelope.size(), kPcmTol);
  ASSERT_EQ(pcm.size(), kSpf * static_cast<size_t>(T));
  ASSERT_EQ(b->pcm.size(), pcm.size());
  EXPECT_EQ(std::memcmp(b->pcm.data(), pcm.data(), pcm.size() * 4), 0) << "streaming PCM != IstftBatch PCM";
  Check(pre + "pcm.npy", pcm.data(), pcm.size(), kPcmTol);
  const std::vector<float> ref = LoadTrace(pre + "pcm.npy").ToFloat();
  std::printf("  T=%d pcm SNR %.1f dB\n", T, SnrDb(pcm.data(), ref, 0, ref.size()));
}

INSTANTIATE_TEST_SUITE_P(Lengths, Lfm3CodecTrace, ::testing::Values(1, 4, 45));

// One frame per call, pieces of 4 and 5 frames (passes of 4 and 7), and one call for all 45, on one
// and two threads, then Flush: the same PCM bit for bit, 1920 samples per frame.
TEST(Lfm3Codec, StreamingEqualsBatchBitForBit) {
  const std::vector<int32_t> codes = Codes("lfm3_tiny/traces/codec__T45__codes.npy");
  ThreadTeam one(1), two(2);
  auto batch = Lfm3CodecSession::Create(Model(), 45, 1);
  ASSERT_TRUE(batch.ok());
  const std::vector<float> a = DecodeAll(**batch, codes, 45, one);
  ASSERT_EQ(a.size(), 45u * kSpf);
  struct Split {
    size_t per_call, per_pass;
    ThreadTeam* team;
  };
  for (const Split& s : {Split{1, 1, &two}, Split{1, 1, &one}, Split{4, 4, &one}, Split{5, 7, &two},
                         Split{45, 3, &one}, Split{13, 45, &two}}) {
    auto session = Lfm3CodecSession::Create(Model(), s.per_pass, 2);
    ASSERT_TRUE(session.ok());
    const std::vector<float> b = DecodeAll(**session, codes, s.per_call, *s.team);
    ASSERT_EQ(b.size(), a.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
        << s.per_call << " frames per call, " << s.per_pass << " per pass, " << s.team->size() << " threads";
  }
}

// Each frame emits 1920 samples except the first (1920 − 480); Flush the last 480, and the state is
// fresh again (a second stream decodes as the first).
TEST(Lfm3Codec, ChunkSizesAndFlush) {
  const std::vector<int32_t> codes = Codes("lfm3_tiny/traces/codec__T4__codes.npy");
  ThreadTeam team(1);
  auto s = Lfm3CodecSession::Create(Model(), 1, 1);
  ASSERT_TRUE(s.ok());
  std::vector<float> out(kSpf);
  std::vector<size_t> sizes;
  for (size_t f = 0; f < 4; ++f) {
    Result<size_t> w = (*s)->Step({codes.data() + kCb * f, kCb}, out, team);
    ASSERT_TRUE(w.ok());
    sizes.push_back(*w);
  }
  EXPECT_EQ((*s)->state().position(), 24);
  Result<size_t> tail = (*s)->Flush(out);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(sizes, (std::vector<size_t>{1440, 1920, 1920, 1920}));
  EXPECT_EQ(*tail, 480u);
  EXPECT_EQ((*s)->frames_decoded(), 0u);
  EXPECT_EQ((*s)->state().position(), 0);
  Result<size_t> none = (*s)->Flush(out);  // nothing stepped: nothing to flush
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0u);
}

// codec__turns: A, B, A as three streams of one session (Flush ends each). pcm_A1 == pcm_A2 bit for
// bit, and each matches its trace.
TEST(Lfm3Codec, TurnsAThenBThenA) {
  const std::vector<int32_t> a = Codes("lfm3_tiny/traces/codec__turns__codes_A.npy");
  const std::vector<int32_t> b = Codes("lfm3_tiny/traces/codec__turns__codes_B.npy");
  ThreadTeam team(1);
  auto s = Lfm3CodecSession::Create(Model(), 1, 1);
  ASSERT_TRUE(s.ok());
  const std::vector<float> a1 = DecodeAll(**s, a, 1, team);
  const std::vector<float> pb = DecodeAll(**s, b, 2, team);
  // A stream abandoned half way, then Reset: forgets everything.
  std::vector<float> junk(3 * kSpf);
  ASSERT_TRUE((*s)->Step({b.data(), 3 * kCb}, junk, team).ok());
  (*s)->Reset();
  const std::vector<float> a2 = DecodeAll(**s, a, 1, team);
  ASSERT_EQ(a1.size(), 9600u);
  ASSERT_EQ(pb.size(), 7680u);
  ASSERT_EQ(a2.size(), 9600u);
  EXPECT_EQ(std::memcmp(a1.data(), a2.data(), a1.size() * 4), 0);
  for (auto [pcm, name] : {std::pair{&a1, "pcm_A1"}, {&pb, "pcm_B"}, {&a2, "pcm_A2"}}) {
    Check(std::string("lfm3_tiny/traces/codec__turns__") + name + ".npy", pcm->data(), pcm->size(), kPcmTol);
  }
}

// Two streams in one StepStreams pass equal each stepped alone, bit for bit.
TEST(Lfm3Codec, StepStreamsEqualsEachAlone) {
  const std::vector<int32_t> a = Codes("lfm3_tiny/traces/codec__turns__codes_A.npy");
  const std::vector<int32_t> b = Codes("lfm3_tiny/traces/codec__turns__codes_B.npy");
  ThreadTeam team(2);
  auto alone = Lfm3CodecSession::Create(Model(), 1, 2);
  ASSERT_TRUE(alone.ok());
  const std::vector<float> ra = DecodeAll(**alone, a, 1, team);
  const std::vector<float> rb = DecodeAll(**alone, b, 1, team);
  auto sc = Lfm3CodecScratch::Create(Model(), 2, 2, 2);
  auto sa = Lfm3CodecState::Create(Model(), 2);
  auto sb = Lfm3CodecState::Create(Model(), 2);
  ASSERT_TRUE(sc.ok() && sa.ok() && sb.ok());
  std::vector<float> pa(a.size() / kCb * kSpf + 480), pb(b.size() / kCb * kSpf + 480);
  size_t na = 0, nb = 0;
  for (size_t f = 0; f < 5; f += 2) {  // A: 2+2+1 frames; B: 2+2 frames, then nothing
    const size_t ka = std::min<size_t>(2, 5 - f), kb = f < 4 ? std::min<size_t>(2, 4 - f) : 0;
    Lfm3CodecRequest req[2] = {
        {&*sa, {a.data() + f * kCb, ka * kCb}, {pa.data() + na, ka * kSpf}, 0},
        {&*sb, {b.data() + std::min<size_t>(f, 4) * kCb, kb * kCb}, {pb.data() + nb, kb * kSpf}, 0}};
    ASSERT_TRUE(StepStreams(Model(), req, *sc, team).ok());
    na += req[0].written;
    nb += req[1].written;
  }
  Result<size_t> ta = Flush(Model(), *sa, {pa.data() + na, 480}),
                 tb = Flush(Model(), *sb, {pb.data() + nb, 480});
  ASSERT_TRUE(ta.ok() && tb.ok());
  ASSERT_EQ(na + *ta, ra.size());
  ASSERT_EQ(nb + *tb, rb.size());
  EXPECT_EQ(std::memcmp(pa.data(), ra.data(), ra.size() * 4), 0);
  EXPECT_EQ(std::memcmp(pb.data(), rb.data(), rb.size() * 4), 0);
}

// Codes ≥ 2016 (the end-of-audio code 2016 included) or negative, a partial frame, a short output
// span: clear errors, and the stream is unchanged (it then decodes as if they never came).
TEST(Lfm3Codec, RejectsBadInputWithoutChangingState) {
  const std::vector<int32_t> codes = Codes("lfm3_tiny/traces/codec__T4__codes.npy");
  ThreadTeam team(1);
  auto ref = Lfm3CodecSession::Create(Model(), 2, 1);
  auto s = Lfm3CodecSession::Create(Model(), 2, 1);
  ASSERT_TRUE(ref.ok() && s.ok());
  const std::vector<float> want = DecodeAll(**ref, codes, 2, team);

  std::vector<float> out(4 * kSpf + 480);
  ASSERT_TRUE((*s)->Step({codes.data(), kCb}, out, team).ok());  // one good frame first
  size_t n = 1440;
  struct Bad {
    int32_t code;
    const char* expect;
  };
  for (const Bad& bad : {Bad{2016, "end-of-audio"}, Bad{2017, "outside [0, 2016)"}, Bad{-1, "outside"},
                         Bad{1 << 30, "outside"}}) {
    std::vector<int32_t> frames(codes.begin() + kCb, codes.begin() + 3 * kCb);
    frames[kCb + 7] = bad.code;  // frame 2 of the stream, codebook 7: nothing of frame 1 may run either
    Result<size_t> w = (*s)->Step(frames, {out.data() + n, 2 * kSpf}, team);
    ASSERT_FALSE(w.ok()) << bad.code;
    EXPECT_NE(w.status().ToString().find(bad.expect), std::string::npos) << w.status().ToString();
    EXPECT_NE(w.status().ToString().find("frame 2, codebook 7"), std::string::npos) << w.status().ToString();
    EXPECT_EQ((*s)->frames_decoded(), 1u);
  }
  EXPECT_FALSE((*s)->Step({codes.data() + kCb, kCb - 1}, {out.data() + n, kSpf}, team).ok());  // partial
  EXPECT_FALSE((*s)->Step({codes.data() + kCb, kCb}, {out.data() + n, kSpf - 1}, team).ok());  // short out
  EXPECT_FALSE((*s)->Flush({out.data(), 479}).ok());
  EXPECT_EQ((*s)->frames_decoded(), 1u);
  for (size_t f = 1; f < 4; ++f) {
    Result<size_t> w = (*s)->Step({codes.data() + f * kCb, kCb}, {out.data() + n, kSpf}, team);
    ASSERT_TRUE(w.ok());
    n += *w;
  }
  Result<size_t> tail = (*s)->Flush({out.data() + n, 480});
  ASSERT_TRUE(tail.ok());
  n += *tail;
  ASSERT_EQ(n, want.size());
  EXPECT_EQ(std::memcmp(out.data(), want.data(), n * 4), 0);
}

// A checkpoint that lacks a tensor, or holds one of the wrong shape, is an error naming it.
TEST(Lfm3Codec, BadCheckpointNamesTheTensor) {
  Result<Lfm3Config> config = Lfm3Config::Load(DataPath("lfm3_tiny/config.json"));
  ASSERT_TRUE(config.ok());
  auto full = std::make_shared<Checkpoint>(std::move(Checkpoint::Open(DataPath("lfm3_tiny")).value()));
  for (const char* drop :
       {"codec.quantizer.project_out.bias", "codec.from_quantizer.weight", "codec.decoder.lin.weight",
        "codec.decoder.istft.window", "codec.decoder.lfm.layers.3.conv.conv.weight"}) {
    std::map<std::string, TensorView, std::less<>> views;
    for (const std::string& name : full->Names()) {
      if (name != drop) views[name] = full->Get(name).value();
    }
    Result<std::unique_ptr<Lfm3Codec>> r =
        Lfm3Codec::Load(*config, Checkpoint::FromViews("pruned", std::move(views), full), "pruned");
    ASSERT_FALSE(r.ok()) << drop;
    EXPECT_NE(r.status().ToString().find(drop), std::string::npos) << r.status().ToString();
  }
  Lfm3Config bad = *config;
  bad.codec.quantizer_dim = 128;
  Result<std::unique_ptr<Lfm3Codec>> r =
      Lfm3Codec::Load(bad, std::move(Checkpoint::Open(DataPath("lfm3_tiny")).value()), "lfm3_tiny");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("codec.quantizer.project_out.weight"), std::string::npos)
      << r.status().ToString();
}

// Once warm, a frame allocates nothing (past the 30-key window, so the K/V rings shift), nor does
// Flush, on one and two threads, through Step and through StepStreams with two streams.
TEST(Lfm3Codec, NoHeapAllocationPerFrame) {
  for (int threads : {1, 2}) {
    ThreadTeam team(threads);
    auto s = Lfm3CodecSession::Create(Model(), 1, threads);
    auto sc = Lfm3CodecScratch::Create(Model(), 1, 2, threads);
    auto sa = Lfm3CodecState::Create(Model(), 1);
    auto sb = Lfm3CodecState::Create(Model(), 1);
    ASSERT_TRUE(s.ok() && sc.ok() && sa.ok() && sb.ok());
    std::vector<int32_t> frame(kCb), frame2(kCb);
    std::vector<float> pcm(kSpf), pcm2(kSpf);
    for (int turn = 0; turn < 2; ++turn) {
      for (int f = 0; f < 8; ++f) {  // 48 STFT rows: past the window of 30
        for (size_t k = 0; k < kCb; ++k) {
          frame[k] = static_cast<int32_t>((f * 97 + k * 131) % 2016);
          frame2[k] = static_cast<int32_t>((f * 31 + k * 7) % 2016);
        }
        long before = testing::AllocationCount();
        Result<size_t> w = (*s)->Step(frame, pcm, team);
        long during = testing::AllocationCount() - before;
        ASSERT_TRUE(w.ok());
        if (f > 0 || turn > 0) {
          EXPECT_EQ(during, 0) << "Step, frame " << f << ", threads " << threads;
        }
        Lfm3CodecRequest req[2] = {{&*sa, frame, pcm, 0}, {&*sb, frame2, pcm2, 0}};
        before = testing::AllocationCount();
        ASSERT_TRUE(StepStreams(Model(), req, *sc, team).ok());
        during = testing::AllocationCount() - before;
        if (f > 0 || turn > 0) {
          EXPECT_EQ(during, 0) << "StepStreams, frame " << f << ", threads " << threads;
        }
      }
      const long before = testing::AllocationCount();
      Result<size_t> tail = (*s)->Flush(pcm);
      Result<size_t> ta = Flush(Model(), *sa, pcm), tb = Flush(Model(), *sb, pcm2);
      EXPECT_EQ(testing::AllocationCount() - before, 0) << "Flush";
      ASSERT_TRUE(tail.ok() && ta.ok() && tb.ok());
      EXPECT_EQ(*tail, 480u);
    }
  }
}

// The state that lives across frames (docs/lfm3_codec_liveness.md): conv histories 2 rows × H per conv
// layer, window − 1 = 29 K and V rows of KV per attention layer, overlap-add and envelope n_fft each.
TEST(Lfm3Codec, LiveStateSize) {
  auto st = Lfm3CodecState::Create(Model(), 1);
  ASSERT_TRUE(st.ok());
  const size_t H = 128, KV = 64;
  EXPECT_EQ(st->live_bytes(), (5 * 2 * H + 3 * 2 * 29 * KV + 2 * 1280) * sizeof(float));
}

}  // namespace
}  // namespace lfmvox

namespace lfmvox {
namespace {

// Matrices converted to Q8_0 at load time (Lfm3Codec::Load's `matrices`): the decoder still streams bit for
// bit (1 frame per call == 45 at once), and its PCM stays near codec__T45__pcm. The SNR bound is a sanity
// check of the conversion (8-bit weights are not what the oracle traced), not a parity tolerance.
TEST(Lfm3Codec, Q8_0WeightsStreamAndStayClose) {
  auto q = Lfm3Codec::Load(DataPath("lfm3_tiny"), WeightFormat::kQ8_0);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)->lin().w.format, WeightFormat::kQ8_0);
  EXPECT_EQ((*q)->stack().layers()[0].ffn.w1.w.format, WeightFormat::kQ8_0);
  EXPECT_EQ((*q)->project_out().w.format, WeightFormat::kBF16);  // 48 columns: not whole Q8_0 blocks
  const std::vector<int32_t> codes = Codes("lfm3_tiny/traces/codec__T45__codes.npy");
  ThreadTeam team(1);
  auto one = Lfm3CodecSession::Create(**q, 1, 1), all = Lfm3CodecSession::Create(**q, 45, 1);
  ASSERT_TRUE(one.ok() && all.ok());
  CollectingSink sink;
  const std::vector<float> a = DecodeAll(**one, codes, 1, team), b = DecodeAll(**all, codes, 45, team, &sink);
  ASSERT_EQ(a.size(), 45u * kSpf);
  ASSERT_EQ(b.size(), a.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  const std::vector<float> ref = LoadTrace("lfm3_tiny/traces/codec__T45__pcm.npy").ToFloat();
  const double snr = SnrDb(a.data(), ref, 0, ref.size());
  auto snr_of = [&](const char* name) {
    const std::vector<float> r =
        LoadTrace(std::string("lfm3_tiny/traces/codec__T45__") + name + ".npy").ToFloat();
    return SnrDb(sink.tensors[name].data(), r, 0, r.size());
  };
  const double fq = snr_of("from_quantizer"), lin = snr_of("lin_out");
  std::printf(
      "  Q8_0 weights, T=45 SNR against the f32 oracle: from_quantizer %.1f dB, lin_out %.1f dB, pcm %.1f "
      "dB\n",
      fq, lin, snr);
  // One Q8_0 product (8-bit weights and activations) keeps ~40 dB; the random 8-layer stack with its
  // sandwich norms loses ~3 dB a layer (measured: 42.5, 21.4, 17.9 dB).
  EXPECT_GE(fq, 35.0);
  EXPECT_GE(lin, 15.0);
  EXPECT_GE(snr, 12.0);
}

}  // namespace
}  // namespace lfmvox
