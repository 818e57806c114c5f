// The SwiGLU feed-forward of LFM2 and the depthformer:
//   out = w2(silu(w1 · x) ⊙ (w3 · x))      w1, w3 [F, H] (gate, up), w2 [H, F]
// Shapes (docs/style.md legend): H the width of the caller's rows, F the FFN width.
#pragma once

#include <string>

#include "base/status.h"
#include "blocks/linear.h"

namespace lfmvox {

struct SwiGluFfn {
  Linear w1;  // [F, H] gate
  Linear w3;  // [F, H] up
  Linear w2;  // [H, F] down

  size_t width() const { return w1.out(); }  // F
  // out[n, H] = FFN(xn[n, H]); gate and up are scratch [n, F] each. out may alias xn.
  void Forward(const float* xn, size_t n, float* gate, float* up, float* out, ThreadTeam& team) const;
};

// Loads `<prefix>w1`, `w3`, `w2` (no biases) for model width d and FFN width f.
Status LoadSwiGluFfn(const Checkpoint& ckpt, const std::string& prefix, int64_t d, int64_t f, SwiGluFfn* ffn);

}  // namespace lfmvox
