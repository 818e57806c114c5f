// RMSNorm over rows (or over each head of a row, for q/k norms):
//   y = w ⊙ x / sqrt(mean(x²) + eps), the mean accumulated in double (ops::RmsNorm).
#pragma once

#include <string>

#include "base/aligned.h"
#include "base/status.h"
#include "io/safetensors.h"

namespace lfmvox {

struct RmsNorm {
  AlignedBuffer<float> weight;  // [d]
  float eps = 1e-5f;

  size_t dim() const { return weight.size(); }
  // y[r] = norm(x[r]) for n rows of dim(); y may alias x.
  void Forward(const float* x, size_t n, size_t ldx, float* y, size_t ldy) const;
  // In place over `heads` consecutive slices of dim() in each of n rows (per-head q/k norms).
  void ForwardHeads(float* x, size_t n, size_t ldx, size_t heads) const;
};

// Loads `name` (a [d] vector) with the given eps.
Status LoadRmsNorm(const Checkpoint& ckpt, const std::string& name, int64_t d, float eps, RmsNorm* norm);

}  // namespace lfmvox
