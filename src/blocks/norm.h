// Normalisations over rows:
//   RMSNorm   y = w ⊙ x / sqrt(mean(x²) + eps), the mean accumulated in double (ops::RmsNorm); also
//             over each head of a row, for q/k norms;
//   LayerNorm y = γ ⊙ (x − mean) / sqrt(var + eps) + β, torch's nn.LayerNorm with bias, mean and biased
//             variance accumulated in double (ops::LayerNorm).
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

struct LayerNorm {
  AlignedBuffer<float> gamma;  // [d] `weight`
  AlignedBuffer<float> beta;   // [d] `bias`
  float eps = 1e-5f;

  size_t dim() const { return gamma.size(); }
  // y[r] = norm(x[r]) for n rows of dim(); y may alias x. Each row is independent of the others, so a
  // caller may split the rows over threads.
  void Forward(const float* x, size_t n, size_t ldx, float* y, size_t ldy) const;
};

// Loads `<name>.weight` and `<name>.bias` ([d] each) with the given eps.
Status LoadLayerNorm(const Checkpoint& ckpt, const std::string& name, int64_t d, float eps, LayerNorm* norm);

}  // namespace lfmvox
