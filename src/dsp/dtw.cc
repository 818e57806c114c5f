#include "dsp/dtw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/status.h"

namespace lfmvox {
namespace {

constexpr size_t kMaxCells = size_t{1} << 26;

Status CheckShape(size_t have, size_t T, size_t F) {
  if (T == 0 || F == 0) return InvalidArgument("an alignment needs at least one token and one frame");
  if (T > kMaxCells / F)
    return OutOfRange(StrFormat("an alignment of %zu tokens × %zu frames is too large", T, F));
  if (have != T * F) return InvalidArgument(StrFormat("%zu values are not %zu × %zu", have, T, F));
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::pair<size_t, size_t>>> DtwPath(std::span<const float> cost, size_t T, size_t F) {
  LFM_RETURN_IF_ERROR(CheckShape(cost.size(), T, F));
  for (float c : cost) {
    if (!std::isfinite(c)) return InvalidArgument("an alignment cost is not finite");
  }
  // acc[(i + 1)·(F + 1) + j + 1]: the cheapest path to cell (i, j); the border row and column are
  // unreachable except the corner. step: how each cell was reached (0 diagonal, 1 down, 2 right).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> acc((T + 1) * (F + 1), inf);
  std::vector<uint8_t> step(T * F, 0);
  acc[0] = 0;
  for (size_t j = 1; j <= F; ++j) {
    for (size_t i = 1; i <= T; ++i) {
      const double c0 = acc[(i - 1) * (F + 1) + j - 1], c1 = acc[(i - 1) * (F + 1) + j],
                   c2 = acc[i * (F + 1) + j - 1];
      double best = c0;
      uint8_t how = 0;
      if (c1 < best) best = c1, how = 1;
      if (c2 < best) best = c2, how = 2;
      acc[i * (F + 1) + j] = cost[(i - 1) * F + j - 1] + best;
      step[(i - 1) * F + j - 1] = how;
    }
  }
  // Back from (T − 1, F − 1).
  std::vector<std::pair<size_t, size_t>> path;
  path.reserve(T + F);
  size_t i = T - 1, j = F - 1;
  while (true) {
    path.emplace_back(i, j);
    if (i == 0 && j == 0) break;
    if (i == 0) {
      --j;
      continue;
    }
    if (j == 0) {
      --i;
      continue;
    }
    const uint8_t how = step[i * F + j];
    if (how == 0) {
      --i;
      --j;
    } else if (how == 1) {
      --i;
    } else {
      --j;
    }
  }
  std::reverse(path.begin(), path.end());
  return path;
}

Result<std::vector<size_t>> DtwRowStarts(std::span<const float> cost, size_t T, size_t F) {
  LFM_ASSIGN_OR_RETURN(const auto path, DtwPath(cost, T, F));
  std::vector<size_t> starts(T, F);
  for (const auto& [i, j] : path) starts[i] = std::min(starts[i], j);
  return starts;
}

Status AttentionToCost(std::span<float> weights, size_t T, size_t F, size_t width) {
  LFM_RETURN_IF_ERROR(CheckShape(weights.size(), T, F));
  if (width == 0 || width % 2 == 0) return InvalidArgument("the median filter's width must be odd");
  for (size_t j = 0; j < F; ++j) {
    double mean = 0, sq = 0;
    for (size_t i = 0; i < T; ++i) mean += weights[i * F + j];
    mean /= static_cast<double>(T);
    for (size_t i = 0; i < T; ++i) sq += (weights[i * F + j] - mean) * (weights[i * F + j] - mean);
    const double sd = std::sqrt(sq / static_cast<double>(T));
    for (size_t i = 0; i < T; ++i) {
      weights[i * F + j] = sd > 0 ? static_cast<float>((weights[i * F + j] - mean) / sd) : 0.0f;
    }
  }
  const size_t half = width / 2;
  std::vector<float> row(F), win(width);
  for (size_t i = 0; i < T; ++i) {
    std::copy_n(weights.begin() + static_cast<std::ptrdiff_t>(i * F), F, row.begin());
    for (size_t j = 0; j < F; ++j) {
      for (size_t w = 0; w < width; ++w) {
        // Reflection at the edges (scipy's / torch's "reflect" padding: the edge sample is not repeated).
        int64_t k = static_cast<int64_t>(j + w) - static_cast<int64_t>(half);
        const int64_t n = static_cast<int64_t>(F);
        if (n == 1) {
          k = 0;
        } else {
          const int64_t period = 2 * (n - 1);
          k = ((k % period) + period) % period;
          if (k >= n) k = period - k;
        }
        win[w] = row[static_cast<size_t>(k)];
      }
      std::nth_element(win.begin(), win.begin() + static_cast<std::ptrdiff_t>(half), win.end());
      weights[i * F + j] = -win[half];
    }
  }
  return Status::Ok();
}

}  // namespace lfmvox
