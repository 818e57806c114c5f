// Every nn_ops.h SIMD kernel against its scalar reference, on every compiled
// Highway target this CPU supports, over many sizes and misaligned pointers.
// As in ops_test.cc: exact kernels (and convolutions fed small integers, whose
// products and partial sums are integers below 2^24, exact in any order) must
// match bit for bit; the rest within bounds derived from the operations, with
// u = 2^-24 the unit roundoff and ε = 2u. The references work in double, so
// their own error is negligible next to these bounds.
#include "ops/nn_ops.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace lfmvox::ops {
namespace {

constexpr float kEps = std::numeric_limits<float>::epsilon();  // 2^-23

// Sizes around every vector width (4, 8, 16 lanes) and a few larger ones.
std::vector<size_t> Sizes() {
  std::vector<size_t> s;
  for (size_t n = 1; n <= 40; ++n) s.push_back(n);
  for (size_t n : {63, 64, 65, 127, 512, 1000, 2051}) s.push_back(n);
  return s;
}

using Buf = testing::Buf<float>;
using testing::ForEachTarget;
using testing::Rng;
using testing::SameBits;

// ---------------------------------------------------------------------------
// LayerNorm

TEST(LayerNorm, BoundedEveryTarget) {
  ForEachTarget([&] {
    Rng rng(1);
    for (size_t n : Sizes()) {
      Buf x(n, n % 3), g(n, 1), b(n, 2), y(n, 3);
      rng.FillNormal(x.begin(), x.end(), 3.0f);
      for (size_t i = 0; i < n; ++i) x[i] += 5.0f;  // a mean far from 0
      rng.FillNormal(g.begin(), g.end());
      rng.FillNormal(b.begin(), b.end());
      std::vector<float> want(n);
      ref::LayerNorm(x.p, g.p, b.p, n, 1e-5f, want.data());
      LayerNorm(x.p, g.p, b.p, n, 1e-5f, y.p);
      // The double sums differ only in order (~n·2^-53 relative), which can
      // move the f32-rounded mean m and rstd r by one ulp each; after that the
      // operations are the reference's. A one-ulp change of m shifts x − m by
      // ≤ ε|m|, of r scales by ≤ ε: |Δy| ≤ |γ|·r·(ε|m| + 2ε|x − m|) + ε|y|.
      double sum = 0.0, ss = 0.0;
      for (size_t i = 0; i < n; ++i) sum += x[i];
      const double m = sum / n;
      for (size_t i = 0; i < n; ++i) ss += (x[i] - m) * (x[i] - m);
      const double r = 1.0 / std::sqrt(ss / n + 1e-5);
      for (size_t i = 0; i < n; ++i) {
        const double tol =
            std::abs(g[i]) * r * kEps * (std::abs(m) + 2 * std::abs(x[i] - m)) + kEps * std::abs(want[i]);
        ASSERT_LE(std::abs(double{y[i]} - want[i]), tol) << "n=" << n << " i=" << i;
      }
      LayerNorm(x.p, g.p, b.p, n, 1e-5f, x.p);  // in place
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(SameBits(x[i], y[i])) << "in place n=" << n;
    }
  });
}

TEST(LayerNorm, ConstantRowGivesBeta) {
  ForEachTarget([&] {
    std::vector<float> x(37, 2.5f), g(37, 3.0f), b(37), y(37);
    for (size_t i = 0; i < b.size(); ++i) b[i] = 0.25f * static_cast<float>(i);
    LayerNorm(x.data(), g.data(), b.data(), x.size(), 1e-5f, y.data());
    for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], b[i]);  // x − mean is exactly 0
  });
}

// ---------------------------------------------------------------------------
// Activations

// |port − ref| for Gelu at x, derived: erf's argument x·√½ rounds (≤ u·|x|/√2,
// and erf' ≤ 2/√π: ≤ ε|x|/2 in erf, and erf saturates beyond |x| = 6); the
// rational erf is within 4e-7 of erf (a dense sweep of its f32 evaluation
// peaks at 3.8e-7, near the clamp at ±4); 1 + erf rounds (≤ 2ε); the product
// 0.5·x·(…) rounds twice (≤ 2u relative of y).
double GeluTol(float x, float want) {
  const double ax = std::abs(double{x});
  return 0.5 * ax * (4e-7 + kEps * std::min(ax, 6.0) / 2 + 2 * kEps) + kEps * std::abs(want);
}

TEST(Gelu, BoundedEveryTarget) {
  ForEachTarget([&] {
    Rng rng(2);
    const float extremes[] = {0.0f,  -0.0f, 1e-30f, -1e-30f, 3.9f,   -3.9f, 4.0f,
                              -4.0f, 4.1f,  -4.1f,  10.0f,   -10.0f, 1e30f, -1e30f};
    for (size_t n : Sizes()) {
      Buf x(n, n % 4), y(n, 1);
      rng.FillNormal(x.begin(), x.end(), 2.0f);
      for (size_t i = 0; i < n; i += 5) x[i] = extremes[(i / 5) % std::size(extremes)];
      std::vector<float> want(n);
      ref::Gelu(x.p, want.data(), n);
      Gelu(x.p, y.p, n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_LE(std::abs(double{y[i]} - want[i]), GeluTol(x[i], want[i])) << "n=" << n << " x=" << x[i];
      }
      Gelu(x.p, x.p, n);  // in place
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(SameBits(x[i], y[i])) << "in place n=" << n;
    }
    // A dense sweep over the range where erf is not saturated.
    const size_t n = 100001;
    std::vector<float> x(n), y(n), want(n);
    for (size_t i = 0; i < n; ++i) x[i] = -8.0f + 16.0f * static_cast<float>(i) / (n - 1);
    ref::Gelu(x.data(), want.data(), n);
    Gelu(x.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_LE(std::abs(double{y[i]} - want[i]), GeluTol(x[i], want[i])) << "x=" << x[i];
    }
  });
}

// Sigmoid-based kernels: e = exp(−|b|) within 1 ulp (Highway's bound), then
// 1 + e, a divide and one or two products each round once: < 8ε relative.
// Where e^b is below FLT_MIN (b < −87.3) the result is < 2e-36·|a| and flushing
// it is allowed.
TEST(SiluGlu, BoundedEveryTarget) {
  ForEachTarget([&] {
    Rng rng(3);
    const float extremes[] = {0.0f,   -0.0f, 1e-30f, -1e-30f, 20.0f,   -20.0f, 88.0f,
                              -88.0f, 90.0f, -90.0f, 200.0f,  -200.0f, 1e30f,  -1e30f};
    for (size_t n : Sizes()) {
      Buf a(n, n % 4), b(n, 1), y(n, 3);
      rng.FillNormal(a.begin(), a.end(), 4.0f);
      rng.FillNormal(b.begin(), b.end(), 4.0f);
      for (size_t i = 0; i < n; i += 5) b[i] = extremes[(i / 5) % std::size(extremes)];
      std::vector<float> want(n);
      ref::Silu(b.p, want.data(), n);
      Silu(b.p, y.p, n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_LE(std::abs(double{y[i]} - want[i]), 8 * kEps * std::abs(want[i]) + 2e-36 * std::abs(b[i]))
            << "Silu n=" << n << " x=" << b[i];
      }
      ref::Glu(a.p, b.p, want.data(), n);
      Glu(a.p, b.p, y.p, n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_LE(std::abs(double{y[i]} - want[i]), 8 * kEps * std::abs(want[i]) + 2e-36 * std::abs(a[i]))
            << "Glu n=" << n << " b=" << b[i];
      }
      Glu(a.p, b.p, b.p, n);  // out aliases the gate
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(SameBits(b[i], y[i])) << "Glu in place n=" << n;
    }
  });
}

// ELU: the negative side's e^x − 1 (nn_ops.cc, Expm1NonPositive) is within 0.87 ulp of it over every 7th
// float in [−90, −1e−6], and the reference rounds expm1 in double to f32 (half an ulp), so
// |y − want| ≤ 1.5 ulp ≤ 1.5ε·|want|; x > 0 passes through exactly.
TEST(Elu, BoundedEveryTarget) {
  ForEachTarget([&] {
    Rng rng(9);
    const float extremes[] = {0.0f,   -0.0f,  1e-30f,  -1e-30f, -1e-7f, 20.0f,
                              -20.0f, -88.0f, -104.0f, -1e30f,  1e30f};
    for (size_t n : Sizes()) {
      Buf x(n, n % 4), y(n, 3);
      rng.FillNormal(x.begin(), x.end(), 3.0f);
      for (size_t i = 0; i < n; i += 5) x[i] = extremes[(i / 5) % std::size(extremes)];
      std::vector<float> want(n);
      ref::Elu(x.p, want.data(), n);
      Elu(x.p, y.p, n);
      for (size_t i = 0; i < n; ++i) {
        if (x[i] > 0) {
          ASSERT_TRUE(SameBits(y[i], x[i])) << "Elu n=" << n << " x=" << x[i];
        } else {
          ASSERT_LE(std::abs(double{y[i]} - want[i]), 1.5 * kEps * std::abs(want[i]))
              << "Elu n=" << n << " x=" << x[i];
        }
      }
      Elu(x.p, x.p, n);  // in place
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(SameBits(x[i], y[i])) << "Elu in place n=" << n;
    }
  });
}

TEST(ReluScaleShift, BitExactEveryTarget) {
  ForEachTarget([&] {
    Rng rng(4);
    for (size_t n : Sizes()) {
      Buf x(n, n % 4), s(n, 1), t(n, 2), y(n, 3);
      rng.FillNormal(x.begin(), x.end());
      rng.FillNormal(s.begin(), s.end());
      rng.FillNormal(t.begin(), t.end());
      std::vector<float> want(n);
      ref::Relu(x.p, want.data(), n);
      Relu(x.p, y.p, n);
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(SameBits(y[i], want[i])) << "Relu n=" << n << " i=" << i;
      ref::ScaleShift(x.p, s.p, t.p, want.data(), n);
      ScaleShift(x.p, s.p, t.p, y.p, n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_TRUE(SameBits(y[i], want[i])) << "ScaleShift n=" << n << " i=" << i;
      ScaleShift(x.p, s.p, t.p, x.p, n);  // in place
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(SameBits(x[i], want[i])) << "ScaleShift in place n=" << n;
    }
  });
}

// ---------------------------------------------------------------------------
// Convolutions

// Σ|terms| of one output: the scale of its rounding error.
double ConvMagnitude(const std::vector<double>& terms) {
  double m = 0.0;
  for (double v : terms) m += std::abs(v);
  return m;
}

TEST(DepthwiseConv1d, ExactOnIntegersAndBoundedEveryTarget) {
  ForEachTarget([&] {
    Rng rng(5);
    struct Shape {
      size_t t, c, k, pad;
    };
    std::vector<Shape> shapes;
    for (size_t c : {1, 3, 4, 7, 8, 16, 17, 33, 64}) {
      for (size_t t : {1, 2, 4, 9, 10, 23}) {
        for (size_t k : {1, 3, 9}) shapes.push_back({t, c, k, (k - 1) / 2});
      }
      shapes.push_back({12, c, 4, 0});    // causal-like, left pad 0
      shapes.push_back({12, c, 5, 4});    // pad k − 1
      shapes.push_back({40, c, 33, 16});  // beyond the SIMD tap limit: the reference path
    }
    for (const Shape& s : shapes) {
      for (bool integers : {true, false}) {
        for (bool with_bias : {false, true}) {
          const size_t ldx = s.c + 3, ldy = s.c + 1;
          Buf x(s.t * ldx, s.c % 4), w(s.c * s.k, 1), b(s.c, 2), y(s.t * ldy, 3);
          rng.Fill(x.begin(), x.end(), integers);
          rng.Fill(w.begin(), w.end(), integers);
          rng.Fill(b.begin(), b.end(), integers);
          const float* bias = with_bias ? b.p : nullptr;
          std::vector<float> want(s.t * ldy, 0.0f);
          std::fill(y.begin(), y.end(), 0.0f);
          ref::DepthwiseConv1d(x.p, s.t, ldx, s.c, w.p, s.k, s.pad, bias, want.data(), ldy);
          DepthwiseConv1d(x.p, s.t, ldx, s.c, w.p, s.k, s.pad, bias, y.p, ldy);
          for (size_t r = 0; r < s.t; ++r) {
            for (size_t ch = 0; ch < s.c; ++ch) {
              const size_t i = r * ldy + ch;
              if (integers) {
                ASSERT_TRUE(SameBits(y[i], want[i]))
                    << "t=" << s.t << " c=" << s.c << " k=" << s.k << " r=" << r;
                continue;
              }
              // ≤ k fused multiply-adds in one chain plus the bias: each term
              // passes through ≤ k + 1 roundings.
              std::vector<double> terms;
              for (size_t j = 0; j < s.k; ++j) {
                if (r + j >= s.pad && r + j - s.pad < s.t) {
                  terms.push_back(double{w[ch * s.k + j]} * x[(r + j - s.pad) * ldx + ch]);
                }
              }
              if (bias) terms.push_back(bias[ch]);
              ASSERT_LE(std::abs(double{y[i]} - want[i]), (s.k + 1) * kEps * ConvMagnitude(terms))
                  << "t=" << s.t << " c=" << s.c << " k=" << s.k << " r=" << r;
            }
            // Row padding between ldy and c is never written.
            for (size_t ch = s.c; ch < ldy; ++ch) ASSERT_EQ(y[r * ldy + ch], 0.0f);
          }
        }
      }
    }
  });
}

TEST(Conv3x3Stride2Row, ExactOnIntegersAndBoundedEveryTarget) {
  ForEachTarget([&] {
    Rng rng(6);
    for (size_t width : {1, 2, 3, 4, 5, 16, 17, 33, 64}) {
      for (size_t c : {1, 3, 4, 8, 13, 16, 32, 35}) {
        for (size_t cs : {0, 1}) {
          for (int missing = -1; missing < 3; ++missing) {  // which row is padding (−1: none)
            for (bool integers : {true, false}) {
              // Input rows: channels last (pixel stride c + 2) or one channel
              // (pixel stride 3, as a transposed matrix is read).
              const size_t ps = cs ? c + 2 : 3;
              Buf in(3 * width * ps, width % 4), w(9 * c, 1), b(c, 2);
              rng.Fill(in.begin(), in.end(), integers);
              rng.Fill(w.begin(), w.end(), integers);
              rng.Fill(b.begin(), b.end(), integers);
              const float* rows[3];
              for (size_t a = 0; a < 3; ++a) {
                rows[a] = static_cast<int>(a) == missing ? nullptr : in.p + a * width * ps;
              }
              const size_t ow = (width + 1) / 2;
              std::vector<float> want(ow * c);
              Buf y(ow * c, c % 4);
              ref::Conv3x3Stride2Row(rows, width, ps, cs, c, w.p, b.p, want.data());
              Conv3x3Stride2Row(rows, width, ps, cs, c, w.p, b.p, y.p);
              for (size_t j = 0; j < ow; ++j) {
                for (size_t ch = 0; ch < c; ++ch) {
                  const size_t i = j * c + ch;
                  if (integers) {
                    ASSERT_TRUE(SameBits(y[i], want[i])) << "w=" << width << " c=" << c << " cs=" << cs;
                    continue;
                  }
                  // ≤ 9 fused multiply-adds in one chain plus the bias.
                  std::vector<double> terms{b[ch]};
                  for (size_t a = 0; a < 3; ++a) {
                    for (size_t s = 0; s < 3; ++s) {
                      const size_t p = 2 * j + s;
                      if (rows[a] == nullptr || p == 0 || p > width) continue;
                      terms.push_back(double{w[ch * 9 + 3 * a + s]} * rows[a][(p - 1) * ps + ch * cs]);
                    }
                  }
                  ASSERT_LE(std::abs(double{y[i]} - want[i]), 10 * kEps * ConvMagnitude(terms))
                      << "w=" << width << " c=" << c << " cs=" << cs;
                }
              }
            }
          }
        }
      }
    }
  });
}

// A hand-computed case: a 3×4 single-channel image, one filter of ones, no
// bias. Output pixel j sums input pixels 2j−1 … 2j+1 of the three rows.
TEST(Conv3x3Stride2Row, HandComputed) {
  const float img[3][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}, {100, 200, 300, 400}};
  const float* rows[3] = {img[0], img[1], img[2]};
  const float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  float y[2];
  Conv3x3Stride2Row(rows, 4, 1, 0, 1, ones, nullptr, y);
  EXPECT_EQ(y[0], 111.0f * (1 + 2));      // pixels 0, 1 (−1 is padding)
  EXPECT_EQ(y[1], 111.0f * (2 + 3 + 4));  // pixels 1, 2, 3
  rows[0] = nullptr;                      // top padding row
  Conv3x3Stride2Row(rows, 4, 1, 0, 1, ones, nullptr, y);
  EXPECT_EQ(y[0], 110.0f * 3);
}

}  // namespace
}  // namespace lfmvox::ops
