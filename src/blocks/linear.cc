#include "blocks/linear.h"

#include "blocks/weights.h"

namespace lfmvox {

void Linear::Forward(const float* x, size_t n, size_t ldx, float* y, size_t ldy, ThreadTeam& team) const {
  ops::MatMul(x, n, ldx, w, bias.size() ? bias.data() : nullptr, y, ldy, team);
}

Status LoadLinear(const Checkpoint& ckpt, const std::string& name, int64_t out, int64_t in, bool with_bias,
                  Linear* linear) {
  LFM_ASSIGN_OR_RETURN(linear->w, LoadMatrix(ckpt, name + ".weight", out, in));
  if (with_bias) LFM_RETURN_IF_ERROR(LoadF32(ckpt, name + ".bias", Shape{out}, &linear->bias));
  return Status::Ok();
}

}  // namespace lfmvox
