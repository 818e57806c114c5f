// LFM2's gated short convolution (transformers `Lfm2ShortConv`), over rows of several independent
// sequences, each carrying its own history:
//   B | C | x = in_proj(xn);  u = B ⊙ x;  c = causal depthwise conv(u) (+ bias);  y = out_proj(C ⊙ c)
// Shapes (docs/style.md legend): R rows, H hidden, K kernel; the state of a sequence is its last K-1
// rows of u [K-1, H]. B, C and x name the three gates (the module's names), not shape letters.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "base/aligned.h"
#include "base/status.h"
#include "blocks/linear.h"

namespace lfmvox {

class ThreadTeam;

// A sequence's share of a batched call: rows [row0, row0 + n) continue the history in `state`.
struct ConvSeq {
  float* state = nullptr;  // [K-1, H], oldest first
  size_t row0 = 0;
  size_t n = 0;
};

struct ShortConv {
  Linear in_proj;                  // [3H, H]  rows B | C | x
  AlignedBuffer<float> conv;       // [H, K]   tap K-1 multiplies the current step
  AlignedBuffer<float> conv_bias;  // [H], empty without bias
  Linear out_proj;                 // [H, H]
  size_t kernel = 0;               // K

  size_t hidden() const { return out_proj.out(); }
  size_t state_size() const { return (kernel - 1) * hidden(); }
  // y [R, H] from xn [R, H]; bcx [R, 3H] and c [R, H] are scratch.
  void Forward(const float* xn, size_t rows, std::span<const ConvSeq> seqs, float* bcx, float* c, float* y,
               ThreadTeam& team) const;
};

// Loads `<prefix>in_proj`, `<prefix>conv`, `<prefix>out_proj` (biases when with_bias).
Status LoadShortConv(const Checkpoint& ckpt, const std::string& prefix, int64_t hidden, int64_t kernel,
                     bool with_bias, ShortConv* conv);

}  // namespace lfmvox
