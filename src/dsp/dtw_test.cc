// DTW alignment (dsp/dtw.h): the path against an exhaustive search of every monotonic path on small
// random matrices, a block-diagonal case whose starts are known, Whisper's column standardization and
// reflected median filter on hand-computed values, and the errors.
#include "dsp/dtw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace lfmvox {
namespace {

// The least sum over every path from (0, 0) to (T − 1, F − 1) with steps (1, 1), (1, 0), (0, 1).
double BruteMin(const std::vector<float>& c, size_t T, size_t F, size_t i = 0, size_t j = 0) {
  const double here = c[i * F + j];
  if (i == T - 1 && j == F - 1) return here;
  double best = std::numeric_limits<double>::infinity();
  if (i + 1 < T && j + 1 < F) best = std::min(best, BruteMin(c, T, F, i + 1, j + 1));
  if (i + 1 < T) best = std::min(best, BruteMin(c, T, F, i + 1, j));
  if (j + 1 < F) best = std::min(best, BruteMin(c, T, F, i, j + 1));
  return here + best;
}

TEST(Dtw, PathIsTheCheapestMonotonicPath) {
  uint64_t r = 7;
  for (size_t T = 1; T <= 4; ++T) {
    for (size_t F = 1; F <= 6; ++F) {
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<float> c(T * F);
        for (float& v : c) {
          r = r * 6364136223846793005ull + 1442695040888963407ull;
          v = static_cast<float>((r >> 40) % 1000) / 100.0f - 5.0f;  // multiples of 0.01: exact sums
        }
        auto path = DtwPath(c, T, F);
        ASSERT_TRUE(path.ok()) << path.status().message();
        ASSERT_EQ(path->front(), std::make_pair(size_t{0}, size_t{0}));
        ASSERT_EQ(path->back(), std::make_pair(T - 1, F - 1));
        double sum = 0;
        for (size_t k = 0; k < path->size(); ++k) {
          const auto [i, j] = (*path)[k];
          sum += c[i * F + j];
          if (k > 0) {
            const auto [pi, pj] = (*path)[k - 1];
            ASSERT_TRUE(i - pi <= 1 && j - pj <= 1 && (i != pi || j != pj)) << "a step that is not monotonic";
          }
        }
        EXPECT_NEAR(sum, BruteMin(c, T, F), 1e-9) << T << "x" << F;
        auto starts = DtwRowStarts(c, T, F);
        ASSERT_TRUE(starts.ok());
        for (size_t i = 1; i < T; ++i) EXPECT_LE((*starts)[i - 1], (*starts)[i]);
        EXPECT_EQ((*starts)[0], 0u);
      }
    }
  }
}

TEST(Dtw, BlockDiagonalStarts) {
  // Row i is cheap on frames [3i, 3i + 3): the path takes each block in turn.
  const size_t T = 4, F = 12;
  std::vector<float> c(T * F, 1.0f);
  for (size_t i = 0; i < T; ++i) {
    for (size_t j = 3 * i; j < 3 * i + 3; ++j) c[i * F + j] = 0.0f;
  }
  auto starts = DtwRowStarts(c, T, F);
  ASSERT_TRUE(starts.ok());
  EXPECT_EQ(*starts, (std::vector<size_t>{0, 3, 6, 9}));
}

TEST(Dtw, AttentionToCostStandardizesThenFiltersThenNegates) {
  // Columns over 3 rows: [1, 2, 3] → (x − 2) / √(2/3); a constant column → 0.
  const size_t T = 3, F = 2;
  std::vector<float> w = {1, 5, 2, 5, 3, 5};
  ASSERT_TRUE(AttentionToCost(w, T, F, 1).ok());
  const float z = static_cast<float>(1.0 / std::sqrt(2.0 / 3.0));
  EXPECT_NEAR(w[0], z, 1e-6);  // negated: −(−z)
  EXPECT_NEAR(w[2], 0.0f, 1e-6);
  EXPECT_NEAR(w[4], -z, 1e-6);
  EXPECT_EQ(w[1], 0.0f);
  EXPECT_EQ(w[5], 0.0f);

  // The median filter alone: one row standardizes to itself times a constant only with T = 1, which
  // gives zeros; so use two rows that are mirror images (each column ±1), then width 3 with reflection.
  std::vector<float> m = {1, 9, 2, 8, 3, 9, 1, 8, 2, 7};  // row 0 and its mirror, row 1 = 10 − row 0
  ASSERT_TRUE(AttentionToCost(m, 2, 5, 3).ok());
  // Row 0 standardized: sign(x − 5) = [−1, 1, −1, 1, −1]; its width-3 medians with the edges reflected
  // (frame −1 is frame 1, frame 5 is frame 3) are [1, −1, 1, −1, 1]; negated, the row itself again.
  const std::vector<float> want0 = {-1, 1, -1, 1, -1};
  for (size_t j = 0; j < 5; ++j) EXPECT_EQ(m[j], want0[j]) << j;
  for (size_t j = 0; j < 5; ++j) EXPECT_EQ(m[5 + j], -want0[j]) << j;
}

TEST(Dtw, Errors) {
  std::vector<float> c = {0, 1, 2, 3};
  EXPECT_FALSE(DtwPath(c, 0, 4).ok());
  EXPECT_FALSE(DtwPath(c, 2, 3).ok());
  c[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(DtwPath(c, 2, 2).ok());
  std::vector<float> w = {1, 2};
  EXPECT_FALSE(AttentionToCost(w, 1, 2, 2).ok());
}

}  // namespace
}  // namespace lfmvox
