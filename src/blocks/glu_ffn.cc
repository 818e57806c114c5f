#include "blocks/glu_ffn.h"

#include "ops/ops.h"

namespace lfmvox {

void SwiGluFfn::Forward(const float* xn, size_t n, float* gate, float* up, float* out,
                        ThreadTeam& team) const {
  const size_t D = w1.in(), F = width();
  const LinearOut outs[] = {{&w1, gate, F}, {&w3, up, F}};
  ForwardShared(xn, n, D, outs, team);
  ops::SwiGlu(gate, up, gate, n * F);
  w2.Forward(gate, n, F, out, D, team);
}

Status LoadSwiGluFfn(const Checkpoint& ckpt, const std::string& prefix, int64_t d, int64_t f,
                     SwiGluFfn* ffn) {
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, prefix + "w1", f, d, false, &ffn->w1));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, prefix + "w3", f, d, false, &ffn->w3));
  return LoadLinear(ckpt, prefix + "w2", d, f, false, &ffn->w2);
}

}  // namespace lfmvox
