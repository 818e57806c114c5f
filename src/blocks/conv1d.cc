#include "blocks/conv1d.h"

#include <cstring>
#include <vector>

#include "blocks/weights.h"
#include "tensor/matrix.h"

namespace lfmvox {

namespace {

// The tensor's format, if it is one whose elements can be permuted one by one (F32, BF16, F16).
Result<WeightFormat> PlainFormat(const TensorView& t, const std::string& name) {
  WeightFormat f;
  if (!WeightFormatForDType(t.dtype, &f) || IsBlockFormat(f) || !ops::HasMatMulKernel(f)) {
    return Unimplemented(
        "convolution weight " + name + " is stored as " + DTypeName(t.dtype) +
        "; convolutions take F32, BF16 or F16 weights; convert the checkpoint to one of them");
  }
  return f;
}

Status LoadBias(const Checkpoint& ckpt, const std::string& name, int64_t out, size_t repeat,
                AlignedBuffer<float>* bias) {
  AlignedBuffer<float> b;
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, name + ".bias", Shape{out}, &b));
  bias->Reset(static_cast<size_t>(out) * repeat);
  for (size_t r = 0; r < repeat; ++r) std::memcpy(bias->data() + r * out, b.data(), out * sizeof(float));
  return Status::Ok();
}

}  // namespace

void CausalConv1d::Forward(const float* window, size_t n, float* y, size_t ldy, ThreadTeam& team) const {
  const float* b = bias.size() ? bias.data() : nullptr;
  if (rows.size()) return ops::MatMul(window, n, in, dense, b, y, ldy, team);
  ops::PackedMatMul(window, n, in, w, b, y, ldy, team);
}

void CausalConvTranspose1d::Forward(const float* window, size_t n, float* y, ThreadTeam& team) const {
  ops::PackedMatMul(window, n, in, w, bias.size() ? bias.data() : nullptr, y, stride * out, team);
}

Status LoadCausalConv1d(const Checkpoint& ckpt, const std::string& name, int64_t in, int64_t out, int64_t k,
                        bool with_bias, CausalConv1d* conv) {
  if (in <= 0 || out <= 0 || k <= 0)
    return InvalidArgument("convolution " + name + ": sizes must be positive");
  LFM_ASSIGN_OR_RETURN(TensorView t, ckpt.Get(name + ".weight", Shape{out, in, k}));
  LFM_ASSIGN_OR_RETURN(WeightFormat f, PlainFormat(t, name + ".weight"));
  const size_t es = DTypeSize(t.dtype);
  conv->in = in, conv->out = out, conv->k = k;
  std::vector<uint8_t> reordered(static_cast<size_t>(out * in * k) * es);
  const auto* src = static_cast<const uint8_t*>(t.data);
  uint8_t* dst = reordered.data();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t j = 0; j < k; ++j)
        std::memcpy(dst + ((o * k + j) * in + i) * es, src + ((o * in + i) * k + j) * es, es);
  conv->w = ops::PackedWeight();
  conv->rows.Reset(0);
  if (static_cast<size_t>(out) <= CausalConv1d::kNarrowOut) {
    conv->rows.Reset(reordered.size());
    std::memcpy(conv->rows.data(), dst, reordered.size());
    conv->dense = ops::Weight::Dense(f, conv->rows.data(), out, k * in, k * in);
  } else {
    conv->w = ops::PackWeight(ops::Weight::Dense(f, dst, out, k * in, k * in));
  }
  conv->bias.Reset(0);
  if (with_bias) LFM_RETURN_IF_ERROR(LoadBias(ckpt, name, out, 1, &conv->bias));
  return Status::Ok();
}

Status LoadCausalConvTranspose1d(const Checkpoint& ckpt, const std::string& name, int64_t in, int64_t out,
                                 int64_t k, int64_t stride, bool with_bias, CausalConvTranspose1d* conv) {
  if (in <= 0 || out <= 0 || k <= 0 || stride <= 0)
    return InvalidArgument("transposed convolution " + name + ": sizes must be positive");
  if (k % stride != 0) {
    return Unimplemented(
        StrFormat("transposed convolution %s: kernel %lld is not a multiple of its stride %lld", name.c_str(),
                  static_cast<long long>(k), static_cast<long long>(stride)));
  }
  LFM_ASSIGN_OR_RETURN(TensorView t, ckpt.Get(name + ".weight", Shape{in, out, k}));
  LFM_ASSIGN_OR_RETURN(WeightFormat f, PlainFormat(t, name + ".weight"));
  const size_t es = DTypeSize(t.dtype);
  const int64_t m = k / stride;
  conv->in = in, conv->out = out, conv->k = k, conv->stride = stride;
  std::vector<uint8_t> reordered(static_cast<size_t>(in * out * k) * es);
  const auto* src = static_cast<const uint8_t*>(t.data);
  uint8_t* dst = reordered.data();
  for (int64_t r = 0; r < stride; ++r)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t q = 0; q < m; ++q)
        for (int64_t i = 0; i < in; ++i) {
          const int64_t row = r * out + o, col = (m - 1 - q) * in + i;
          std::memcpy(dst + (row * m * in + col) * es, src + ((i * out + o) * k + q * stride + r) * es, es);
        }
  conv->w = ops::PackWeight(ops::Weight::Dense(f, dst, stride * out, m * in, m * in));
  conv->bias.Reset(0);
  if (with_bias) LFM_RETURN_IF_ERROR(LoadBias(ckpt, name, out, static_cast<size_t>(stride), &conv->bias));
  return Status::Ok();
}

void KeepHistory(float* window, size_t total, size_t rows, size_t width) {
  if (rows == 0 || total <= rows) return;
  std::memmove(window, window + (total - rows) * width, rows * width * sizeof(float));
}

}  // namespace lfmvox
