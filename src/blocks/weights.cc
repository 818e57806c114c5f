#include "blocks/weights.h"

#include <cstring>

namespace lfmvox {

Result<ops::Weight> LoadMatrix(const Checkpoint& ckpt, const std::string& name, int64_t rows, int64_t cols) {
  return LoadMatrix(ckpt, name, Shape{rows, cols}, rows, cols);
}

Result<ops::Weight> LoadMatrix(const Checkpoint& ckpt, const std::string& name, const Shape& stored,
                               int64_t rows, int64_t cols) {
  if (stored.elements() != rows * cols)
    return Internal("LoadMatrix: the stored shape must hold rows·cols values");
  LFM_ASSIGN_OR_RETURN(TensorView t, ckpt.Get(name, stored));
  WeightFormat format;
  if (!WeightFormatForDType(t.dtype, &format) || !ops::HasMatMulKernel(format)) {
    return Unimplemented("tensor " + name + " is stored as " + DTypeName(t.dtype) +
                         "; this build's matrix kernels take " + SupportedMatrixFormats() +
                         "; convert the checkpoint to one of them");
  }
  return ops::Weight::Dense(format, t.data, static_cast<size_t>(rows), static_cast<size_t>(cols),
                            static_cast<size_t>(cols));
}

std::string SupportedMatrixFormats() {
  std::string s;
  size_t left = 0;
  for (WeightFormat f : kAllWeightFormats) left += ops::HasMatMulKernel(f) ? 1 : 0;
  for (WeightFormat f : kAllWeightFormats) {
    if (!ops::HasMatMulKernel(f)) continue;
    s += WeightFormatName(f);
    --left;
    if (left > 1) s += ", ";
    if (left == 1) s += " and ";
  }
  return s;
}

Status LoadF32(const Checkpoint& ckpt, const std::string& name, const Shape& shape,
               AlignedBuffer<float>* out) {
  LFM_ASSIGN_OR_RETURN(TensorView t, ckpt.Get(name, shape));
  const size_t n = static_cast<size_t>(t.elements());
  out->Reset(n);
  float* dst = out->data();
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(dst, t.data, n * 4);
      break;
    case DType::kBF16: {
      const auto* s = static_cast<const uint8_t*>(t.data);
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, s + 2 * i, 2);
        dst[i] = Bf16ToF32(b);
      }
      break;
    }
    case DType::kF16: {
      const auto* s = static_cast<const uint8_t*>(t.data);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = F16ToF32(h);
      }
      break;
    }
    default:
      return InvalidArgument("tensor " + name + " is " + DTypeName(t.dtype) +
                             "; a floating dtype is required");
  }
  return Status::Ok();
}

void AccumulateRow(const ops::Weight& table, size_t row, float* acc) { ops::AccumulateRow(table, row, acc); }

}  // namespace lfmvox
