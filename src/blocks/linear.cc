#include "blocks/linear.h"

#include "blocks/weights.h"

namespace lfmvox {

void Linear::Forward(const float* x, size_t n, size_t ldx, float* y, size_t ldy, ThreadTeam& team) const {
  ops::MatMul(x, n, ldx, w, bias.size() ? bias.data() : nullptr, y, ldy, team);
}

void ForwardShared(const float* x, size_t n, size_t ldx, std::span<const LinearOut> outs, ThreadTeam& team) {
  constexpr size_t kMax = 8;
  if (outs.size() > kMax) {  // more than any block shares: one at a time
    for (const LinearOut& o : outs) o.linear->Forward(x, n, ldx, o.y, o.ldy, team);
    return;
  }
  ops::MatMulOut mo[kMax];
  for (size_t i = 0; i < outs.size(); ++i) {
    const Linear& l = *outs[i].linear;
    mo[i] = {&l.w, l.bias.size() ? l.bias.data() : nullptr, outs[i].y, outs[i].ldy};
  }
  ops::MatMulShared(x, n, ldx, {mo, outs.size()}, team);
}

Status LoadLinear(const Checkpoint& ckpt, const std::string& name, int64_t out, int64_t in, bool with_bias,
                  Linear* linear) {
  LFM_ASSIGN_OR_RETURN(linear->w, LoadMatrix(ckpt, name + ".weight", out, in));
  if (with_bias) LFM_RETURN_IF_ERROR(LoadF32(ckpt, name + ".bias", Shape{out}, &linear->bias));
  return Status::Ok();
}

}  // namespace lfmvox
