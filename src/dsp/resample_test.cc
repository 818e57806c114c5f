#include "dsp/resample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "io/npy.h"

namespace lfmvox::dsp {
namespace {

std::vector<float> LoadTrace(const std::string& name) {
  auto a = ReadNpy(std::string(LFMVOX_TEST_DATA_DIR) + "/lfm25_tiny/traces/" + name);
  if (!a.ok()) {
    ADD_FAILURE() << name << ": " << a.status().ToString();
    return {};
  }
  return a->ToFloat();
}

double MaxAbs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

// Trace audio/wave_24k_resampled_16k = torchaudio.functional.resample(wave_24k, 24000, 16000).
// Oracle README tolerance for the audio group: max|port − oracle| ≤ 2e-4·max|oracle|. The arithmetic
// allows far less (the kernel is torch's float32 kernel; only the conv's summation order differs, ~23
// terms of |k| ≤ 1 at float32 rounding: ≈ 1e-6 relative), so the measured error is also held to 1e-5.
TEST(ResampleTest, MatchesTorchaudioTrace24kTo16k) {
  const std::vector<float> x = LoadTrace("audio__wave_24k.npy");
  const std::vector<float> want = LoadTrace("audio__wave_24k_resampled_16k.npy");
  ASSERT_EQ(x.size(), 12000u);
  ASSERT_EQ(want.size(), 8000u);
  Result<std::vector<float>> y = Resample(x, 24000, 16000);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  ASSERT_EQ(y->size(), want.size());
  double err = 0;
  for (size_t i = 0; i < want.size(); ++i)
    err = std::max(err, std::fabs(static_cast<double>((*y)[i]) - want[i]));
  const double scale = MaxAbs(want);
  std::printf(
      "resample 24k->16k vs audio__wave_24k_resampled_16k.npy: max abs %.3g, scale %.3g, ratio %.3g\n", err,
      scale, err / scale);
  EXPECT_LE(err, 2e-4 * scale);
  EXPECT_LE(err, 1e-5 * scale);
}

// torchaudio's kernel over all of its 2W+O taps (no support trimming), written out from
// `_get_sinc_resample_kernel` as torch runs it for a float32 waveform (float32 ops, Python constants
// rounded to float32), applied directly and summed in double: the definition, independent of the
// implementation's phase/support indexing.
double Reference(const std::vector<float>& x, int orig_rate, int new_rate, size_t m) {
  const int g = std::gcd(orig_rate, new_rate);
  const long o = orig_rate / g, n = new_rate / g;
  const double base = std::min(o, n) * 0.99;
  const long w = static_cast<long>(std::ceil(6.0 * o / base));
  const long q = static_cast<long>(m) / n, j = static_cast<long>(m) % n;
  const float pi = static_cast<float>(M_PI);
  double acc = 0;
  for (long i = 0; i < 2 * w + o; ++i) {
    const long s = q * o + i - w;
    if (s < 0 || s >= static_cast<long>(x.size())) continue;
    float t =
        static_cast<float>(-j) / static_cast<float>(n) + static_cast<float>(i - w) / static_cast<float>(o);
    t = std::clamp(t * static_cast<float>(base), -6.0f, 6.0f) * pi;
    const float win = std::cos(t / 6.0f / 2.0f) * std::cos(t / 6.0f / 2.0f);
    const float sinc = t == 0 ? 1.0f : std::sin(t) / t;
    acc += static_cast<double>(sinc * (win * static_cast<float>(base / o))) * x[static_cast<size_t>(s)];
  }
  return acc;
}

std::vector<float> TestSignal(size_t n, int rate) {
  std::vector<float> x(n);
  uint32_t r = 12345;
  for (size_t i = 0; i < n; ++i) {
    r = r * 1664525u + 1013904223u;
    const double t = static_cast<double>(i) / rate;
    x[i] = static_cast<float>(0.5 * std::sin(2 * M_PI * 440 * t) + 0.3 * std::sin(2 * M_PI * 3100 * t) +
                              0.1 * ((r >> 8) / 16777216.0 - 0.5));
  }
  return x;
}

// Several rate pairs (up, down, non-trivial gcd, coprime) against the full-kernel reference. The taps are
// the same float32 values, the discarded clamped taps are < 1e-20 and both sums run in double, so what is
// left is the output's rounding to float32: half an ulp of |y| < 1, 6e-8.
TEST(ResampleTest, MatchesDoubleDefinitionForManyRates) {
  const int pairs[][2] = {{24000, 16000}, {44100, 16000}, {48000, 16000}, {22050, 16000},
                          {8000, 16000},  {16000, 8000},  {11025, 16000}, {16000, 44100},
                          {7, 3},         {3, 7},         {32000, 16000}, {16001, 16000}};
  for (const auto& p : pairs) {
    const size_t n = 3000;
    const std::vector<float> x = TestSignal(n, p[0]);
    Result<Resampler> r = Resampler::Create(p[0], p[1]);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::vector<float> y(r->OutputLength(n));
    ASSERT_TRUE(r->Process(x, y).ok());
    double err = 0;
    // Every output for short signals; a stride over long ones keeps the double reference cheap.
    const size_t stride = std::max<size_t>(1, y.size() / 1500);
    for (size_t m = 0; m < y.size(); m += stride)
      err = std::max(err, std::fabs(y[m] - Reference(x, p[0], p[1], m)));
    EXPECT_LE(err, 6e-8) << p[0] << " -> " << p[1];
  }
}

TEST(ResampleTest, OutputLengthIsTorchaudioCeil) {
  Result<Resampler> r = Resampler::Create(24000, 16000);  // reduced 3 -> 2
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->OutputLength(0), 0u);
  EXPECT_EQ(r->OutputLength(1), 1u);  // ceil(2/3)
  EXPECT_EQ(r->OutputLength(3), 2u);
  EXPECT_EQ(r->OutputLength(4), 3u);  // ceil(8/3)
  EXPECT_EQ(r->OutputLength(12000), 8000u);
  Result<Resampler> up = Resampler::Create(44100, 48000);  // reduced 147 -> 160
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(up->OutputLength(44100), 48000u);
  EXPECT_EQ(up->OutputLength(1), 2u);  // ceil(160/147)
  // Empty input gives empty output, not an error.
  std::vector<float> none;
  EXPECT_TRUE(r->Process(none, none).ok());
}

TEST(ResampleTest, EqualRatesAreTheIdentity) {
  const std::vector<float> x = TestSignal(1001, 16000);
  Result<std::vector<float>> y = Resample(x, 16000, 16000);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(*y, x);  // bit for bit
  Result<Resampler> r = Resampler::Create(16000, 16000);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->identity());
  EXPECT_EQ(r->kernel_floats(), 0u);
}

TEST(ResampleTest, Errors) {
  EXPECT_EQ(Resampler::Create(0, 16000).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Resampler::Create(16000, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Resampler::Create(-8000, 16000).status().code(), StatusCode::kInvalidArgument);
  Result<Resampler> r = Resampler::Create(24000, 16000);
  ASSERT_TRUE(r.ok());
  std::vector<float> x(30), y(19);  // 20 expected
  EXPECT_EQ(r->Process(x, y).code(), StatusCode::kInvalidArgument);
  // A kernel for rates far beyond audio (coprime, reduced to 2e9 taps of support) is refused, not built.
  EXPECT_EQ(Resampler::Create(2000000011, 16000).status().code(), StatusCode::kOutOfRange);
}

// The worst case a file can ask for: a prime rate near the 1 MHz limit down to 16 kHz (no common factor:
// 16000 phases). The stored support stays small where torch's kernel would be 16000 × ~1M taps.
TEST(ResampleTest, CoprimeRateNearOneMegahertzHasABoundedKernel) {
  const int prime = 999983;
  Result<Resampler> r = Resampler::Create(prime, 16000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // 16000 phases × (12·O/base + 4) taps, O/base = 999983/15840.
  EXPECT_LE(r->kernel_floats(), 16000u * static_cast<size_t>(12.0 * prime / 15840 + 5));
  const std::vector<float> x = TestSignal(70000, prime);
  std::vector<float> y(r->OutputLength(x.size()));
  ASSERT_EQ(y.size(), 1121u);  // ceil(16000·70000/999983)
  ASSERT_TRUE(r->Process(x, y).ok());
  for (size_t m : {0u, 1u, 560u, 1120u}) EXPECT_NEAR(y[m], Reference(x, prime, 16000, m), 6e-8) << m;
}

}  // namespace
}  // namespace lfmvox::dsp
