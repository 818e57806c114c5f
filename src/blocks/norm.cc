#include "blocks/norm.h"

#include "blocks/weights.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"

namespace lfmvox {

void RmsNorm::Forward(const float* x, size_t n, size_t ldx, float* y, size_t ldy) const {
  for (size_t r = 0; r < n; ++r) ops::RmsNorm(x + r * ldx, weight.data(), dim(), eps, y + r * ldy);
}

void RmsNorm::ForwardHeads(float* x, size_t n, size_t ldx, size_t heads) const {
  const size_t d = dim();
  for (size_t r = 0; r < n; ++r) {
    for (size_t h = 0; h < heads; ++h) {
      float* v = x + r * ldx + h * d;
      ops::RmsNorm(v, weight.data(), d, eps, v);
    }
  }
}

Status LoadRmsNorm(const Checkpoint& ckpt, const std::string& name, int64_t d, float eps, RmsNorm* norm) {
  norm->eps = eps;
  return LoadF32(ckpt, name, Shape{d}, &norm->weight);
}

void LayerNorm::Forward(const float* x, size_t n, size_t ldx, float* y, size_t ldy) const {
  for (size_t r = 0; r < n; ++r) {
    ops::LayerNorm(x + r * ldx, gamma.data(), beta.data(), dim(), eps, y + r * ldy);
  }
}

Status LoadLayerNorm(const Checkpoint& ckpt, const std::string& name, int64_t d, float eps, LayerNorm* norm) {
  norm->eps = eps;
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, name + ".weight", Shape{d}, &norm->gamma));
  return LoadF32(ckpt, name + ".bias", Shape{d}, &norm->beta);
}

}  // namespace lfmvox
