// Linear: y = x · Wᵀ (+ b), PyTorch's nn.Linear with W [out, in] used in place
// from the checkpoint and an optional f32 bias.
#pragma once

#include <span>
#include <string>

#include "base/aligned.h"
#include "base/status.h"
#include "io/safetensors.h"
#include "ops/ops.h"

namespace lfmvox {

class ThreadTeam;

struct Linear {
  ops::Weight w;              // [out, in]
  AlignedBuffer<float> bias;  // [out], empty when the layer has none

  size_t out() const { return w.rows; }
  size_t in() const { return w.cols; }
  // y[n, out] = x[n, in] · Wᵀ + b; rows ldx / ldy apart. Each y row depends only on its x row
  // (ops::MatMul's contract), so rows from different sessions batch bit-exactly.
  void Forward(const float* x, size_t n, size_t ldx, float* y, size_t ldy, ThreadTeam& team) const;
};

// Several Linears of the same input: y_i[n, out_i] = x · W_iᵀ + b_i, each exactly its Forward's, in one
// ops::MatMulShared (X prepared once, one pass of the team, where the weights' kernel allows).
struct LinearOut {
  const Linear* linear = nullptr;
  float* y = nullptr;
  size_t ldy = 0;
};
void ForwardShared(const float* x, size_t n, size_t ldx, std::span<const LinearOut> outs, ThreadTeam& team);

// Loads `<name>.weight` [out, in] and, when with_bias, `<name>.bias` [out].
Status LoadLinear(const Checkpoint& ckpt, const std::string& name, int64_t out, int64_t in, bool with_bias,
                  Linear* linear);

}  // namespace lfmvox
