#include "dsp/fft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <vector>

#include "hwy/targets.h"

namespace lfmvox::dsp {
namespace {

// Error bound, after Higham (Accuracy and Stability of Numerical Algorithms,
// Thm. 24.2): a radix-2 FFT computed in floating point with unit roundoff u
// and twiddles of relative error μ satisfies
//   ‖ŷ − y‖₂ / ‖y‖₂ ≤ log2(n)·η / (1 − log2(n)·η),  η = μ + γ₄(√2 + μ) ≈ 7.7u
// for μ ≤ 2u (double twiddles rounded to float). A radix-p stage does no more
// rounding per point than the log2(p) radix-2 levels it replaces, and the
// real-input split adds about one more level, the 1/n scaling a rounding. So
//   relative RMS error ≤ 8u·(log2(n) + 2),   u = 2^-24,
// e.g. 5.9e-6 for n = 1280. A wrong twiddle or index gives O(1).
double ErrorBound(size_t n) {
  const double u = std::ldexp(1.0, -24);
  return 8.0 * u * (std::log2(static_cast<double>(n)) + 2.0);
}

// e^{-2πi·jk/n} tables, exact index reduction, in double.
struct DftTable {
  explicit DftTable(size_t n) : n(n), c(n), s(n) {
    for (size_t i = 0; i < n; ++i) {
      c[i] = std::cos(2.0 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(n));
      s[i] = std::sin(2.0 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(n));
    }
  }
  size_t n;
  std::vector<double> c, s;
};

// O(n²) rfft in double: X[k] = Σ x_j e^{-2πi·jk/n}, k ≤ n/2.
void DftForward(const DftTable& t, const std::vector<float>& x, std::vector<double>& re,
                std::vector<double>& im) {
  const size_t n = t.n;
  re.assign(n / 2 + 1, 0.0);
  im.assign(n / 2 + 1, 0.0);
  for (size_t k = 0; k <= n / 2; ++k) {
    for (size_t j = 0; j < n; ++j) {
      const size_t i = (j * k) % n;
      re[k] += x[j] * t.c[i];
      im[k] -= x[j] * t.s[i];
    }
  }
}

// O(n²) irfft in double, numpy semantics (Im X[0] and Im X[n/2] ignored).
std::vector<double> DftInverse(const DftTable& t, const std::vector<float>& re,
                               const std::vector<float>& im) {
  const size_t n = t.n, m = n / 2;
  std::vector<double> x(n);
  for (size_t j = 0; j < n; ++j) {
    double acc = re[0] + ((j % 2) ? -1.0 : 1.0) * re[m];
    for (size_t k = 1; k < m; ++k) {
      const size_t i = (j * k) % n;
      acc += 2.0 * (re[k] * t.c[i] - im[k] * t.s[i]);
    }
    x[j] = acc / static_cast<double>(n);
  }
  return x;
}

double RelRms(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

std::vector<float> Uniform(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Runs check(target name) once per SIMD target compiled in and supported by
// this CPU, so every dispatched variant of the kernels is tested.
template <typename F>
void ForEachTarget(const F& check) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    check(hwy::TargetName(target));
  }
  hwy::SetSupportedTargetsForTest(0);
}

class RealFftSizes : public ::testing::TestWithParam<size_t> {};

TEST_P(RealFftSizes, ForwardMatchesDoubleDft) {
  const size_t n = GetParam();
  auto fft = RealFft::Create(n);
  ASSERT_TRUE(fft.ok()) << fft.status().ToString();
  const DftTable table(n);
  const std::vector<float> x = Uniform(n, 1234 + static_cast<uint32_t>(n));
  std::vector<double> want_re, want_im;
  DftForward(table, x, want_re, want_im);
  // Both parts together: ‖X̂ − X‖ / ‖X‖ over the complex vector.
  std::vector<double> want(want_re);
  want.insert(want.end(), want_im.begin(), want_im.end());
  ForEachTarget([&](const char* target) {
    std::vector<float> re(n / 2 + 1, -7.0f), im(n / 2 + 1, -7.0f);  // poisoned
    fft->Forward(x.data(), re.data(), im.data());
    std::vector<float> got(re);
    got.insert(got.end(), im.begin(), im.end());
    const double err = RelRms(got, want);
    std::printf("%-7s n=%5zu forward   rel RMS err %.3g (bound %.3g)\n", target, n, err, ErrorBound(n));
    EXPECT_LE(err, ErrorBound(n)) << target;
    EXPECT_EQ(im[0], 0.0f) << target;
    EXPECT_EQ(im[n / 2], 0.0f) << target;
  });
}

TEST_P(RealFftSizes, InverseMatchesDoubleDft) {
  const size_t n = GetParam();
  auto fft = RealFft::Create(n);
  ASSERT_TRUE(fft.ok()) << fft.status().ToString();
  const DftTable table(n);
  std::vector<float> re = Uniform(n / 2 + 1, 99 + static_cast<uint32_t>(n));
  std::vector<float> im = Uniform(n / 2 + 1, 77 + static_cast<uint32_t>(n));
  // Non-zero imaginary DC and Nyquist parts, which irfft ignores.
  im[0] = 0.75f;
  im[n / 2] = -0.5f;
  const std::vector<double> want = DftInverse(table, re, im);
  ForEachTarget([&](const char* target) {
    std::vector<float> out(n, -7.0f);
    fft->Inverse(re.data(), im.data(), out.data());
    const double err = RelRms(out, want);
    std::printf("%-7s n=%5zu inverse   rel RMS err %.3g (bound %.3g)\n", target, n, err, ErrorBound(n));
    EXPECT_LE(err, ErrorBound(n)) << target;
  });
}

TEST_P(RealFftSizes, RoundTrip) {
  const size_t n = GetParam();
  auto fft = RealFft::Create(n);
  ASSERT_TRUE(fft.ok()) << fft.status().ToString();
  const std::vector<float> x = Uniform(n, 5 + static_cast<uint32_t>(n));
  ForEachTarget([&](const char* target) {
    std::vector<float> re(n / 2 + 1), im(n / 2 + 1), y(n);
    fft->Forward(x.data(), re.data(), im.data());
    fft->Inverse(re.data(), im.data(), y.data());
    const double err = RelRms(y, std::vector<double>(x.begin(), x.end()));
    std::printf("%-7s n=%5zu roundtrip rel RMS err %.3g (bound %.3g)\n", target, n, err, 2 * ErrorBound(n));
    EXPECT_LE(err, 2 * ErrorBound(n)) << target;  // forward error plus inverse error
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, RealFftSizes,
                         ::testing::Values(2, 6, 8, 10, 12, 40, 96, 160, 162, 250, 320, 512, 640, 1280, 1920,
                                           2560));

TEST(RealFft, RejectsUnsupportedSizes) {
  for (size_t n : {0, 1, 3, 7, 14, 22, 1282}) {
    auto fft = RealFft::Create(n);
    ASSERT_FALSE(fft.ok()) << "n = " << n;
    EXPECT_EQ(fft.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(RealFft, ImpulseGivesFlatSpectrum) {
  // x = δ[j − 3]: X[k] = e^{-2πi·3k/n}, exactly computable; a cheap check
  // that the plan's indexing is right independently of the DFT helper.
  const size_t n = 1280;
  auto fft = RealFft::Create(n);
  ASSERT_TRUE(fft.ok());
  std::vector<float> x(n, 0.0f);
  x[3] = 1.0f;
  ForEachTarget([&](const char* target) {
    std::vector<float> re(n / 2 + 1), im(n / 2 + 1);
    fft->Forward(x.data(), re.data(), im.data());
    for (size_t k = 0; k <= n / 2; ++k) {
      const double a = -2.0 * std::numbers::pi * 3.0 * static_cast<double>(k) / n;
      // Each bin is a product of ~log2(n) rounded twiddles: ≤ 8u·(log2 n + 2).
      EXPECT_NEAR(re[k], std::cos(a), ErrorBound(n)) << target << " k=" << k;
      EXPECT_NEAR(im[k], std::sin(a), ErrorBound(n)) << target << " k=" << k;
    }
  });
}

}  // namespace
}  // namespace lfmvox::dsp
