// Rotary position embedding tables. RopeAngles::kF32 forms them in f32 exactly as transformers (LFM2)
// and liquid-audio (`precompute_freqs_cis`) do:
//   inv_freq[i] = 1 / f32(θ^(f32(2i) / f32(hd))),  angle = f32(f32(pos) · inv_freq[i]),
//   cos/sin of the angle evaluated in double and rounded to f32.
// RopeAngles::kF64 is the LFM3 oracle's form (decision 1 of its README):
//   inv_freq[i] = f32(1 / θ^(2i / hd)) in double,  angle = double(pos) · double(inv_freq[i]),
//   cos/sin in double, rounded to f32.
// Partial rotary (rotary_dims < head_dim, the HF `partial_rotary_factor` "default" form): only the first
// rotary_dims of each head are rotated, as if the head were rotary_dims wide (the frequencies use
// rotary_dims in place of hd, the pairs are those of a rotary_dims-wide head); the rest pass unchanged.
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
  // rotary_dims: 0 or head_dim rotates the whole head; else an even count below head_dim.
  RopeTable(double theta, size_t head_dim, RopeStyle style, RopeAngles angles = RopeAngles::kF32,
            size_t rotary_dims = 0);

  size_t head_dim() const { return hd_; }
  size_t rotary_dims() const { return rd_; }
  // cs[0, rd/2) = cos, cs[rd/2, rd) = sin for position pos (rd = rotary_dims(), hd without partial rotary).
  void Angles(int64_t pos, float* cs) const;
  // Rotates `heads` consecutive heads of x in place by the angles cs (from Angles).
  void Apply(float* x, size_t heads, const float* cs) const;
  const float* inv_freq() const { return inv_freq_.data(); }  // [rd/2]

 private:
  AlignedBuffer<float> inv_freq_;  // [rd/2]
  size_t hd_ = 0;
  size_t rd_ = 0;  // rotated dims at the start of each head
  RopeStyle style_ = RopeStyle::kSplitHalf;
  RopeAngles angles_ = RopeAngles::kF32;
};

}  // namespace lfmvox
