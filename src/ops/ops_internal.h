// Helpers shared by the reference and SIMD kernels; not part of the ops API.
#pragma once

#include <cstddef>
#include <cstring>

namespace lfmvox::ops::internal {

// After a causal convolution of `t` new rows x[t, c] (rows ldx apart), makes
// state[hist, c] (dense) hold the last `hist` rows of the sequence [state; x].
inline void AdvanceConvState(const float* x, size_t t, size_t ldx, size_t c, size_t hist, float* state) {
  const size_t row_bytes = c * sizeof(float);
  if (t >= hist) {
    for (size_t q = 0; q < hist; ++q) std::memcpy(state + q * c, x + (t - hist + q) * ldx, row_bytes);
    return;
  }
  std::memmove(state, state + t * c, (hist - t) * row_bytes);
  for (size_t q = 0; q < t; ++q) std::memcpy(state + (hist - t + q) * c, x + q * ldx, row_bytes);
}

}  // namespace lfmvox::ops::internal
