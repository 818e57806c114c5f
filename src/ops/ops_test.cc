// Every SIMD kernel against its scalar reference, on every compiled Highway
// target this CPU supports, over many sizes and misaligned pointers.
//
// Two kinds of check:
//  * exact: element-wise kernels, and dot-product kernels fed small integers
//    (every product and partial sum is an integer below 2^24, hence exact in
//    f32 in any order): SIMD must equal the reference bit for bit, which
//    catches any wrong index, lost remainder or misread element;
//  * rounding: random real data, |simd − ref| within a bound derived from the
//    operations performed (stated next to each check). The references sum in
//    double, so their own error is negligible next to the f32 bounds.
// u = ε/2 = 2^-24 is the unit roundoff; a sum whose terms each pass through at
// most h roundings has error ≤ γ_h·Σ|terms| with γ_h = h·u/(1 − h·u) < h·ε.
#include "ops/ops.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/aligned.h"
#include "ops/matmul_kernels.h"
#include "ops/ops_test_util.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "threading/thread_team.h"

namespace lfmvox::ops {
namespace {

using testing::Buf;
using testing::ForEachTarget;
using testing::Rng;
using testing::SameBits;

constexpr float kEps = std::numeric_limits<float>::epsilon();  // 2^-23
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Sizes around every vector width (4, 8, 16 lanes) and a few large ones that
// are not multiples of any.
std::vector<size_t> Sizes() {
  std::vector<size_t> s;
  for (size_t n = 1; n <= 70; ++n) s.push_back(n);
  for (size_t n : {127, 128, 129, 1000, 1282, 4099}) s.push_back(n);
  return s;
}

// The largest |error| / bound a test met, printed when it ends so that the
// margin of each bound can be read off the log.
class Margin {
 public:
  explicit Margin(const char* what) : what_(what) {}
  ~Margin() { std::printf("[ margin   ] %s: worst |simd - ref| / bound = %.3g\n", what_, worst_); }
  Margin(const Margin&) = delete;
  Margin& operator=(const Margin&) = delete;
  // Whether err ≤ bound.
  bool Check(double err, double bound) {
    if (bound > 0) worst_ = std::max(worst_, err / bound);
    return err <= bound;
  }

 private:
  const char* what_;
  double worst_ = 0.0;
};

// ---------------------------------------------------------------------------
// MatMul

// The formats whose elements are exact f32 numbers one by one (the block
// formats have their own tests below).
constexpr WeightFormat kPlainFormats[] = {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16};

// X[m, k] (rows ldx apart), W[n, k] in every weight format (same values:
// bf16-rounded numbers, those below f16's normal range set to 0, so that f32,
// bf16 and f16 all hold them exactly), bias[n].
struct MatMulCase {
  MatMulCase(size_t m, size_t n, size_t k, size_t off, bool integers, Rng& rng)
      : m(m),
        n(n),
        k(k),
        ldx(k + off),
        x(m * ldx, off),
        w16(n * k, off % 2),
        wh(n * k, (off + 1) % 2),
        w32(n * k, off),
        bias(n, off) {
    for (size_t i = 0; i < m * ldx; ++i) x[i] = integers ? rng.SmallInt() : rng.Normal();
    for (size_t i = 0; i < n * k; ++i) {
      float v = Bf16ToF32(F32ToBf16(integers ? rng.SmallInt() : rng.Normal(0.05f)));
      if (std::abs(v) < 0x1p-14f) v = 0.0f;
      w16[i] = F32ToBf16(v);
      wh[i] = F32ToF16(v);
      w32[i] = v;
    }
    for (size_t j = 0; j < n; ++j) bias[j] = integers ? rng.SmallInt() : rng.Normal();
  }
  Weight W(WeightFormat f) const {
    const void* p = f == WeightFormat::kBF16  ? static_cast<const void*>(w16.p)
                    : f == WeightFormat::kF16 ? static_cast<const void*>(wh.p)
                                              : w32.p;
    return Weight::Dense(f, p, n, k, k);
  }
  size_t m, n, k, ldx;
  Buf<float> x;
  Buf<uint16_t> w16;  // bf16
  Buf<uint16_t> wh;   // f16
  Buf<float> w32;
  Buf<float> bias;
};

TEST(MatMul, CaseHoldsTheSameValuesInEveryFormat) {
  Rng rng(9);
  MatMulCase c(1, 7, 300, 1, /*integers=*/false, rng);
  for (size_t i = 0; i < c.n * c.k; ++i) {
    ASSERT_EQ(Bf16ToF32(c.w16[i]), c.w32[i]) << i;
    ASSERT_EQ(F16ToF32(c.wh[i]), c.w32[i]) << i;
  }
}

TEST(MatMul, ExactOnIntegersEveryTarget) {
  ThreadTeam team2(2);
  ThreadTeam team1(1);
  ForEachTarget([&] {
    Rng rng(1);
    std::vector<std::array<size_t, 3>> shapes;  // m, n, k
    for (size_t k = 1; k <= 70; ++k) {
      for (size_t m : {1, 2, 3, 4, 5, 6, 7, 13}) shapes.push_back({m, 1 + (k * 7 + m) % 19, k});
    }
    for (size_t k : {128, 513, 2051}) {
      for (size_t m : {1, 6, 8, 20}) shapes.push_back({m, 19, k});
    }
    for (const auto& [m, n, k] : shapes) {
      MatMulCase c(m, n, k, (m + k) % 4, /*integers=*/true, rng);
      for (WeightFormat t : kPlainFormats) {
        // Variants: no bias; bias; bias and W rows longer than used (ld = k, cols = k − 1).
        for (int variant = 0; variant < 3; ++variant) {
          const float* bias = variant > 0 ? c.bias.p : nullptr;
          Weight w = c.W(t);
          if (variant == 2) w.cols = k - 1;
          std::vector<float> want(m * n), got(m * n, kNaN);  // [m, n]
          ref::MatMul(c.x.p, m, c.ldx, w, bias, want.data(), n);
          MatMul(c.x.p, m, c.ldx, w, bias, got.data(), n, (m + k) % 2 ? team2 : team1);
          for (size_t i = 0; i < m * n; ++i) {
            ASSERT_TRUE(SameBits(got[i], want[i]))
                << WeightFormatName(t) << " variant " << variant << " m=" << m << " n=" << n << " k=" << k
                << " at " << i << ": " << got[i] << " vs " << want[i];
          }
        }
      }
    }
  });
}

TEST(MatMul, RoundingBoundEveryTarget) {
  ThreadTeam team(2);
  Margin margin("MatMul");
  ForEachTarget([&] {
    Rng rng(2);
    for (size_t k : {7, 64, 511, 1282, 2304}) {
      for (size_t m : {1, 6, 9}) {
        const size_t n = 13;
        MatMulCase c(m, n, k, 1, /*integers=*/false, rng);
        for (WeightFormat t : kPlainFormats) {
          std::vector<float> want(m * n), got(m * n);  // [m, n]
          ref::MatMul(c.x.p, m, c.ldx, c.W(t), c.bias.p, want.data(), n);
          MatMul(c.x.p, m, c.ldx, c.W(t), c.bias.p, got.data(), n, team);
          for (size_t i = 0; i < m; ++i) {
            for (size_t j = 0; j < n; ++j) {
              // Each product passes through ≤ ceil(k/N) FMA roundings, log2(N)
              // lane-sum roundings and the bias add: h ≤ k + 2 for any N ≥ 1.
              double mag = std::abs(c.bias[j]);
              for (size_t q = 0; q < k; ++q) mag += std::abs(double{c.x[i * c.ldx + q]} * c.w32[j * k + q]);
              const double bound = (k + 2) * kEps * mag;
              ASSERT_TRUE(margin.Check(std::abs(double{got[i * n + j]} - want[i * n + j]), bound))
                  << WeightFormatName(t) << " m=" << m << " k=" << k << " (" << i << "," << j << ")";
            }
          }
        }
      }
    }
  });
}

// The determinism contract: a Y element is the same bits whatever m, the
// row's position in a tile or an L2 row block, the team size, the split of n
// and the alignment of X. k = 8197 makes the L2 row blocks (384 KiB of X)
// 6 rows tall, k = 1282 makes them 72 rows; both have a remainder chunk.
// k = 1000 (≤ 1024) takes AVX-512's X-tile-major sweep instead: 8-row tiles
// for bf16 and f16 (37 = 4·8 + 5), n = 300 two of its W blocks (262 rows of
// 2000 bytes in 512 KiB) and a remainder of the 3-row W groups.
TEST(MatMul, DeterministicAcrossChunkingEveryTarget) {
  ThreadTeam team1(1), team2(2);
  ForEachTarget([&] {
    Rng rng(3);
    for (const auto& shape : {std::pair<size_t, size_t>{1282, 21}, {8197, 21}, {1000, 300}}) {
      const size_t k = shape.first, n = shape.second;  // plain locals: clang 14 cannot capture bindings
      const size_t m = 37;
      MatMulCase c(m, n, k, 0, /*integers=*/false, rng);
      for (WeightFormat t : kPlainFormats) {
        const Weight w = c.W(t);
        std::vector<float> full(m * n);  // [m, n]: all rows at once, 2 threads
        MatMul(c.x.p, m, c.ldx, w, c.bias.p, full.data(), n, team2);
        std::vector<float> part(m * n, std::numeric_limits<float>::quiet_NaN());  // [m, n]
        auto expect_same = [&](size_t row0, size_t rows, size_t col0, size_t cols, const char* what) {
          for (size_t i = row0; i < row0 + rows; ++i) {
            for (size_t j = col0; j < col0 + cols; ++j) {
              ASSERT_TRUE(SameBits(part[i * n + j], full[i * n + j]))
                  << what << " " << WeightFormatName(t) << " k=" << k << " (" << i << "," << j << ")";
            }
          }
          // The next way starts from NaN: an output it leaves unwritten fails.
          std::fill(part.begin(), part.end(), std::numeric_limits<float>::quiet_NaN());
        };
        // One row at a time, one thread, from a copy of the row at another misalignment.
        Buf<float> row(k, 3);
        for (size_t i = 0; i < m; ++i) {
          std::copy(c.x.p + i * c.ldx, c.x.p + i * c.ldx + k, row.p);
          MatMul(row.p, 1, k, w, c.bias.p, part.data() + i * n, n, team1);
        }
        expect_same(0, m, 0, n, "m=1");
        // Chunks of 4 to 7 and of 13, so rows sit at every tile position.
        for (size_t chunk : {4, 5, 6, 7, 13}) {
          for (size_t i0 = 0; i0 < m; i0 += chunk) {
            const size_t rows = std::min(chunk, m - i0);
            MatMul(c.x.p + i0 * c.ldx, rows, c.ldx, w, c.bias.p, part.data() + i0 * n, n,
                   chunk % 2 ? team1 : team2);
          }
          expect_same(0, m, 0, n, ("chunk " + std::to_string(chunk)).c_str());
        }
        // A sub-range of W rows (another split of n) and of X rows.
        Weight sub = w;
        sub.rows = n - 5;
        sub.data = w.row(5);
        MatMul(c.x.p + 3 * c.ldx, m - 3, c.ldx, sub, c.bias.p + 5, part.data() + 3 * n + 5, n, team2);
        expect_same(3, m - 3, 5, n - 5, "W rows 5..");
      }
    }
  });
}

// ---------------------------------------------------------------------------
// BF16 W in WeightLayout::kTiles (AMX where the CPU has it, else unpacked).

// A MatMulCase's BF16 W repacked into kTiles (64-byte aligned).
struct TilesCopy {
  explicit TilesCopy(const Weight& w)
      : bytes(TilesLayoutBytes(w.rows, w.cols)), view(RepackTiles(w, bytes.data())) {}
  AlignedBuffer<uint8_t> bytes;
  Weight view;
};

// Runs body(amx) with the AMX kernel on (where this CPU has it) and off.
template <class F>
void ForEachTilesKernel(F body) {
  const bool amx = PrefersTilesLayout(WeightFormat::kBF16);
  std::printf("[ tiles    ] AMX %s\n",
              amx ? "on this CPU: both kernels run" : "not on this CPU: unpacked only");
  for (bool on : {true, false}) {
    if (on && !amx) continue;
    internal::SetTilesAmxForTest(on);
    SCOPED_TRACE(on ? "AMX" : "unpacked");
    body(on);
  }
  internal::SetTilesAmxForTest(true);
}

// tensor/matrix.h's definition of kTiles, element by element, and the way back.
TEST(MatMulTiles, LayoutIsItsDefinitionAndRoundTrips) {
  Rng rng(21);
  for (const auto& [n, k] :
       {std::pair<size_t, size_t>{1, 1}, {16, 32}, {17, 33}, {64, 64}, {65, 100}, {130, 31}, {200, 70}}) {
    MatMulCase c(1, n, k, 0, false, rng);
    const TilesCopy t(c.W(WeightFormat::kBF16));
    const size_t kc = (k + 31) / 32, tiles = (n + 15) / 16;
    ASSERT_EQ(t.bytes.size(), tiles * 16 * kc * 32 * 2);
    EXPECT_EQ(t.view.layout, WeightLayout::kTiles);
    const auto* e = reinterpret_cast<const uint16_t*>(t.bytes.data());
    std::vector<bool> seen(t.bytes.size() / 2, false);
    for (size_t r = 0; r < n; ++r) {
      const size_t g = r / 64, tg = std::min<size_t>(4, tiles - 4 * g);
      for (size_t q = 0; q < k; ++q) {
        const size_t tile = 4 * kc * g + tg * (q / 32) + r % 64 / 16;
        const size_t at = tile * 512 + 32 * (q % 32 / 2) + 2 * (r % 16) + q % 2;
        ASSERT_EQ(e[at], c.w16[r * k + q]) << "n=" << n << " k=" << k << " (" << r << "," << q << ")";
        seen[at] = true;
      }
      std::vector<uint8_t> buf(2 * k);
      const uint8_t* row = RowAsBlocks(t.view, r, buf.data());
      ASSERT_EQ(std::memcmp(row, c.w16.p + r * k, 2 * k), 0) << "row " << r;
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_TRUE(seen[i] || e[i] == 0) << "padding " << i;
  }
}

// Small integers: every part, product and partial sum is exact, so any order gives the reference's bits.
TEST(MatMulTiles, ExactOnIntegers) {
  ThreadTeam team1(1), team2(2);
  ForEachTilesKernel([&](bool) {
    Rng rng(22);
    for (size_t k : {1, 31, 32, 33, 100, 1025}) {
      for (size_t m : {1, 4, 12, 16, 17, 33}) {
        for (size_t n : {1, 15, 16, 17, 63, 65, 130}) {
          MatMulCase c(m, n, k, (m + n) % 3, /*integers=*/true, rng);
          const TilesCopy t(c.W(WeightFormat::kBF16));
          for (const float* bias :
               {static_cast<const float*>(nullptr), static_cast<const float*>(c.bias.p)}) {
            std::vector<float> want(m * n), got(m * n, kNaN);
            ref::MatMul(c.x.p, m, c.ldx, c.W(WeightFormat::kBF16), bias, want.data(), n);
            MatMul(c.x.p, m, c.ldx, t.view, bias, got.data(), n, (m + n) % 2 ? team2 : team1);
            for (size_t i = 0; i < m * n; ++i) {
              ASSERT_TRUE(SameBits(got[i], want[i])) << "m=" << m << " n=" << n << " k=" << k << " at " << i
                                                     << ": " << got[i] << " vs " << want[i];
            }
          }
        }
      }
    }
  });
}

// W rows with one nonzero weight, ±2^e, and X with all 24 bits of its significands: y = bias + x·w
// exactly in any order, but only if the three parts of x are all there and in the right place.
TEST(MatMulTiles, ExactOnFullSignificands) {
  ThreadTeam team(2);
  ForEachTilesKernel([&](bool) {
    Rng rng(25);
    for (const auto& [m, n, k] : {std::array<size_t, 3>{1, 17, 33}, {13, 70, 100}, {20, 64, 1025}}) {
      MatMulCase c(m, n, k, 1, /*integers=*/false, rng);
      std::fill(c.w16.begin(), c.w16.end(), uint16_t{0});
      std::vector<size_t> at(n);
      for (size_t j = 0; j < n; ++j) {
        at[j] = rng.Index(k);
        c.w16[j * k + at[j]] =
            F32ToBf16(std::ldexp(rng.Index(2) ? 1.0f : -1.0f, static_cast<int>(rng.Index(9)) - 4));
      }
      const TilesCopy t(c.W(WeightFormat::kBF16));
      std::vector<float> got(m * n, kNaN);
      MatMul(c.x.p, m, c.ldx, t.view, nullptr, got.data(), n, team);
      for (size_t i = 0; i < m; ++i) {
        for (size_t j = 0; j < n; ++j) {
          const float want = c.x[i * c.ldx + at[j]] * Bf16ToF32(c.w16[j * k + at[j]]);
          ASSERT_TRUE(SameBits(got[i * n + j], want)) << "m=" << m << " (" << i << "," << j << ")";
        }
      }
    }
  });
}

// MatMulShared gives each output the bits MatMul gives it: kTiles W (one split of X, one pass of the
// team over every W's groups) and stored layouts (one MatMul each), outputs of 1 to 3 groups of rows.
TEST(MatMulShared, EachOutputAsMatMulGivesIt) {
  ThreadTeam team(2);
  ForEachTilesKernel([&](bool) {
    Rng rng(26);
    for (size_t m : {1, 4, 12, 20}) {
      const size_t k = 300;
      MatMulCase a(m, 130, k, 1, false, rng), b(m, 16, k, 1, false, rng), c(m, 70, k, 1, false, rng);
      const TilesCopy ta(a.W(WeightFormat::kBF16)), tb(b.W(WeightFormat::kBF16)),
          tc(c.W(WeightFormat::kBF16));
      for (bool tiles : {true, false}) {
        const Weight wa = tiles ? ta.view : a.W(WeightFormat::kBF16);
        const Weight wb = tiles ? tb.view : b.W(WeightFormat::kBF16);
        const Weight wc = tiles ? tc.view : c.W(WeightFormat::kF32);
        std::vector<float> ya(m * 130, kNaN), yb(m * 20, kNaN), yc(m * 70, kNaN);
        const MatMulOut outs[] = {
            {&wa, a.bias.p, ya.data(), 130}, {&wb, nullptr, yb.data(), 20}, {&wc, c.bias.p, yc.data(), 70}};
        MatMulShared(a.x.p, m, a.ldx, outs, team);
        for (const MatMulOut& o : outs) {
          std::vector<float> want(m * o.ldy, kNaN);
          MatMul(a.x.p, m, a.ldx, *o.w, o.bias, want.data(), o.ldy, team);
          for (size_t i = 0; i < m; ++i) {
            for (size_t j = 0; j < o.ldy; ++j) {
              if (j >= o.w->rows) {
                ASSERT_TRUE(std::isnan(o.y[i * o.ldy + j])) << "wrote past its rows at " << j;
                continue;
              }
              ASSERT_TRUE(SameBits(o.y[i * o.ldy + j], want[i * o.ldy + j]))
                  << (tiles ? "kTiles" : "stored") << " m=" << m << " n=" << o.w->rows << " (" << i << ","
                  << j << ")";
            }
          }
        }
      }
    }
  });
}

// ops.h's bound for kTiles: every product exact, h = 3·32·⌈k/32⌉ + 1 f32 roundings at most on any path
// (the unit's additions in its own order, then the bias). The unpacked kernel's bound (k + 2) is tighter.
TEST(MatMulTiles, RoundingBound) {
  ThreadTeam team(2);
  Margin margin("MatMul kTiles");
  ForEachTilesKernel([&](bool) {
    Rng rng(23);
    for (size_t k : {7, 64, 511, 1282, 2816}) {
      for (size_t m : {1, 4, 12, 13, 20}) {
        const size_t n = 70;
        MatMulCase c(m, n, k, 1, /*integers=*/false, rng);
        const TilesCopy t(c.W(WeightFormat::kBF16));
        std::vector<float> want(m * n), got(m * n);
        ref::MatMul(c.x.p, m, c.ldx, c.W(WeightFormat::kBF16), c.bias.p, want.data(), n);
        MatMul(c.x.p, m, c.ldx, t.view, c.bias.p, got.data(), n, team);
        const double h = 3.0 * 32 * ((k + 31) / 32) + 1;
        for (size_t i = 0; i < m; ++i) {
          for (size_t j = 0; j < n; ++j) {
            double mag = std::abs(c.bias[j]);
            for (size_t q = 0; q < k; ++q) mag += std::abs(double{c.x[i * c.ldx + q]} * c.w32[j * k + q]);
            ASSERT_TRUE(margin.Check(std::abs(double{got[i * n + j]} - want[i * n + j]), h * kEps / 2 * mag))
                << "m=" << m << " k=" << k << " (" << i << "," << j << ")";
          }
        }
      }
    }
  });
}

// The determinism contract on kTiles: the same bits whatever m, the row's place in a 16-row block, the
// team and the alignment of X; AccumulateRow reads the stored values.
TEST(MatMulTiles, DeterministicAcrossChunking) {
  ThreadTeam team1(1), team2(2);
  ForEachTilesKernel([&](bool) {
    Rng rng(24);
    for (const auto& shape : {std::pair<size_t, size_t>{1000, 300}, {2051, 70}}) {
      const size_t k = shape.first, n = shape.second;  // plain locals: clang 14 cannot capture bindings
      const size_t m = 37;
      MatMulCase c(m, n, k, 0, /*integers=*/false, rng);
      const TilesCopy t(c.W(WeightFormat::kBF16));
      std::vector<float> full(m * n);
      MatMul(c.x.p, m, c.ldx, t.view, c.bias.p, full.data(), n, team2);
      std::vector<float> part(m * n, kNaN);
      auto expect_same = [&](const char* what) {
        for (size_t i = 0; i < m * n; ++i)
          ASSERT_TRUE(SameBits(part[i], full[i])) << what << " k=" << k << " at " << i;
        std::fill(part.begin(), part.end(), kNaN);
      };
      Buf<float> row(k, 3);
      for (size_t i = 0; i < m; ++i) {
        std::copy(c.x.p + i * c.ldx, c.x.p + i * c.ldx + k, row.p);
        MatMul(row.p, 1, k, t.view, c.bias.p, part.data() + i * n, n, team1);
      }
      expect_same("m=1");
      for (size_t chunk : {4, 5, 13, 16, 17}) {
        for (size_t i0 = 0; i0 < m; i0 += chunk) {
          MatMul(c.x.p + i0 * c.ldx, std::min(chunk, m - i0), c.ldx, t.view, c.bias.p, part.data() + i0 * n,
                 n, chunk % 2 ? team1 : team2);
        }
        expect_same(("chunk " + std::to_string(chunk)).c_str());
      }
      for (size_t r : {size_t{0}, n / 2, n - 1}) {
        std::vector<float> got(k, 0.5f), want(k, 0.5f);
        AccumulateRow(t.view, r, got.data());
        AccumulateRow(c.W(WeightFormat::kBF16), r, want.data());
        for (size_t q = 0; q < k; ++q) ASSERT_TRUE(SameBits(got[q], want[q])) << "row " << r << " at " << q;
      }
    }
  });
  EXPECT_FALSE(PrefersTilesLayout(WeightFormat::kF32));
  EXPECT_FALSE(PrefersTilesLayout(WeightFormat::kF16));
  EXPECT_FALSE(PrefersTilesLayout(WeightFormat::kQ8_0));
}

// W (or X) ends exactly at a page followed by an inaccessible page, as an
// mmap'd checkpoint may: the remainder path must not read past the end.
TEST(MatMul, DoesNotReadPastTheEndEveryTarget) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(mem) + page, page, PROT_NONE), 0);
  char* end = static_cast<char*>(mem) + page;
  ThreadTeam team(1);
  ForEachTarget([&] {
    for (size_t k : {1, 3, 17, 33}) {
      const size_t n = 3;
      uint16_t* w16 = reinterpret_cast<uint16_t*>(end) - n * k;
      for (size_t i = 0; i < n * k; ++i) w16[i] = F32ToBf16(1.0f);
      std::vector<float> x(k, 1.0f), y(n);
      MatMul(x.data(), 1, k, Weight::Dense(WeightFormat::kBF16, w16, n, k, k), nullptr, y.data(), n, team);
      EXPECT_EQ(y[n - 1], static_cast<float>(k));
      for (size_t i = 0; i < n * k; ++i) w16[i] = F32ToF16(-1.0f);
      MatMul(x.data(), 1, k, Weight::Dense(WeightFormat::kF16, w16, n, k, k), nullptr, y.data(), n, team);
      EXPECT_EQ(y[n - 1], -static_cast<float>(k));
      float* w32 = reinterpret_cast<float*>(end) - n * k;
      std::fill(w32, w32 + n * k, 2.0f);
      MatMul(x.data(), 1, k, Weight::Dense(WeightFormat::kF32, w32, n, k, k), nullptr, y.data(), n, team);
      EXPECT_EQ(y[n - 1], 2.0f * k);
      float* xe = reinterpret_cast<float*>(end) - k;  // X at the end instead
      std::fill(xe, xe + k, 3.0f);
      const std::vector<uint16_t> w_ones(n * k, F32ToBf16(1.0f));
      MatMul(xe, 1, k, Weight::Dense(WeightFormat::kBF16, w_ones.data(), n, k, k), nullptr, y.data(), n,
             team);
      EXPECT_EQ(y[n - 1], 3.0f * k);
      EXPECT_EQ(Dot(xe, xe, k), 9.0f * k);
    }
  });
  munmap(mem, 2 * page);
}

// Every format has its kernel TU, and a view's bytes are its rows at the
// format's row size.
TEST(MatMul, EveryFormatHasAKernelAndKnowsItsBytes) {
  // Per block of 256 elements: F32, BF16, F16, Q8_0, Q4_0, Q6_K, in enum order.
  const size_t bytes_per_256[] = {1024, 512, 512, 8 * 34, 8 * 18, 210};
  for (WeightFormat f : kAllWeightFormats) {
    SCOPED_TRACE(WeightFormatName(f));
    EXPECT_TRUE(HasMatMulKernel(f));
    const size_t e = bytes_per_256[static_cast<size_t>(f)];
    EXPECT_EQ(FormatRowBytes(f, 256), e);
    const std::vector<uint8_t> bytes(5 * 2 * e);
    const Weight w = Weight::Dense(f, bytes.data(), 5, 256, 512);
    EXPECT_EQ(w.row_bytes, 2 * e);
    EXPECT_EQ(w.bytes(), 5 * w.row_bytes);
    EXPECT_EQ(w.row(3), bytes.data() + 3 * 2 * e);
    EXPECT_EQ(FormatRowBytes(f, 37) == 0, IsBlockFormat(f));
  }
  EXPECT_EQ(Weight().bytes(), 0u);
}

// ---------------------------------------------------------------------------
// MatMul on the block formats (Q8_0, Q4_0, Q6_K): the integer path.

constexpr WeightFormat kBlockFormats[] = {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ6_K};

// X[m, k] (rows ldx apart, misaligned), W[n, k] quantized from random values
// at a row stride `pad` bytes longer than a row and misaligned by off bytes,
// its exact dequantization wf[n, k], bias[n].
struct QuantCase {
  QuantCase(WeightFormat f, size_t m, size_t n, size_t k, size_t off, size_t pad, Rng& rng)
      : f(f),
        m(m),
        n(n),
        k(k),
        ldx(k + off),
        rb(FormatRowBytes(f, k) + pad),
        x(m * ldx, off),
        wq(n * rb, off * 3 + 1),
        wf(n * k),
        bias(n, off) {
    for (size_t i = 0; i < m * ldx; ++i) x[i] = rng.Normal();
    std::vector<float> w(n * k);
    for (float& v : w) v = rng.Normal(0.05f);
    if (n > 2)
      std::fill(w.begin() + 2 * k, w.begin() + 2 * k + std::min<size_t>(k, 256), 0.0f);  // zero blocks
    QuantizeMatrix(f, w.data(), n, k, k, wq.p, rb);
    DequantizeMatrix(W(), wf.data());
    for (size_t j = 0; j < n; ++j) bias[j] = rng.Normal();
  }
  Weight W() const {
    Weight w = Weight::Dense(f, wq.p, n, k, k);
    w.row_bytes = rb;
    return w;
  }
  WeightFormat f;
  size_t m, n, k, ldx, rb;
  Buf<float> x;
  Buf<uint8_t> wq;
  std::vector<float> wf;
  Buf<float> bias;
};

// The block formats' shapes: every m the small-m tiles take, the 4-row tiles
// with a remainder, several L2 row blocks (k = 2048, m = 33 and 64); n not a
// multiple of any NR; k not a multiple of 256 where the block is 32, with
// 1, 2, 3, 5 and 7 blocks after the last whole step of eight (AVX3_DL), 1, 2
// and 3 after one of four (Q4_0 elsewhere) or 1 after two (Q8_0).
std::vector<std::array<size_t, 3>> QuantShapes(WeightFormat f) {
  std::vector<std::array<size_t, 3>> shapes;  // m, n, k
  const std::vector<size_t> ks = f == WeightFormat::kQ6_K
                                     ? std::vector<size_t>{256, 512, 2048}
                                     : std::vector<size_t>{32, 96, 160, 224, 256, 320, 512, 2048};
  for (size_t k : ks) {
    for (size_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 33})
      shapes.push_back({m, 1 + (k / 32 + 3 * m) % 19, k});
  }
  // The register tiles for m ≥ 4 with a remainder in both directions.
  for (size_t m : {4, 5, 8, 12, 64}) shapes.push_back({m, 23, ks[ks.size() / 2]});
  shapes.push_back({64, 13, ks.back()});
  return shapes;
}

// (a) Against the integer-exact scalar reference: the same X quantization and
// the same integers, so the only difference is the f32 summation. Each
// group's lane partials f32(p)·s are exact integers times the same f32 scale
// s = d_w·d_x; in the kernel each passes through ≤ G FMA roundings (G groups
// in the row), ≤ 4 lane-sum roundings and the bias add, so
// |simd − ref| ≤ (G + 5)·ε·mag with mag = Σ_g |s_g|·Σ|x_q·w_q| + |bias|
// (ref sums in double, its own error is below ε·|y|, inside the slack).
// (b) Against the float reference with the dequantized weights: X's
// quantization error per value is ≤ d_x/2 (q = round(x/d_x); the f32
// rounding of 1/d and x·(1/d) adds ≤ 3·127·u·d_x), so
// |Σ ŵ·(x − x̂)| ≤ Σ_g (d_x,g·(1/2 + 400u))·Σ_g |ŵ|; plus the f32 rounding of
// (a), plus ≤ 2u·Σ|ŵ·x| for Q6_K's ŵ = fl(fl(d·sc)·q), which the kernel
// multiplies exactly.
TEST(MatMulQuant, IntegerReferenceAndDequantizedBoundEveryTarget) {
  ThreadTeam team1(1), team2(2);
  Margin margin_a("MatMulQuant vs integer reference");
  Margin margin_b("MatMulQuant vs dequantized f32 reference");
  ForEachTarget([&] {
    Rng rng(11);
    for (WeightFormat f : kBlockFormats) {
      for (const auto& [m, n, k] : QuantShapes(f)) {
        QuantCase c(f, m, n, k, (m + k / 32) % 4, m % 2 == 0 ? 0 : 7, rng);
        const size_t groups = k / 32;
        for (int variant = 0; variant < 2; ++variant) {
          const float* bias = variant == 1 ? c.bias.p : nullptr;
          std::vector<float> got(m * n, kNaN), exact(m * n), deq(m * n);  // [m, n]
          std::vector<double> mag(m * n);
          MatMul(c.x.p, m, c.ldx, c.W(), bias, got.data(), n, (m + variant) % 2 ? team2 : team1);
          ref::MatMulQuantized(c.x.p, m, c.ldx, c.W(), bias, exact.data(), n, mag.data());
          const Weight wf = Weight::Dense(WeightFormat::kF32, c.wf.data(), n, k, k);
          ref::MatMul(c.x.p, m, c.ldx, wf, bias, deq.data(), n);
          std::vector<int8_t> xq(k);
          std::vector<float> xd(groups);
          for (size_t i = 0; i < m; ++i) {
            ref::QuantizeActivations(c.x.p + i * c.ldx, k, xq.data(), xd.data());
            for (size_t j = 0; j < n; ++j) {
              const size_t at = i * n + j;
              const double bound_a = (groups + 5) * kEps * mag[at];
              ASSERT_TRUE(margin_a.Check(std::abs(double{got[at]} - exact[at]), bound_a))
                  << WeightFormatName(f) << " m=" << m << " n=" << n << " k=" << k << " (" << i << "," << j
                  << "): " << got[at] << " vs " << exact[at];
              double xerr = 0.0, wx = 0.0;
              for (size_t g = 0; g < groups; ++g) {
                double wabs = 0.0;
                for (size_t q = 0; q < 32; ++q) {
                  wabs += std::abs(c.wf[j * k + 32 * g + q]);
                  wx += std::abs(double{c.wf[j * k + 32 * g + q]} * c.x[i * c.ldx + 32 * g + q]);
                }
                xerr += xd[g] * (0.5 + 400 * kEps / 2) * wabs;
              }
              const double bound_b = xerr + bound_a + 2 * kEps * wx;
              ASSERT_TRUE(margin_b.Check(std::abs(double{got[at]} - deq[at]), bound_b))
                  << WeightFormatName(f) << " m=" << m << " n=" << n << " k=" << k << " (" << i << "," << j
                  << "): " << got[at] << " vs " << deq[at];
            }
          }
        }
      }
    }
  });
}

// The determinism contract on the integer path: a Y element is the same bits
// whatever m, the tile, the L2 row block, the team size and the split of W rows.
TEST(MatMulQuant, DeterministicAcrossChunkingEveryTarget) {
  ThreadTeam team1(1), team2(2);
  ForEachTarget([&] {
    Rng rng(12);
    // k = 2080: an odd count of 32-blocks, so the 2-, 4- or 8-block steps of
    // Q8_0 and Q4_0 end with a single block; k = 2016 (63 blocks) with 7 or 3. The n = 300–560 cases
    // hold more than one block of W rows (kQWBlockBytes, 256 KiB) in each thread's share.
    struct Case {
      WeightFormat f;
      size_t k, n;
    };
    for (const Case& shape : {Case{WeightFormat::kQ8_0, 2048, 21}, Case{WeightFormat::kQ8_0, 2080, 21},
                              Case{WeightFormat::kQ8_0, 2016, 21}, Case{WeightFormat::kQ4_0, 2048, 21},
                              Case{WeightFormat::kQ4_0, 2080, 21}, Case{WeightFormat::kQ4_0, 2016, 21},
                              Case{WeightFormat::kQ6_K, 2048, 21}, Case{WeightFormat::kQ4_0, 2048, 563},
                              Case{WeightFormat::kQ8_0, 2080, 301}, Case{WeightFormat::kQ6_K, 2048, 401}}) {
      const WeightFormat f = shape.f;  // plain locals: clang 14 cannot capture structured bindings
      const size_t k = shape.k, n = shape.n;
      const size_t m = 37;
      QuantCase c(f, m, n, k, 1, 0, rng);
      const Weight w = c.W();
      std::vector<float> full(m * n), part(m * n, std::numeric_limits<float>::quiet_NaN());  // [m, n]
      MatMul(c.x.p, m, c.ldx, w, c.bias.p, full.data(), n, team2);
      auto expect_same = [&](size_t row0, size_t col0, const char* what) {
        for (size_t i = row0; i < m; ++i) {
          for (size_t j = col0; j < n; ++j) {
            ASSERT_TRUE(SameBits(part[i * n + j], full[i * n + j]))
                << what << " " << WeightFormatName(f) << " (" << i << "," << j << ")";
          }
        }
        // The next way starts from NaN: an output it leaves unwritten fails.
        std::fill(part.begin(), part.end(), std::numeric_limits<float>::quiet_NaN());
      };
      Buf<float> row(k, 3);
      for (size_t i = 0; i < m; ++i) {
        std::copy(c.x.p + i * c.ldx, c.x.p + i * c.ldx + k, row.p);
        MatMul(row.p, 1, k, w, c.bias.p, part.data() + i * n, n, team1);
      }
      expect_same(0, 0, "m=1");
      for (size_t chunk : {4, 5, 6, 7, 13}) {
        for (size_t i0 = 0; i0 < m; i0 += chunk) {
          MatMul(c.x.p + i0 * c.ldx, std::min(chunk, m - i0), c.ldx, w, c.bias.p, part.data() + i0 * n, n,
                 chunk % 2 ? team1 : team2);
        }
        expect_same(0, 0, "chunks");
      }
      Weight sub = w;
      sub.rows = n - 5;
      sub.data = w.row(5);
      MatMul(c.x.p + 3 * c.ldx, m - 3, c.ldx, sub, c.bias.p + 5, part.data() + 3 * n + 5, n, team2);
      expect_same(3, 5, "W rows 5..");
    }
  });
}

// W ending at an inaccessible page: no block read strays past its row.
TEST(MatMulQuant, DoesNotReadPastTheEndEveryTarget) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(mem) + page, page, PROT_NONE), 0);
  uint8_t* end = static_cast<uint8_t*>(mem) + page;
  ThreadTeam team(1);
  ForEachTarget([&] {
    // k = 288: Q8_0 and Q4_0 rows end with a single block after the steps;
    // k = 224: with 7 blocks and no whole step of eight (AVX3_DL).
    for (const auto& [f, k] :
         {std::pair{WeightFormat::kQ8_0, size_t{256}}, std::pair{WeightFormat::kQ8_0, size_t{288}},
          std::pair{WeightFormat::kQ8_0, size_t{224}}, std::pair{WeightFormat::kQ4_0, size_t{256}},
          std::pair{WeightFormat::kQ4_0, size_t{288}}, std::pair{WeightFormat::kQ4_0, size_t{224}},
          std::pair{WeightFormat::kQ6_K, size_t{256}}}) {
      const size_t n = 3, rb = FormatRowBytes(f, k);
      std::vector<float> ones(n * k, 1.0f), x(k, 1.0f), y(n), want(n);
      uint8_t* w = end - n * rb;
      QuantizeMatrix(f, ones.data(), n, k, w);
      const Weight wv = Weight::Dense(f, w, n, k, k);
      MatMul(x.data(), 1, k, wv, nullptr, y.data(), n, team);
      ref::MatMulQuantized(x.data(), 1, k, wv, nullptr, want.data(), n, nullptr);
      EXPECT_EQ(y[n - 1], want[n - 1]) << WeightFormatName(f);
      EXPECT_NEAR(y[n - 1], static_cast<float>(k), 0.01 * k) << WeightFormatName(f);
    }
  });
  munmap(mem, 2 * page);
}

// A NaN or ±inf in an X row makes every output of that row NaN, as f32 arithmetic would, on every target
// and team size, here and in the integer reference (the activation quantizer gives the group a NaN scale;
// it used to pass the value over and answer finite numbers made from the rest of the group). The other
// rows keep their bits (each Y element depends only on its X row, W row and bias).
TEST(MatMulQuant, NonFiniteXGivesNaNRowsEveryTarget) {
  ThreadTeam team1(1), team2(2);
  ForEachTarget([&] {
    Rng rng(12);
    for (WeightFormat f : kBlockFormats) {
      for (const auto& [m, n, k] : QuantShapes(f)) {
        QuantCase c(f, m, n, k, 0, 0, rng);
        std::vector<float> clean(m * n), got(m * n), exact(m * n);
        MatMul(c.x.p, m, c.ldx, c.W(), c.bias.p, clean.data(), n, team2);
        const size_t row = m / 2;
        c.x[row * c.ldx + (k - 1) / 2] = (m + k / 32) % 2 == 0 ? kNaN : -kInf;
        for (ThreadTeam* team : {&team1, &team2}) {
          MatMul(c.x.p, m, c.ldx, c.W(), c.bias.p, got.data(), n, *team);
          for (size_t i = 0; i < m; ++i) {
            for (size_t j = 0; j < n; ++j) {
              if (i == row) {
                ASSERT_TRUE(std::isnan(got[i * n + j]))
                    << WeightFormatName(f) << " m=" << m << " n=" << n << " k=" << k << " j=" << j;
              } else {
                ASSERT_TRUE(SameBits(got[i * n + j], clean[i * n + j]))
                    << WeightFormatName(f) << " m=" << m << " n=" << n << " k=" << k << " (" << i << "," << j
                    << ")";
              }
            }
          }
        }
        ref::MatMulQuantized(c.x.p, m, c.ldx, c.W(), c.bias.p, exact.data(), n, nullptr);
        for (size_t j = 0; j < n; ++j) ASSERT_TRUE(std::isnan(exact[row * n + j])) << WeightFormatName(f);
      }
    }
  });
}

// AccumulateRow on a block format adds exactly the dequantized row.
TEST(MatMulQuant, AccumulateRowIsExactDequantizationEveryTarget) {
  ForEachTarget([&] {
    Rng rng(13);
    for (WeightFormat f : kBlockFormats) {
      for (size_t k : {256, 768}) {
        QuantCase c(f, 1, 4, k, 2, 5, rng);
        for (size_t row = 0; row < c.n; ++row) {
          std::vector<float> acc(k), want(k), deq(k);
          rng.FillNormal(acc.begin(), acc.end());
          DequantizeRow(f, c.W().row(row), k, deq.data());
          for (size_t i = 0; i < k; ++i) want[i] = acc[i] + deq[i];
          AccumulateRow(c.W(), row, acc.data());
          for (size_t i = 0; i < k; ++i)
            ASSERT_TRUE(SameBits(acc[i], want[i])) << WeightFormatName(f) << " " << i;
        }
      }
    }
  });
}

// WeightLayout::kSteps16 (tensor/matrix.h) of a QuantCase's W: rows repacked
// at a stride rounded up to 64 bytes plus `pad`, at an aligned buffer + off.
struct Steps16Copy {
  Steps16Copy(const QuantCase& c, size_t off, size_t pad)
      : rb(RoundUp(FormatRowBytes(c.f, c.k), 64) + pad), bytes(c.n * rb + off + 64) {
    w = c.W();
    w.data = bytes.data() + off;
    w.row_bytes = rb;
    w.layout = WeightLayout::kSteps16;
    for (size_t r = 0; r < c.n; ++r) RepackRowSteps16(c.f, c.W().row(r), c.k, bytes.data() + off + r * rb);
  }
  size_t rb;
  AlignedBuffer<uint8_t> bytes;
  Weight w;
};

// The layout's definition: code byte 4·j + e of block 16p + l at byte
// 64·j + 4·l + e of step p's codes, steps in groups of 2 with the group's f16
// d after its codes; the t tail blocks alike with t lanes (byte 4t·j + 4·l + e),
// then their d; unpacking, CopyBlocksOfRow and DequantizeMatrix give the file's
// bytes and values back; the row keeps its size.
TEST(MatMulQuant, Steps16LayoutIsItsDefinitionAndRoundTrips) {
  Rng rng(14);
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    const size_t bb = FormatRowBytes(f, 32), q = bb - 2;
    // 0 to 5 steps (groups of 1 or 2), with 0 to 15 tail blocks.
    for (size_t k : {32, 96, 224, 256, 288, 480, 512, 544, 1024, 1312, 2016, 2048, 2080, 2304, 2528}) {
      QuantCase c(f, 1, 3, k, 1, 3, rng);
      Steps16Copy s(c, 5, 7);
      const size_t nb = k / 32, steps = nb / 16, t = nb % 16;
      for (size_t r = 0; r < c.n; ++r) {
        const uint8_t* blocks = c.W().row(r);
        const uint8_t* row = s.w.row(r);
        for (size_t b = 0; b < nb; ++b) {
          const uint8_t* blk = blocks + b * bb;
          const size_t p = b / 16, l = b % 16;
          if (p < steps) {
            // Step p's group of 2 (1 at the end): its codes, then its scales.
            const size_t g = p / 2, in_group = std::min<size_t>(2, steps - 2 * g);
            const size_t codes = g * (32 * q + 64) + p % 2 * 16 * q;
            const size_t scales = g * (32 * q + 64) + in_group * 16 * q + p % 2 * 32;
            for (size_t j = 0; j < q / 4; ++j) {
              for (size_t e = 0; e < 4; ++e)
                ASSERT_EQ(row[codes + 64 * j + 4 * l + e], blk[2 + 4 * j + e]) << WeightFormatName(f);
            }
            ASSERT_EQ(std::memcmp(row + scales + 2 * l, blk, 2), 0) << WeightFormatName(f);
          } else {
            const size_t tail = steps * 16 * bb;
            for (size_t j = 0; j < q / 4; ++j) {
              for (size_t e = 0; e < 4; ++e)
                ASSERT_EQ(row[tail + 4 * t * j + 4 * l + e], blk[2 + 4 * j + e])
                    << WeightFormatName(f) << " tail";
            }
            ASSERT_EQ(std::memcmp(row + tail + t * q + 2 * l, blk, 2), 0) << WeightFormatName(f) << " tail d";
          }
        }
        std::vector<uint8_t> back(nb * bb), some(3 * bb);
        UnpackRowSteps16(f, row, k, back.data());
        ASSERT_EQ(std::memcmp(back.data(), blocks, nb * bb), 0) << WeightFormatName(f) << " k=" << k;
        for (size_t b0 = 0; b0 + 3 <= nb; b0 += 5) {
          CopyBlocksOfRow(s.w, r, b0, 3, some.data());
          ASSERT_EQ(std::memcmp(some.data(), blocks + b0 * bb, 3 * bb), 0) << WeightFormatName(f);
        }
      }
      std::vector<float> deq(c.n * k);
      DequantizeMatrix(s.w, deq.data());
      for (size_t i = 0; i < deq.size(); ++i) ASSERT_TRUE(SameBits(deq[i], c.wf[i])) << WeightFormatName(f);
      // PackWeight (the convolutions' panels) reads a repacked W as the same matrix.
      const PackedWeight pa = PackWeight(s.w), pb = PackWeight(c.W());
      ASSERT_EQ(pa.data.size(), pb.data.size());
      ASSERT_EQ(std::memcmp(pa.data.data(), pb.data.data(), pa.data.size()), 0) << WeightFormatName(f);
    }
  }
  EXPECT_EQ(PrefersSteps16Layout(WeightFormat::kQ6_K), PrefersSteps16Layout(WeightFormat::kQ8_0));
  EXPECT_FALSE(PrefersSteps16Layout(WeightFormat::kBF16));
}

// Q6_K's kSteps16 (tensor/matrix.h): blocks in order and whole, scales and d where the file has them;
// element 32·g + 4·j + i's code (GGUF: low 4 bits in ql[64h + 32(t & 1) + l], the high nibble for t ≥ 2,
// high 2 bits at qh[32h + l] >> 2t, for element 128h + 32t + l) has its low bits in byte 32·(j % 4) +
// 4·g + i (the high nibble for j ≥ 4) and its high bits at byte 128 + 32·(j / 4) + 4·g + i, bits
// 2·(j % 4); unpacking, CopyBlocksOfRow, DequantizeMatrix and PackWeight give the file's back.
TEST(MatMulQuant, Q6KSteps16LayoutIsItsDefinitionAndRoundTrips) {
  Rng rng(16);
  const WeightFormat f = WeightFormat::kQ6_K;
  EXPECT_TRUE(HasSteps16Layout(f));
  for (size_t k : {256, 512, 2048}) {
    QuantCase c(f, 1, 3, k, 1, 3, rng);
    Steps16Copy s(c, 5, 7);
    const size_t nb = k / 256;
    for (size_t r = 0; r < c.n; ++r) {
      for (size_t b = 0; b < nb; ++b) {
        const uint8_t* blk = c.W().row(r) + b * kQ6_KBlockBytes;
        const uint8_t* rep = s.w.row(r) + b * kQ6_KBlockBytes;
        ASSERT_EQ(std::memcmp(blk + kQ6_KScales, rep + kQ6_KScales, kQ6_KBlockBytes - kQ6_KScales), 0);
        for (size_t e = 0; e < 256; ++e) {
          const size_t h = e / 128, t = e % 128 / 32, l = e % 32;
          const int file = ((blk[64 * h + 32 * (t & 1) + l] >> (t < 2 ? 0 : 4)) & 15) |
                           ((blk[kQ6_KQh + 32 * h + l] >> (2 * t) & 3) << 4);
          const size_t g = e / 32, j = e % 32 / 4, i = e % 4;
          const int steps = ((rep[32 * (j % 4) + 4 * g + i] >> (j < 4 ? 0 : 4)) & 15) |
                            ((rep[kQ6_KQh + 32 * (j / 4) + 4 * g + i] >> (2 * (j % 4)) & 3) << 4);
          ASSERT_EQ(steps, file) << "k=" << k << " row " << r << " block " << b << " element " << e;
        }
      }
      std::vector<uint8_t> back(nb * kQ6_KBlockBytes);
      UnpackRowSteps16(f, s.w.row(r), k, back.data());
      ASSERT_EQ(std::memcmp(back.data(), c.W().row(r), back.size()), 0) << "k=" << k;
      if (nb > 1) {
        std::vector<uint8_t> some(kQ6_KBlockBytes);
        CopyBlocksOfRow(s.w, r, nb - 1, 1, some.data());
        ASSERT_EQ(std::memcmp(some.data(), c.W().row(r) + (nb - 1) * kQ6_KBlockBytes, kQ6_KBlockBytes), 0);
      }
    }
    std::vector<float> deq(c.n * k);
    DequantizeMatrix(s.w, deq.data());
    for (size_t i = 0; i < deq.size(); ++i) ASSERT_TRUE(SameBits(deq[i], c.wf[i])) << "k=" << k;
    const PackedWeight pa = PackWeight(s.w), pb = PackWeight(c.W());
    ASSERT_EQ(pa.data.size(), pb.data.size());
    ASSERT_EQ(std::memcmp(pa.data.data(), pb.data.data(), pa.data.size()), 0);
  }
}

// MatMul on a kSteps16 W gives the bits it gives on the file's layout, on every
// target (AVX3_DL reads both for Q8_0 and Q4_0, with the same values in the same
// lanes; AVX2 and AVX3, and AVX3_DL for Q6_K, read kSteps16 only and repack a
// file-layout W's rows first; the others
// unpack a kSteps16 W's rows), for every shape of the integer path, and so
// batched == alone holds on it too (checked again directly: each X row alone,
// and in chunks, against the whole batch). The scalar reference reads it as
// the same matrix, and AccumulateRow adds the same values.
TEST(MatMulQuant, Steps16LayoutSameBitsAsBlocksEveryTarget) {
  ThreadTeam team1(1), team2(2);
  ForEachTarget([&] {
    Rng rng(15);
    for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ6_K}) {
      auto shapes = QuantShapes(f);
      if (f == WeightFormat::kQ6_K) {
        shapes.push_back({37, 21, 2304});
      } else {
        shapes.push_back({37, 21, 2080});
        shapes.push_back({37, 21, 2016});
        // Rows long enough for the 8-row tiles to run a chunk of steps at a time (QMatMulChunked on
        // AVX3_DL: the last chunk shorter, then the tail); n = 45: a block of W tiles, then a W row
        // past the last tile.
        shapes.push_back({37, 45, f == WeightFormat::kQ4_0 ? size_t{8352} : size_t{4128}});
      }
      for (const auto& [m, n, k] : shapes) {
        QuantCase c(f, m, n, k, (m + k / 32) % 4, m % 2 == 0 ? 0 : 7, rng);
        Steps16Copy s(c, m % 3 == 0 ? 0 : 64 * (m % 3), m % 2 == 0 ? 0 : 64);
        std::vector<float> want(m * n), got(m * n, kNaN), part(m * n, kNaN);
        MatMul(c.x.p, m, c.ldx, c.W(), c.bias.p, want.data(), n, m % 2 ? team2 : team1);
        MatMul(c.x.p, m, c.ldx, s.w, c.bias.p, got.data(), n, m % 2 ? team1 : team2);
        for (size_t i = 0; i < m; ++i)
          MatMul(c.x.p + i * c.ldx, 1, c.ldx, s.w, c.bias.p, part.data() + i * n, n, team1);
        for (size_t at = 0; at < m * n; ++at) {
          ASSERT_TRUE(SameBits(got[at], want[at]))
              << WeightFormatName(f) << " m=" << m << " n=" << n << " k=" << k << " at " << at << ": "
              << got[at] << " vs " << want[at];
          ASSERT_TRUE(SameBits(part[at], want[at])) << WeightFormatName(f) << " alone, m=" << m << " k=" << k;
        }
        if (m == 37) {
          for (size_t i0 = 0; i0 < m; i0 += 6)
            MatMul(c.x.p + i0 * c.ldx, std::min<size_t>(6, m - i0), c.ldx, s.w, c.bias.p,
                   part.data() + i0 * n, n, team2);
          for (size_t at = 0; at < m * n; ++at)
            ASSERT_TRUE(SameBits(part[at], want[at])) << WeightFormatName(f) << " chunks of 6, k=" << k;
        }
        if (m <= 2) {
          std::vector<float> ra(m * n), rb(m * n);
          ref::MatMulQuantized(c.x.p, m, c.ldx, c.W(), c.bias.p, ra.data(), n, nullptr);
          ref::MatMulQuantized(c.x.p, m, c.ldx, s.w, c.bias.p, rb.data(), n, nullptr);
          for (size_t at = 0; at < m * n; ++at) ASSERT_TRUE(SameBits(ra[at], rb[at])) << WeightFormatName(f);
          for (size_t row = 0; row < n; ++row) {
            std::vector<float> a(k, 0.5f), b(k, 0.5f);
            AccumulateRow(c.W(), row, a.data());
            AccumulateRow(s.w, row, b.data());
            for (size_t i = 0; i < k; ++i) ASSERT_TRUE(SameBits(a[i], b[i])) << WeightFormatName(f);
          }
        }
      }
    }
  });
}

// Q8_0 / Q4_0 in kSteps16 on AMX-INT8 (matmul_quant_amx.cc) give the bits of the AVX-512 VNNI steps:
// each output's exact block sums folded by the same FMAs in the same lane order and summed by the same
// tree, so any difference is a fault of the unit's path (a block in the wrong lane, a mistransposed W
// tile or scale, a row of a partial tile). Shapes: m from 32 (the unit's threshold) with partial X tiles,
// n with partial W tiles (1, 15, 17, 45), k with and without whole 16-block steps and tails of 1-15
// blocks, with and without bias, Y rows wider than n; 1 and 2 threads.
TEST(MatMulQuant, AmxInt8SameBitsAsVnniSteps) {
  if (!internal::QuantAmxFor(WeightFormat::kQ4_0, 64)) {
    GTEST_SKIP() << "this CPU has no AMX-INT8 (or the OS does not grant it): nothing to compare";
  }
  ThreadTeam team1(1), team2(2);
  Rng rng(16);
  struct Shape {
    size_t m, n, k;
  };
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    for (const auto& [m, n, k] :
         {Shape{32, 16, 512}, Shape{37, 45, 544}, Shape{33, 1, 32}, Shape{64, 17, 224}, Shape{97, 15, 2080},
          Shape{40, 33, 8352}, Shape{48, 20, 480}}) {
      QuantCase c(f, m, n, k, m % 4, m % 2 == 0 ? 0 : 7, rng);
      Steps16Copy s(c, 64 * (m % 2), 64 * (n % 2));
      for (int variant = 0; variant < 2; ++variant) {
        const float* bias = variant == 1 ? c.bias.p : nullptr;
        const size_t ldy = n + 3 * variant;
        std::vector<float> amx(m * ldy, kNaN), vnni(m * ldy, kNaN);
        MatMul(c.x.p, m, c.ldx, s.w, bias, amx.data(), ldy, variant == 0 ? team1 : team2);
        internal::SetQuantAmxForTest(false);
        MatMul(c.x.p, m, c.ldx, s.w, bias, vnni.data(), ldy, variant == 0 ? team2 : team1);
        internal::SetQuantAmxForTest(true);
        for (size_t i = 0; i < m; ++i) {
          for (size_t j = 0; j < ldy; ++j) {
            const size_t at = i * ldy + j;
            if (j >= n) {
              ASSERT_TRUE(std::isnan(amx[at])) << "wrote past column n at (" << i << "," << j << ")";
              continue;
            }
            ASSERT_TRUE(SameBits(amx[at], vnni[at]))
                << WeightFormatName(f) << " m=" << m << " n=" << n << " k=" << k << " bias=" << variant
                << " (" << i << "," << j << "): " << amx[at] << " vs " << vnni[at];
          }
        }
      }
    }
    // The W tiles' preparation reads no byte past the last row (its tail blocks' codes and scales):
    // the matrix ends at an inaccessible page.
    const size_t m = 40, n = 17, k = 544, rb = FormatRowBytes(f, k);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), pages = (n * rb + page - 1) / page;
    void* mem = mmap(nullptr, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    uint8_t* end = static_cast<uint8_t*>(mem) + pages * page;
    ASSERT_EQ(mprotect(end, page, PROT_NONE), 0);
    QuantCase c(f, m, n, k, 0, 0, rng);
    for (size_t r = 0; r < n; ++r) RepackRowSteps16(f, c.W().row(r), k, end - (n - r) * rb);
    Weight w = Weight::Dense(f, end - n * rb, n, k, k);
    w.layout = WeightLayout::kSteps16;
    std::vector<float> amx(m * n), vnni(m * n);
    MatMul(c.x.p, m, c.ldx, w, nullptr, amx.data(), n, team2);
    internal::SetQuantAmxForTest(false);
    MatMul(c.x.p, m, c.ldx, w, nullptr, vnni.data(), n, team2);
    internal::SetQuantAmxForTest(true);
    for (size_t at = 0; at < m * n; ++at)
      ASSERT_TRUE(SameBits(amx[at], vnni[at])) << WeightFormatName(f) << " at " << at;
    munmap(mem, (pages + 1) * page);
  }
}

// PackedMatMul (a PackWeight of every plain format) against ref::MatMul, and
// its determinism contract. Sizes cross the tile (6, 8 rows), panel (16 columns),
// k block (128-512) and row block (768 AVX-512, 192 AVX2) boundaries, and (n up to 150: 10 panels)
// the groups of panels a tile of each m takes, with single leftovers. Integers: exact. Normal data:
// each output is a sequential sum of k + 1 terms (bias first), each step one
// fma (or a product and a sum, two roundings), so
// |simd − ref| ≤ γ_{2k+2}·(Σ|x·w| + |bias|) < (2k + 2)·ε·(Σ|x·w| + |bias|).
TEST(PackedMatMul, MatchesReferenceAndIsDeterministicEveryTarget) {
  ThreadTeam team1(1), team2(2);
  Margin margin("PackedMatMul");
  ForEachTarget([&] {
    Rng rng(11);
    for (auto [m, n, k] : {std::array<size_t, 3>{1, 1, 1},
                           {2, 17, 3584},
                           {7, 33, 300},
                           {200, 40, 65},
                           {13, 5, 0},
                           {1, 150, 40},
                           {2, 150, 33},
                           {3, 130, 20},
                           {4, 120, 9},
                           {5, 70, 18},
                           {6, 70, 5},
                           {20, 100, 300},
                           // Large m (AVX-512): 8 × 3 tiles widening bf16 in registers (m ≤ 64, all of k
                           // at once) with one leftover group of 1 or 2 panels, row leftovers of 1-7;
                           // 6 × 4 tiles on widened blocks of 128 steps (m > 64, panels in fours; 3, 2, 1
                           // panels: 170, 256, 512 steps), rows crossing the blocks of 192 and 768.
                           {8, 64, 130},
                           {9, 80, 40},
                           {16, 33, 257},
                           {15, 20, 7},
                           {17, 64, 129},
                           {31, 48, 200},
                           {65, 64, 140},
                           {70, 30, 300},
                           {80, 48, 400},
                           {100, 16, 600},
                           {800, 20, 40},
                           {197, 64, 140},
                           {40, 1, 30}}) {
      for (bool integers : {true, false}) {
        MatMulCase c(m, n, k, 1, integers, rng);
        for (WeightFormat t : kPlainFormats) {
          const PackedWeight pw = PackWeight(c.W(t));
          ASSERT_EQ(pw.format, t == WeightFormat::kBF16 ? WeightFormat::kBF16 : WeightFormat::kF32);
          std::vector<float> want(m * n), got(m * n), part(m * n);  // [m, n]
          ref::MatMul(c.x.p, m, c.ldx, c.W(t), c.bias.p, want.data(), n);
          PackedMatMul(c.x.p, m, c.ldx, pw, c.bias.p, got.data(), n, team2);
          for (size_t i = 0; i < m; ++i) {
            for (size_t j = 0; j < n; ++j) {
              double mag = std::abs(c.bias[j]);
              for (size_t q = 0; q < k; ++q) mag += std::abs(double{c.x[i * c.ldx + q]} * c.w32[j * k + q]);
              const double err = std::abs(double{got[i * n + j]} - want[i * n + j]);
              if (integers) {
                ASSERT_EQ(got[i * n + j], want[i * n + j])
                    << WeightFormatName(t) << " (" << i << "," << j << ")";
              } else {
                ASSERT_TRUE(margin.Check(err, (2.0 * k + 2) * kEps * mag))
                    << WeightFormatName(t) << " m=" << m << " k=" << k << " (" << i << "," << j << ")";
              }
            }
          }
          // One row at a time on one thread: the same bits.
          for (size_t i = 0; i < m; ++i)
            PackedMatMul(c.x.p + i * c.ldx, 1, c.ldx, pw, c.bias.p, part.data() + i * n, n, team1);
          for (size_t e = 0; e < m * n; ++e)
            ASSERT_TRUE(SameBits(part[e], got[e])) << WeightFormatName(t) << e;
        }
      }
    }
  });
}

TEST(MatMul, ZeroKGivesBias) {
  ThreadTeam team(1);
  const float bias[3] = {1.0f, -2.0f, 0.5f};
  float y[3] = {kNaN, kNaN, kNaN};
  const float* x = bias;  // never read
  MatMul(x, 1, 0, Weight::Dense(WeightFormat::kF32, bias, 3, 0, 0), bias, y, 3, team);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 0.5f);
}

// ---------------------------------------------------------------------------
// Dot, RmsNorm

TEST(Dot, ExactOnIntegersAndBoundedEveryTarget) {
  Margin margin("Dot");
  ForEachTarget([&] {
    Rng rng(4);
    EXPECT_EQ(Dot(nullptr, nullptr, 0), 0.0f);
    for (size_t n : Sizes()) {
      Buf<float> a(n, n % 4), b(n, (n + 1) % 4);
      rng.FillInt(a.begin(), a.end());
      rng.FillInt(b.begin(), b.end());
      ASSERT_TRUE(SameBits(Dot(a.p, b.p, n), ref::Dot(a.p, b.p, n))) << "integers n=" << n;
      rng.FillNormal(a.begin(), a.end());
      rng.FillNormal(b.begin(), b.end());
      double mag = 0.0;
      for (size_t i = 0; i < n; ++i) mag += std::abs(double{a[i]} * b[i]);
      // Four chains of ≤ n/(4N) + 1 FMAs, 2 adds joining them, log2(N) lane
      // adds: h ≤ n + 3.
      EXPECT_TRUE(
          margin.Check(std::abs(double{Dot(a.p, b.p, n)} - ref::Dot(a.p, b.p, n)), (n + 3) * kEps * mag))
          << n;
    }
  });
}

TEST(RmsNorm, BoundedEveryTarget) {
  Margin margin("RmsNorm");
  ForEachTarget([&] {
    Rng rng(5);
    for (size_t n : Sizes()) {
      Buf<float> x(n, n % 3), w(n, 1), y(n, 2);
      std::vector<float> want(n);
      rng.FillNormal(x.begin(), x.end(), 3.0f);
      rng.FillNormal(w.begin(), w.end());
      ref::RmsNorm(x.p, w.p, n, 1e-5f, want.data());
      RmsNorm(x.p, w.p, n, 1e-5f, y.p);
      // Same operations as the reference once inv = 1/sqrt(mean + eps) is
      // rounded to f32; the double sum of squares may differ in order by
      // ~n·2^-53 relative, which can move inv by one ulp (≤ ε relative),
      // and x·inv then ·w each round once more (≤ 2u): total < 2ε.
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(margin.Check(std::abs(y[i] - want[i]), 2 * kEps * std::abs(want[i])))
            << "n=" << n << " i=" << i;
      }
      RmsNorm(x.p, w.p, n, 1e-5f, x.p);  // in place
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(SameBits(x[i], y[i])) << "in place n=" << n;
    }
  });
}

// ---------------------------------------------------------------------------
// RoPE, element-wise

TEST(Rope, BitExactEveryTarget) {
  ForEachTarget([&] {
    Rng rng(6);
    for (size_t d = 2; d <= 140; d += 2) {
      for (bool split : {true, false}) {
        Buf<float> x(d, d % 4), cs(d / 2, 1), sn(d / 2, 3);
        rng.FillNormal(x.begin(), x.end());
        for (size_t i = 0; i < d / 2; ++i) {
          const float a = rng.Normal(3.0f);
          cs[i] = std::cos(a);
          sn[i] = std::sin(a);
        }
        std::vector<float> want(x.begin(), x.end());
        if (split) {
          ref::RopeSplitHalf(want.data(), d, cs.p, sn.p);
          RopeSplitHalf(x.p, d, cs.p, sn.p);
        } else {
          ref::RopeInterleaved(want.data(), d, cs.p, sn.p);
          RopeInterleaved(x.p, d, cs.p, sn.p);
        }
        for (size_t i = 0; i < d; ++i) {
          ASSERT_TRUE(SameBits(x[i], want[i]))
              << (split ? "split" : "interleaved") << " d=" << d << " i=" << i;
        }
      }
    }
  });
}

TEST(ElementWise, BitExactEveryTarget) {
  ForEachTarget([&] {
    Rng rng(7);
    for (size_t n : Sizes()) {
      Buf<float> a(n, n % 4), b(n, (n + 2) % 4), out(n, 1);
      rng.FillNormal(a.begin(), a.end());
      rng.FillNormal(b.begin(), b.end());
      std::vector<float> want(n);
      auto check = [&](const char* what, const float* got) {
        for (size_t i = 0; i < n; ++i)
          ASSERT_TRUE(SameBits(got[i], want[i])) << what << " n=" << n << " i=" << i;
      };
      ref::Mul(a.p, b.p, want.data(), n);
      Mul(a.p, b.p, out.p, n);
      check("Mul", out.p);
      ref::Add(a.p, b.p, want.data(), n);
      Add(a.p, b.p, out.p, n);
      check("Add", out.p);
      ref::Scale(a.p, -1.7f, want.data(), n);
      Scale(a.p, -1.7f, out.p, n);
      check("Scale", out.p);
      // Aliasing: out == a.
      std::vector<float> a_copy(a.begin(), a.end());
      ref::Mul(a_copy.data(), b.p, want.data(), n);
      Mul(a.p, b.p, a.p, n);
      check("Mul in place", a.p);
      ref::Add(a.p, b.p, want.data(), n);
      Add(a.p, b.p, b.p, n);
      check("Add in place", b.p);

      // AccumulateRow: row 1 of a [2, n] table (rows n + 1 elements apart) in each format.
      Buf<uint16_t> b16(2 * (n + 1), n % 2), h16(2 * (n + 1), (n + 1) % 2);
      Buf<float> f32(2 * (n + 1), n % 4);
      for (size_t i = 0; i < 2 * (n + 1); ++i) {
        const float v = Bf16ToF32(F32ToBf16(rng.Normal()));
        b16[i] = F32ToBf16(v);
        h16[i] = F32ToF16(v);
        f32[i] = v;
      }
      b16[n + 1] = 0x7f80;  // +inf widens exactly too
      h16[n + 1] = 0x7c00;
      f32[n + 1] = kInf;
      for (WeightFormat f : kPlainFormats) {
        const void* p = f == WeightFormat::kBF16  ? static_cast<const void*>(b16.p)
                        : f == WeightFormat::kF16 ? static_cast<const void*>(h16.p)
                                                  : f32.p;
        const Weight table = Weight::Dense(f, p, 2, n, n + 1);
        std::copy(out.begin(), out.end(), want.begin());
        ref::AccumulateRow(table, 1, want.data());
        AccumulateRow(table, 1, out.p);
        check(WeightFormatName(f), out.p);
      }
    }
  });
}

// The BF16 and F16 decoders widen every one of the 65536 bit patterns as the
// scalar conversions of tensor/dtype.h do (NaN to some NaN), through the
// vector path (a row of all patterns) and the tail path (3 fewer).
TEST(AccumulateRow, WidensEveryBitPatternEveryTarget) {
  std::vector<uint16_t> all(1 << 16);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  ForEachTarget([&] {
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kF16}) {
      for (size_t skip : {0, 3}) {
        const Weight table = Weight::Dense(f, all.data() + skip, 1, all.size() - skip, all.size() - skip);
        std::vector<float> got(table.cols, 0.0f), want(table.cols, 0.0f);
        AccumulateRow(table, 0, got.data());
        ref::AccumulateRow(table, 0, want.data());
        for (size_t i = 0; i < table.cols; ++i) {
          const uint16_t b = all[skip + i];
          const float exact = f == WeightFormat::kBF16 ? Bf16ToF32(b) : F16ToF32(b);
          if (std::isnan(exact)) {
            ASSERT_TRUE(std::isnan(got[i]) && std::isnan(want[i])) << WeightFormatName(f) << " " << b;
          } else {
            ASSERT_TRUE(SameBits(got[i], want[i])) << WeightFormatName(f) << " " << b;
            ASSERT_EQ(got[i], exact) << WeightFormatName(f) << " " << b;  // 0 + -0 is +0: compare values
          }
        }
      }
    }
  });
}

TEST(SwiGlu, BoundedEveryTarget) {
  Margin margin("SwiGlu");
  ForEachTarget([&] {
    Rng rng(8);
    const float extremes[] = {0.0f,  -0.0f,  1e-30f, -1e-30f, 20.0f,  -20.0f,  88.0f, -88.0f,
                              90.0f, -90.0f, 103.0f, -103.0f, 200.0f, -200.0f, 1e30f, -1e30f};
    for (size_t n : Sizes()) {
      Buf<float> g(n, n % 4), u(n, 1), out(n, 3);
      rng.FillNormal(g.begin(), g.end(), 4.0f);
      rng.FillNormal(u.begin(), u.end());
      for (size_t i = 0; i < n; i += 5) g[i] = extremes[(i / 5) % std::size(extremes)];
      std::vector<float> want(n);
      ref::SwiGlu(g.p, u.p, want.data(), n);
      SwiGlu(g.p, u.p, out.p, n);
      for (size_t i = 0; i < n; ++i) {
        // e = exp(−|g|) within 1 ulp (Highway's bound), then 1 + e, a divide
        // and two products each round once: < 8ε relative. Where e^g is
        // below FLT_MIN (g < −87.3) the result is |g|·e^g·|u| < 2e-36·|u| in
        // absolute value, and flushing it is allowed.
        const double tol = 8 * kEps * std::abs(want[i]) + 2e-36 * std::abs(u[i]);
        ASSERT_TRUE(margin.Check(std::abs(double{out[i]} - want[i]), tol)) << "n=" << n << " g=" << g[i];
      }
      SwiGlu(g.p, u.p, g.p, n);  // out aliases gate
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(SameBits(g[i], out[i])) << "in place n=" << n;
    }
  });
}

// ---------------------------------------------------------------------------
// Softmax, AttendOne, ArgMax

// The relative error of SIMD softmax entry i: x_i − max rounds (≤ u·|x_i −
// max|, which exp turns into the same relative error), exp itself ≤ 1 ulp,
// the f32 sum of n terms ≤ (n + 1)·u plus its terms' errors (≤ u·M + ε with
// M the largest finite |x_j − max|), one divide and one product: below
// ε·(|x_i − max| + M + n + 6).
double SoftmaxRelTol(const std::vector<float>& x, size_t i) {
  float mx = -kInf;
  for (float v : x) mx = std::max(mx, v);
  double spread = 0.0;
  for (float v : x) {
    if (std::isfinite(v)) spread = std::max(spread, double{mx} - v);
  }
  return kEps * ((double{mx} - x[i]) + spread + static_cast<double>(x.size()) + 6);
}

TEST(Softmax, BoundedWithExactZerosEveryTarget) {
  Margin margin("Softmax");
  ForEachTarget([&] {
    Rng rng(9);
    for (size_t n : Sizes()) {
      Buf<float> x(n, n % 4);
      rng.FillNormal(x.begin(), x.end(), 3.0f);
      for (size_t i = 1; i < n; i += 3) x[i] = -kInf;  // masked positions
      const std::vector<float> in(x.begin(), x.end());
      std::vector<float> want(in);
      ref::Softmax(want.data(), n);
      Softmax(x.p, n);
      double total = 0.0;
      for (size_t i = 0; i < n; ++i) {
        if (in[i] == -kInf) {
          ASSERT_TRUE(SameBits(x[i], 0.0f)) << "n=" << n << " i=" << i;
        } else {
          ASSERT_TRUE(margin.Check(std::abs(double{x[i]} - want[i]), SoftmaxRelTol(in, i) * want[i] + 1e-38))
              << "n=" << n << " i=" << i;
        }
        total += x[i];
      }
      EXPECT_NEAR(total, 1.0, (n + 8) * kEps) << n;
    }
    // Every entry masked: 0/0, as torch gives.
    std::vector<float> all(5, -kInf);
    Softmax(all.data(), all.size());
    for (float v : all) EXPECT_TRUE(std::isnan(v));
  });
}

TEST(AttendOne, BoundedEveryTarget) {
  Margin margin("AttendOne");
  ForEachTarget([&] {
    Rng rng(10);
    for (size_t n : {1, 2, 7, 16, 33, 64, 301}) {
      for (size_t d : {1, 8, 13, 16, 32, 64, 128}) {  // 1, 2, 4, 8 vectors: the sums in registers
        const size_t ld_k = d + 3, ld_v = d + 1;
        Buf<float> q(d, 1), keys(n * ld_k, 2), values(n * ld_v, 3), out(d, 1);
        rng.FillNormal(q.begin(), q.end());
        rng.FillNormal(keys.begin(), keys.end());
        rng.FillNormal(values.begin(), values.end());
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        std::vector<float> scores(n), want(d), want_p(n);
        ref::AttendOne(q.p, keys.p, ld_k, values.p, ld_v, n, d, scale, want_p.data(), want.data());
        AttendOne(q.p, keys.p, ld_k, values.p, ld_v, n, d, scale, scores.data(), out.p);
        // Scores: a length-d dot (h ≤ d + 3) and a product: error δ_j ≤
        // scale·(d + 4)·ε·Σ|q·K_j|. Shifting scores by ≤ Δ = max δ_j moves
        // each probability by ≤ 2Δ relative; softmax's own error is bounded
        // as in SoftmaxRelTol, the weighted sum over n rows by (n + 1)·ε.
        double delta = 0.0;
        std::vector<float> s(n);
        for (size_t j = 0; j < n; ++j) {
          double mag = 0.0;
          for (size_t e = 0; e < d; ++e) mag += std::abs(double{q[e]} * keys[j * ld_k + e]);
          delta = std::max(delta, scale * (d + 4) * kEps * mag);
          s[j] = scale * ref::Dot(q.p, keys.p + j * ld_k, d);
        }
        double p_tol = 0.0;
        for (size_t j = 0; j < n; ++j) p_tol = std::max(p_tol, SoftmaxRelTol(s, j));
        const double rel = 2 * delta + p_tol + (n + 1) * kEps;
        for (size_t e = 0; e < d; ++e) {
          double mag = 0.0;
          for (size_t j = 0; j < n; ++j) mag += want_p[j] * std::abs(values[j * ld_v + e]);
          ASSERT_TRUE(margin.Check(std::abs(double{out[e]} - want[e]), rel * mag + 1e-30))
              << "n=" << n << " d=" << d;
        }
        // The probabilities are Softmax(scale·Dot(q, K_j)) bit for bit, whichever way the scores were
        // summed (16 keys at a time on AVX-512 for d a multiple of 64).
        std::vector<float> p(n);
        for (size_t j = 0; j < n; ++j) p[j] = scale * Dot(q.p, keys.p + j * ld_k, d);
        Softmax(p.data(), n);
        for (size_t j = 0; j < n; ++j) ASSERT_TRUE(SameBits(scores[j], p[j])) << "n=" << n << " d=" << d;
      }
    }
  });
}

TEST(ArgMax, FirstMaximumAndNaNEveryTarget) {
  ForEachTarget([&] {
    Rng rng(11);
    EXPECT_EQ(ArgMax(nullptr, 0), 0u);
    std::vector<size_t> sizes = Sizes();
    sizes.push_back(65541);
    for (size_t n : sizes) {
      Buf<float> x(n, n % 4);
      rng.FillNormal(x.begin(), x.end());
      ASSERT_EQ(ArgMax(x.p, n), ref::ArgMax(x.p, n)) << n;
      // Ties: the lowest index wins.
      const size_t a = rng.Index(n), b = rng.Index(n);
      x[a] = x[b] = 100.0f;
      ASSERT_EQ(ArgMax(x.p, n), std::min(a, b)) << n;
      // NaNs never win, even before the maximum.
      for (size_t i = 0; i < n; i += 7) x[i] = kNaN;
      x[a] = x[b] = 100.0f;
      ASSERT_EQ(ArgMax(x.p, n), ref::ArgMax(x.p, n)) << n;
      ASSERT_EQ(ArgMax(x.p, n), std::min(a, b)) << n;
      // All -inf: the first; all NaN: 0 by convention.
      std::fill(x.begin(), x.end(), -kInf);
      if (n > 2) x[0] = kNaN;
      ASSERT_EQ(ArgMax(x.p, n), n > 2 ? 1u : 0u) << n;
      std::fill(x.begin(), x.end(), kNaN);
      ASSERT_EQ(ArgMax(x.p, n), 0u) << n;
    }
  });
}

// FindNonFinite on every stored dtype: a NaN, +inf or -inf planted at each
// position of interest must be found at exactly that index (the first one when
// two are planted), on every target, and equal the reference's answer; a
// clean buffer gives n. Exact integer results, no tolerance.
TEST(FindNonFinite, EveryDTypeEveryTarget) {
  const uint32_t f32_bad[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x7f800001u};
  const uint16_t bf16_bad[] = {0x7fc0, 0x7f80, 0xff80, 0xffff};
  const uint16_t f16_bad[] = {0x7e00, 0x7c00, 0xfc00, 0x7c01};
  ForEachTarget([&] {
    Rng rng(5);
    std::vector<size_t> sizes = Sizes();
    sizes.push_back(65541);
    for (size_t n : sizes) {
      for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
        const size_t es = DTypeSize(t);
        Buf<uint8_t> x(n * es, (n % 3) * es);
        for (size_t i = 0; i < n; ++i) {
          const float v = static_cast<float>(rng.Index(2001)) - 1000.0f;  // finite, any sign
          if (t == DType::kF32) std::memcpy(x.p + 4 * i, &v, 4);
          const uint16_t h = t == DType::kBF16 ? F32ToBf16(v) : F32ToF16(v);
          if (t != DType::kF32) std::memcpy(x.p + 2 * i, &h, 2);
        }
        ASSERT_EQ(FindNonFinite(t, x.p, n), n) << DTypeName(t) << " n=" << n;
        ASSERT_EQ(ref::FindNonFinite(t, x.p, n), n);
        for (int k = 0; k < 4; ++k) {
          const size_t a = rng.Index(n), b = rng.Index(n);
          std::vector<uint8_t> saved(x.p, x.p + n * es);
          for (size_t at : {a, b}) {
            if (t == DType::kF32) std::memcpy(x.p + 4 * at, &f32_bad[k], 4);
            if (t == DType::kBF16) std::memcpy(x.p + 2 * at, &bf16_bad[k], 2);
            if (t == DType::kF16) std::memcpy(x.p + 2 * at, &f16_bad[k], 2);
          }
          ASSERT_EQ(FindNonFinite(t, x.p, n), std::min(a, b)) << DTypeName(t) << " n=" << n << " k=" << k;
          ASSERT_EQ(ref::FindNonFinite(t, x.p, n), std::min(a, b));
          std::memcpy(x.p, saved.data(), saved.size());
        }
      }
    }
    // Block formats: a bad f16 scale in block b is reported at its first weight; the codes never are.
    for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ6_K}) {
      const size_t cols = 1024;
      std::vector<float> w(cols);
      for (float& v : w) v = static_cast<float>(rng.Index(200)) - 100.0f;
      std::vector<uint8_t> q(FormatRowBytes(f, cols));
      QuantizeRow(f, w.data(), cols, q.data());
      const DType t = f == WeightFormat::kQ8_0   ? DType::kQ8_0
                      : f == WeightFormat::kQ4_0 ? DType::kQ4_0
                                                 : DType::kQ6_K;
      const size_t elems = f == WeightFormat::kQ6_K ? 256 : 32;
      const size_t bytes = FormatRowBytes(f, elems);
      const size_t d_at = f == WeightFormat::kQ6_K ? kQ6_KD : 0;
      ASSERT_EQ(FindNonFinite(t, q.data(), cols), cols);
      const size_t b = cols / elems - 1;
      const uint16_t nan = 0x7e00;
      std::memcpy(q.data() + b * bytes + d_at, &nan, 2);
      EXPECT_EQ(FindNonFinite(t, q.data(), cols), b * elems);
      EXPECT_EQ(ref::FindNonFinite(t, q.data(), cols), b * elems);
    }
    // Integer types are finite whatever their bits.
    std::vector<uint32_t> ints(64, 0xffffffffu);
    EXPECT_EQ(FindNonFinite(DType::kI32, ints.data(), 64), 64u);
  });
}

// FindNanOrPosInf: NaN and +inf are found, -inf (a masked logit) is not.
TEST(FindNanOrPosInf, NanAndPlusInfButNotMinusInfEveryTarget) {
  ForEachTarget([&] {
    Rng rng(6);
    for (size_t n : Sizes()) {
      Buf<float> x(n, n % 4);
      rng.FillNormal(x.begin(), x.end());
      for (size_t i = 0; i < n; i += 3) x[i] = -kInf;
      ASSERT_EQ(FindNanOrPosInf(x.p, n), n) << n;
      ASSERT_EQ(ref::FindNanOrPosInf(x.p, n), n);
      for (float bad : {kNaN, kInf}) {
        const size_t a = rng.Index(n);
        const float keep = x[a];
        x[a] = bad;
        ASSERT_EQ(FindNanOrPosInf(x.p, n), a) << n;
        ASSERT_EQ(ref::FindNanOrPosInf(x.p, n), a);
        x[a] = keep;
      }
    }
  });
}

// ---------------------------------------------------------------------------
// CausalDepthwiseConv

struct ConvCase {
  ConvCase(size_t t, size_t c, size_t k, bool integers, Rng& rng)
      : t(t), c(c), k(k), ldx(c + 2), x(t * ldx, 1), w(c * k, 2), state(k > 0 ? (k - 1) * c : 1, 0) {
    auto fill = [&](float* b, float* e) { integers ? rng.FillInt(b, e) : rng.FillNormal(b, e); };
    fill(x.begin(), x.end());
    fill(w.begin(), w.end());
    fill(state.begin(), state.end());
  }
  size_t t, c, k, ldx;
  Buf<float> x, w, state;
};

TEST(CausalDepthwiseConv, ExactOnIntegersAndBoundedEveryTarget) {
  Margin margin("CausalDepthwiseConv");
  ForEachTarget([&] {
    Rng rng(12);
    for (size_t k : {1, 2, 3, 4, 7, 40}) {  // 40 exceeds the SIMD tap limit: reference path
      for (size_t c : {1, 3, 8, 17, 64, 67, 1027}) {
        for (size_t t : {1, 2, 6, 11}) {
          for (bool integers : {true, false}) {
            ConvCase cc(t, c, k, integers, rng);
            const size_t ldy = c + 1;
            std::vector<float> want(t * ldy), got(t * ldy);  // [t, ldy]
            std::vector<float> st_ref(cc.state.begin(), cc.state.end());
            std::vector<float> st(cc.state.begin(), cc.state.end());
            ref::CausalDepthwiseConv(cc.x.p, t, cc.ldx, c, cc.w.p, k, st_ref.data(), want.data(), ldy);
            CausalDepthwiseConv(cc.x.p, t, cc.ldx, c, cc.w.p, k, st.data(), got.data(), ldy);
            for (size_t r = 0; r < t; ++r) {
              for (size_t ch = 0; ch < c; ++ch) {
                const size_t i = r * ldy + ch;
                if (integers) {
                  ASSERT_TRUE(SameBits(got[i], want[i])) << "k=" << k << " c=" << c << " t=" << t;
                  continue;
                }
                // k FMAs in sequence: h ≤ k.
                double mag = 0.0;
                for (size_t j = 0; j < k; ++j) {
                  const size_t q = r + j;  // row of [state; x]
                  const float u = q < k - 1 ? cc.state[q * c + ch] : cc.x[(q - (k - 1)) * cc.ldx + ch];
                  mag += std::abs(double{cc.w[ch * k + j]} * u);
                }
                ASSERT_TRUE(margin.Check(std::abs(double{got[i]} - want[i]), k * kEps * mag))
                    << "k=" << k << " c=" << c;
              }
            }
            // The new state: the last k-1 rows of [state; x].
            for (size_t q = 0; q + 1 < k; ++q) {
              const size_t src = t + q;  // row of [state; x]
              for (size_t ch = 0; ch < c; ++ch) {
                const float expect =
                    src < k - 1 ? cc.state[src * c + ch] : cc.x[(src - (k - 1)) * cc.ldx + ch];
                ASSERT_TRUE(SameBits(st[q * c + ch], expect)) << "state k=" << k << " t=" << t;
                ASSERT_TRUE(SameBits(st_ref[q * c + ch], expect)) << "ref state k=" << k << " t=" << t;
              }
            }
          }
        }
      }
    }
  });
}

// Streaming: the sequence fed in uneven chunks equals the sequence at once.
TEST(CausalDepthwiseConv, ChunkedEqualsWholeEveryTarget) {
  ForEachTarget([&] {
    Rng rng(13);
    const size_t t = 23, c = 37, k = 4;
    ConvCase cc(t, c, k, /*integers=*/false, rng);
    std::vector<float> st0(cc.state.begin(), cc.state.end());
    std::vector<float> whole(t * c), chunked(t * c);  // [t, c]
    std::vector<float> st = st0;
    CausalDepthwiseConv(cc.x.p, t, cc.ldx, c, cc.w.p, k, st.data(), whole.data(), c);
    const std::vector<float> st_whole = st;
    st = st0;
    size_t r = 0;
    for (size_t len : {1, 2, 1, 6, 3, 10}) {
      CausalDepthwiseConv(cc.x.p + r * cc.ldx, len, cc.ldx, c, cc.w.p, k, st.data(), chunked.data() + r * c,
                          c);
      r += len;
    }
    ASSERT_EQ(r, t);
    for (size_t i = 0; i < t * c; ++i) ASSERT_TRUE(SameBits(chunked[i], whole[i])) << i;
    for (size_t i = 0; i < st.size(); ++i) ASSERT_TRUE(SameBits(st[i], st_whole[i])) << i;
  });
}

// ---------------------------------------------------------------------------

TEST(Dispatch, ChoosesTheBestSupportedTarget) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  // Lower bits are better targets; the list is in increasing bit order.
  EXPECT_STREQ(ChosenTarget(), hwy::TargetName(targets.front()));
  std::string all;
  for (int64_t t : targets) all += std::string(hwy::TargetName(t)) + " ";
  RecordProperty("targets", all);
  RecordProperty("chosen", ChosenTarget());
  std::printf("compiled+supported targets: %s; chosen: %s\n", all.c_str(), ChosenTarget());
}

}  // namespace
}  // namespace lfmvox::ops
