// Rotary position embedding tables. RopeAngles::kF32 forms them in f32 exactly as transformers (LFM2)
// and liquid-audio (`precompute_freqs_cis`) do:
//   inv_freq[i] = 1 / f32(θ^(f32(2i) / f32(hd))),  angle = f32(f32(pos) · inv_freq[i]),
//   cos/sin of the angle evaluated in double and rounded to f32.
// RopeAngles::kF64 is the LFM3 oracle's form (decision 1 of its README):
//   inv_freq[i] = f32(1 / θ^(2i / hd)) in double,  angle = double(pos) · double(inv_freq[i]),
//   cos/sin in double, rounded to f32.
// Two layouts of the pairs within a head:
//   kSplitHalf   (NeoX, transformers):  (x[i], x[i + hd/2])
//   kInterleaved (GPT-J, liquid-audio): (x[2i], x[2i + 1])
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/aligned.h"

namespace lfmvox {

enum class RopeStyle { kSplitHalf, kInterleaved };
enum class RopeAngles { kF32, kF64 };

class RopeTable {
 public:
  RopeTable() = default;
  RopeTable(double theta, size_t head_dim, RopeStyle style, RopeAngles angles = RopeAngles::kF32);

  size_t head_dim() const { return hd_; }
  // cs[0, hd/2) = cos, cs[hd/2, hd) = sin for position pos.
  void Angles(int64_t pos, float* cs) const;
  // Rotates `heads` consecutive heads of x in place by the angles cs (from Angles).
  void Apply(float* x, size_t heads, const float* cs) const;
  const float* inv_freq() const { return inv_freq_.data(); }  // [hd/2]

 private:
  AlignedBuffer<float> inv_freq_;  // [hd/2]
  size_t hd_ = 0;
  RopeStyle style_ = RopeStyle::kSplitHalf;
  RopeAngles angles_ = RopeAngles::kF32;
};

}  // namespace lfmvox
