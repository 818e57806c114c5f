// Monotonic alignment of a token sequence to audio frames from a [tokens, frames] similarity matrix, as
// Whisper's word timing does it (openai-whisper timing.py, find_alignment): each frame's column is
// standardized over the tokens, a median filter runs along the frames, then dynamic time warping finds
// the cheapest monotonic path through the negated matrix from (0, 0) to (T − 1, F − 1); a token starts at
// the first frame its row takes on the path.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "base/status.h"

namespace lfmvox {

// The cheapest monotonic path through cost [T, F] (row-major) from (0, 0) to (T − 1, F − 1): it moves
// by (1, 1), (1, 0) or (0, 1) and minimizes the sum of the costs it visits; of equal sums it takes the
// diagonal first, then the step down. The cells (row, frame) in order. Fails when T or F is 0, T·F
// exceeds 2^26 cells, or a cost is not finite.
Result<std::vector<std::pair<size_t, size_t>>> DtwPath(std::span<const float> cost, size_t T, size_t F);

// The path's first frame in each row: non-decreasing, starts[0] = 0.
Result<std::vector<size_t>> DtwRowStarts(std::span<const float> cost, size_t T, size_t F);

// The similarity `weights` [T, F] made into DTW costs in place, Whisper's way: each column standardized
// over the rows (mean 0, standard deviation 1; a constant column becomes 0), then a median filter of
// `width` frames (odd; the edges reflect) along each row, then negated.
Status AttentionToCost(std::span<float> weights, size_t T, size_t F, size_t width = 7);

}  // namespace lfmvox
