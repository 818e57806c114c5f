#include "blocks/short_conv.h"

#include "blocks/weights.h"
#include "ops/ops.h"

namespace lfmvox {

void ShortConv::Forward(const float* xn, size_t rows, std::span<const ConvSeq> seqs, float* bcx, float* c,
                        float* y, ThreadTeam& team) const {
  const size_t H = hidden();
  in_proj.Forward(xn, rows, H, bcx, 3 * H, team);
  for (size_t r = 0; r < rows; ++r) {
    float* row = bcx + r * 3 * H;
    ops::Mul(row, row + 2 * H, row, H);  // B ⊙ x, into the B slot
  }
  for (const ConvSeq& s : seqs) {
    ops::CausalDepthwiseConv(bcx + s.row0 * 3 * H, s.n, 3 * H, H, conv.data(), kernel, s.state,
                             c + s.row0 * H, H);
  }
  for (size_t r = 0; r < rows; ++r) {
    float* cr = c + r * H;
    if (conv_bias.size()) ops::Add(cr, conv_bias.data(), cr, H);
    ops::Mul(bcx + r * 3 * H + H, cr, cr, H);  // C ⊙ conv
  }
  out_proj.Forward(c, rows, H, y, H, team);
}

Status LoadShortConv(const Checkpoint& ckpt, const std::string& prefix, int64_t hidden, int64_t kernel,
                     bool with_bias, ShortConv* conv) {
  conv->kernel = static_cast<size_t>(kernel);
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, prefix + "in_proj", 3 * hidden, hidden, with_bias, &conv->in_proj));
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, prefix + "out_proj", hidden, hidden, with_bias, &conv->out_proj));
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, prefix + "conv.weight", Shape{hidden, 1, kernel}, &conv->conv));
  if (with_bias) LFM_RETURN_IF_ERROR(LoadF32(ckpt, prefix + "conv.bias", Shape{hidden}, &conv->conv_bias));
  return Status::Ok();
}

}  // namespace lfmvox
