#include "blocks/rope.h"

#include <cmath>

#include "ops/ops.h"

namespace lfmvox {

RopeTable::RopeTable(double theta, size_t head_dim, RopeStyle style, RopeAngles angles, size_t rotary_dims)
    : hd_(head_dim), rd_(rotary_dims == 0 ? head_dim : rotary_dims), style_(style), angles_(angles) {
  const size_t half = rd_ / 2;
  inv_freq_.Reset(half);
  for (size_t i = 0; i < half; ++i) {
    if (angles_ == RopeAngles::kF64) {
      const double e = static_cast<double>(2 * i) / static_cast<double>(rd_);
      inv_freq_[i] = static_cast<float>(1.0 / std::pow(theta, e));
      continue;
    }
    const float e = static_cast<float>(2 * i) / static_cast<float>(rd_);
    const float p = static_cast<float>(std::pow(theta, static_cast<double>(e)));
    inv_freq_[i] = 1.0f / p;
  }
}

void RopeTable::Angles(int64_t pos, float* cs) const {
  const size_t half = rd_ / 2;
  if (angles_ == RopeAngles::kF64) {
    for (size_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(pos) * static_cast<double>(inv_freq_[i]);
      cs[i] = static_cast<float>(std::cos(a));
      cs[half + i] = static_cast<float>(std::sin(a));
    }
    return;
  }
  const float p = static_cast<float>(pos);
  for (size_t i = 0; i < half; ++i) {
    const double a = static_cast<double>(p * inv_freq_[i]);
    cs[i] = static_cast<float>(std::cos(a));
    cs[half + i] = static_cast<float>(std::sin(a));
  }
}

void RopeTable::Apply(float* x, size_t heads, const float* cs) const {
  const size_t half = rd_ / 2;
  for (size_t h = 0; h < heads; ++h) {
    float* v = x + h * hd_;
    if (style_ == RopeStyle::kSplitHalf) {
      ops::RopeSplitHalf(v, rd_, cs, cs + half);
    } else {
      ops::RopeInterleaved(v, rd_, cs, cs + half);
    }
  }
}

}  // namespace lfmvox
