#include "dsp/istft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "hwy/targets.h"
#include "io/npy.h"

namespace lfmvox::dsp {
namespace {

constexpr size_t kNfft = 1280;
constexpr size_t kHop = 320;
constexpr size_t kBins = kNfft / 2 + 1;   // 641
constexpr size_t kRow = 2 * kBins;        // lin_out row: [log-magnitude | phase]
constexpr size_t kSamplesPerCode = 1920;  // 6 spectral frames × hop
constexpr size_t kFramesPerCode = 6;
constexpr size_t kPad = (kNfft - kHop) / 2;  // 480: trimmed at each end, emitted by Flush
// Oracle README, detok/istft_frames and detok/pcm: max|port − oracle| ≤ 1e-4·max|oracle|.
constexpr double kTraceTolerance = 1e-4;
constexpr double kMinSnrDb = 100.0;

const std::string kDetokDir = std::string(LFMVOX_TEST_DATA_DIR) + "/lfm25_detok";

std::vector<float> LoadTrace(const std::string& name, std::vector<int64_t>* shape = nullptr) {
  auto a = ReadNpy(kDetokDir + "/traces/" + name);
  if (!a.ok()) {
    ADD_FAILURE() << name << ": " << a.status().ToString();
    return {};
  }
  if (shape) *shape = a->shape;
  return a->ToFloat();
}

// istft.window from the detokenizer checkpoint (F32 [1280]); read here with a
// minimal safetensors parse so the test uses the real window, not a formula.
std::vector<float> LoadWindow() {
  std::ifstream f(kDetokDir + "/model.safetensors", std::ios::binary);
  uint64_t header_len = 0;
  f.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, '\0');
  f.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!f) {
    ADD_FAILURE() << "cannot read the safetensors header";
    return {};
  }
  const auto h = nlohmann::json::parse(header);
  const auto& t = h.at("istft.window");
  EXPECT_EQ(t.at("dtype"), "F32");
  const size_t begin = t.at("data_offsets")[0], end = t.at("data_offsets")[1];
  std::vector<float> w((end - begin) / sizeof(float));
  f.seekg(static_cast<std::streamoff>(8 + header_len + begin));
  f.read(reinterpret_cast<char*>(w.data()), static_cast<std::streamsize>(end - begin));
  EXPECT_TRUE(f.good());
  EXPECT_EQ(w.size(), kNfft);
  return w;
}

// max|got − want| / max|want|.
double ScaledMaxErr(const float* got, const std::vector<float>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return err / scale;
}

// 10·log10(Σ ref² / Σ (ref − got)²) over ref[begin, end).
double SnrDb(const float* got, const std::vector<float>& ref, size_t begin, size_t end) {
  double sig = 0, noise = 0;
  for (size_t i = begin; i < end; ++i) {
    sig += static_cast<double>(ref[i]) * ref[i];
    noise += (static_cast<double>(ref[i]) - got[i]) * (static_cast<double>(ref[i]) - got[i]);
  }
  return noise == 0 ? INFINITY : 10.0 * std::log10(sig / noise);
}

// Streams all frames of lin_out ([n, 1282]) one at a time, then flushes;
// returns the concatenated PCM and records the per-call counts.
std::vector<float> Stream(StreamingIstft& istft, const std::vector<float>& lin, size_t n_frames,
                          std::vector<int>* counts = nullptr) {
  std::vector<float> pcm, chunk(istft.max_output());
  for (size_t t = 0; t < n_frames; ++t) {
    const float* row = lin.data() + t * kRow;
    const int got = istft.Step(row, row + kBins, chunk.data());
    if (counts) counts->push_back(got);
    pcm.insert(pcm.end(), chunk.begin(), chunk.begin() + got);
  }
  const int tail = istft.Flush(chunk.data());
  if (counts) counts->push_back(tail);
  pcm.insert(pcm.end(), chunk.begin(), chunk.begin() + tail);
  return pcm;
}

class DetokTrace : public ::testing::TestWithParam<int> {};

// Traces detok__T{T}__lin_out / ifft_windowed / ola / envelope / pcm.npy.
TEST_P(DetokTrace, MatchesOracle) {
  const int T = GetParam();
  const std::string prefix = "detok__T" + std::to_string(T) + "__";
  const std::vector<float> window = LoadWindow();
  std::vector<int64_t> shape;
  const std::vector<float> lin = LoadTrace(prefix + "lin_out.npy", &shape);
  const size_t n_frames = kFramesPerCode * T;
  ASSERT_EQ(shape, (std::vector<int64_t>{static_cast<int64_t>(n_frames), static_cast<int64_t>(kRow)}));

  const std::vector<float> ifft = LoadTrace(prefix + "ifft_windowed.npy");
  const std::vector<float> ola = LoadTrace(prefix + "ola.npy");
  const std::vector<float> env = LoadTrace(prefix + "envelope.npy");
  const std::vector<float> pcm_ref = LoadTrace(prefix + "pcm.npy");
  ASSERT_EQ(pcm_ref.size(), kSamplesPerCode * T);

  // Once per SIMD target compiled in and supported here (FFT and polar
  // conversion are dispatched; FMA changes the rounding on AVX2 and up).
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));

    // Batch reference: every intermediate against its trace.
    auto batch = IstftBatch(lin.data(), lin.data() + kBins, kRow, n_frames, kNfft, kHop, window);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    ASSERT_EQ(batch->frames.size(), ifft.size());
    ASSERT_EQ(batch->ola.size(), ola.size());
    ASSERT_EQ(batch->envelope.size(), env.size());
    ASSERT_EQ(batch->pcm.size(), pcm_ref.size());
    const double e_ifft = ScaledMaxErr(batch->frames.data(), ifft);
    const double e_ola = ScaledMaxErr(batch->ola.data(), ola);
    const double e_env = ScaledMaxErr(batch->envelope.data(), env);
    EXPECT_LE(e_ifft, kTraceTolerance);
    EXPECT_LE(e_ola, kTraceTolerance);
    EXPECT_LE(e_env, kTraceTolerance);

    // Streaming: 0 samples for frame 0 (all inside the 480-sample trim), 160
    // for frame 1, hop for every later frame, and the 480-sample tail on Flush.
    StreamingIstft istft;
    ASSERT_TRUE(istft.Init(kNfft, kHop, window).ok());
    std::vector<int> counts;
    const std::vector<float> pcm = Stream(istft, lin, n_frames, &counts);
    ASSERT_EQ(pcm.size(), kSamplesPerCode * T);
    for (size_t t = 0; t < n_frames; ++t) {
      EXPECT_EQ(counts[t], t == 0 ? 0 : t == 1 ? 160 : 320) << "frame " << t;
    }
    EXPECT_EQ(counts.back(), static_cast<int>(kPad));

    // Streaming == batch bit for bit: Step and IstftBatch run the same
    // float operations in the same order.
    EXPECT_EQ(std::memcmp(pcm.data(), batch->pcm.data(), pcm.size() * sizeof(float)), 0);

    const double e_pcm = ScaledMaxErr(pcm.data(), pcm_ref);
    const double snr = SnrDb(pcm.data(), pcm_ref, 0, pcm.size());
    const double snr_head = SnrDb(pcm.data(), pcm_ref, 0, kSamplesPerCode);
    const double snr_tail = SnrDb(pcm.data(), pcm_ref, pcm.size() - kSamplesPerCode, pcm.size());
    std::printf(
        "%-7s T=%2d  max err/scale: ifft_windowed %.3g  ola %.3g  envelope %.3g  pcm %.3g   "
        "PCM SNR %.1f dB (first 1920: %.1f, last 1920: %.1f)\n",
        hwy::TargetName(target), T, e_ifft, e_ola, e_env, e_pcm, snr, snr_head, snr_tail);
    EXPECT_LE(e_pcm, kTraceTolerance);
    EXPECT_GE(snr, kMinSnrDb);
    EXPECT_GE(snr_head, kMinSnrDb);
    EXPECT_GE(snr_tail, kMinSnrDb);
  }
  hwy::SetSupportedTargetsForTest(0);
}

INSTANTIATE_TEST_SUITE_P(T, DetokTrace, ::testing::Values(1, 3, 7, 45));

// Short streams, where the initial trim reaches past the first frames, still
// equal the batch output; traces detok__T3__lin_out.npy used as input only.
TEST(StreamingIstft, ShortStreamsEqualBatch) {
  const std::vector<float> window = LoadWindow();
  const std::vector<float> lin = LoadTrace("detok__T3__lin_out.npy");
  StreamingIstft istft;
  ASSERT_TRUE(istft.Init(kNfft, kHop, window).ok());
  for (size_t n_frames = 1; n_frames <= 5; ++n_frames) {
    auto batch = IstftBatch(lin.data(), lin.data() + kBins, kRow, n_frames, kNfft, kHop, window);
    ASSERT_TRUE(batch.ok());
    const std::vector<float> pcm = Stream(istft, lin, n_frames);
    ASSERT_EQ(pcm.size(), n_frames * kHop);
    EXPECT_EQ(std::memcmp(pcm.data(), batch->pcm.data(), pcm.size() * sizeof(float)), 0) << n_frames;
  }
  float unused[kPad];
  EXPECT_EQ(istft.Flush(unused), 0);  // nothing pushed since the last flush
}

// Reset mid-stream and Flush both start a fresh stream: same input, same
// output, bit for bit. Trace detok__T7__lin_out.npy used as input only.
TEST(StreamingIstft, ResetRestartsTheStream) {
  const std::vector<float> window = LoadWindow();
  const std::vector<float> lin = LoadTrace("detok__T7__lin_out.npy");
  const size_t n_frames = 42;
  StreamingIstft istft;
  ASSERT_TRUE(istft.Init(kNfft, kHop, window).ok());
  const std::vector<float> first = Stream(istft, lin, n_frames);  // ends with Flush
  const std::vector<float> second = Stream(istft, lin, n_frames);
  float chunk[kHop];
  for (size_t t = 20; t < 29; ++t) {  // part of a stream, abandoned
    istft.Step(lin.data() + t * kRow, lin.data() + t * kRow + kBins, chunk);
  }
  EXPECT_EQ(istft.frames_pushed(), 9u);
  istft.Reset();
  EXPECT_EQ(istft.frames_pushed(), 0u);
  const std::vector<float> third = Stream(istft, lin, n_frames);
  ASSERT_EQ(first.size(), kSamplesPerCode * 7);
  ASSERT_EQ(second.size(), first.size());
  ASSERT_EQ(third.size(), first.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(first.data(), third.data(), first.size() * sizeof(float)), 0);
}

// Step and Flush allocate nothing (tests/alloc_counter.cc counts every global operator new; the
// library's own buffers are all sized in Init).
TEST(StreamingIstft, NoAllocationAfterInit) {
  const std::vector<float> window = LoadWindow();
  const std::vector<float> lin = LoadTrace("detok__T7__lin_out.npy");
  StreamingIstft istft;
  ASSERT_TRUE(istft.Init(kNfft, kHop, window).ok());
  std::vector<float> out(istft.max_output());
  size_t total = 0;
  const long before = lfmvox::testing::AllocationCount();
  for (size_t t = 0; t < 42; ++t) {
    total += istft.Step(lin.data() + t * kRow, lin.data() + t * kRow + kBins, out.data());
  }
  total += istft.Flush(out.data());
  istft.Reset();
  EXPECT_EQ(lfmvox::testing::AllocationCount() - before, 0);
  EXPECT_EQ(total, kSamplesPerCode * 7);
}

TEST(StreamingIstft, InitRejectsBadArguments) {
  const std::vector<float> hann = LoadWindow();
  StreamingIstft istft;
  EXPECT_FALSE(istft.Init(kNfft, 0, hann).ok());                             // hop 0
  EXPECT_FALSE(istft.Init(kNfft, kNfft + 2, hann).ok());                     // hop > n_fft
  EXPECT_FALSE(istft.Init(kNfft, 321, hann).ok());                           // odd n_fft − hop
  EXPECT_FALSE(istft.Init(kNfft, kHop, std::span(hann).first(1000)).ok());   // window size
  EXPECT_FALSE(istft.Init(1282, 322, std::vector<float>(1282, 1.0f)).ok());  // 641 = unsupported FFT size
  EXPECT_FALSE(istft.Init(kNfft, kNfft, hann).ok());                         // no overlap: env = w² = 0 at 0
  std::vector<float> bad = hann;
  bad[5] = NAN;
  EXPECT_FALSE(istft.Init(kNfft, kHop, bad).ok());  // non-finite window
  std::vector<float> gap(kNfft, 0.0f);
  for (size_t i = 0; i < 200; ++i) gap[i] = 1.0f;  // covers 200 of each 320-sample hop
  const Status s = istft.Init(kNfft, kHop, gap);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(istft.Init(kNfft, kNfft, std::vector<float>(kNfft, 1.0f)).ok());  // rectangular, no overlap
  EXPECT_TRUE(istft.Init(kNfft, kHop, hann).ok());
}

}  // namespace
}  // namespace lfmvox::dsp
