#include "dsp/polar.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hwy/targets.h"

namespace lfmvox::dsp {
namespace {

// Per-component error bound relative to |S| = e^l: Exp is within 1 ULP
// (≤ 2^-23 relative), Cos/Sin within 3 ULP of a value of size ≤ 1 (≤ 3·2^-23
// absolute), and the product rounds once more (2^-24): together ≤ 4.5·2^-23.
// 5·2^-23 ≈ 6e-7 leaves room for the double reference's own rounding.
constexpr double kRelBound = 5.0 / (1 << 23);

struct Case {
  const char* name;
  float log_mag_range;
  float phase_range;
};

// Runs PolarToRect on every SIMD target this binary was built for and the
// CPU supports, over lengths that exercise the partial last vector and
// unaligned pointers, against a double-precision reference.
TEST(PolarToRect, MatchesDoubleOnEveryTarget) {
  const Case cases[] = {
      {"detok range", 6.0f, 5.0f},  // the detokenizer head: |logA| < 5.2, |φ| < 4.8
      {"wide phase", 20.0f, 1000.0f},
      {"phase near hwy limit", 1.0f, 38999.0f},
  };
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    for (const Case& c : cases) {
      std::mt19937 rng(42);
      std::uniform_real_distribution<float> lm_dist(-c.log_mag_range, c.log_mag_range);
      std::uniform_real_distribution<float> ph_dist(-c.phase_range, c.phase_range);
      double worst = 0.0;
      for (size_t n : {1, 3, 7, 8, 15, 16, 17, 33, 641}) {
        for (size_t misalign : {0, 1, 3}) {
          std::vector<float> lm(n + misalign), ph(n + misalign), re(n + misalign), im(n + misalign);
          for (size_t k = 0; k < n; ++k) {
            lm[misalign + k] = lm_dist(rng);
            ph[misalign + k] = ph_dist(rng);
          }
          PolarToRect(lm.data() + misalign, ph.data() + misalign, n, re.data() + misalign,
                      im.data() + misalign);
          for (size_t k = misalign; k < n + misalign; ++k) {
            const double mag = std::exp(static_cast<double>(lm[k]));
            const double err_re = std::abs(re[k] - mag * std::cos(static_cast<double>(ph[k])));
            const double err_im = std::abs(im[k] - mag * std::sin(static_cast<double>(ph[k])));
            worst = std::max(worst, std::max(err_re, err_im) / mag);
            ASSERT_LE(err_re, kRelBound * mag) << hwy::TargetName(target) << " " << c.name << " k=" << k;
            ASSERT_LE(err_im, kRelBound * mag) << hwy::TargetName(target) << " " << c.name << " k=" << k;
          }
        }
      }
      std::printf("%-8s %-22s max |ΔS|/|S| = %.3g (bound %.3g)\n", hwy::TargetName(target), c.name, worst,
                  kRelBound);
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Inputs outside hwy's valid ranges go through the scalar reference, so the
// result equals it exactly (including inf for log_mag > 88.72, like torch);
// NaN in gives NaN out.
TEST(PolarToRect, OutOfRangeFallsBackToReference) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<float, float>> odd = {
      {90.0f, 0.5f}, {1.0f, 1e5f}, {1.0f, -4e4f}, {nan, 0.0f}, {0.0f, nan}};
  for (auto [bad_lm, bad_ph] : odd) {
    std::vector<float> lm(20, 0.25f), ph(20, 1.0f), re(20), im(20), ref_re(20), ref_im(20);
    lm[13] = bad_lm;
    ph[13] = bad_ph;
    PolarToRect(lm.data(), ph.data(), lm.size(), re.data(), im.data());
    PolarToRectRef(lm.data(), ph.data(), lm.size(), ref_re.data(), ref_im.data());
    for (size_t k = 0; k < lm.size(); ++k) {
      // Bitwise equality, except that a NaN only has to stay a NaN (its
      // payload and sign depend on the instruction that made it).
      for (auto [got, want] : {std::pair{re[k], ref_re[k]}, std::pair{im[k], ref_im[k]}}) {
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << bad_lm << " " << bad_ph << " k=" << k;
        } else {
          EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << bad_lm << " " << bad_ph << " k=" << k;
        }
      }
    }
  }
  float lm = 90.0f, ph = 0.5f, re, im;
  PolarToRect(&lm, &ph, 1, &re, &im);
  EXPECT_TRUE(std::isinf(re));
}

}  // namespace
}  // namespace lfmvox::dsp
