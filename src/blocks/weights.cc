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
  if (t.dtype != DType::kBF16 && t.dtype != DType::kF32) {
    return Unimplemented("tensor " + name + " is " + DTypeName(t.dtype) +
                         "; matrices must be BF16 or F32 (convert the checkpoint)");
  }
  ops::Weight w;
  w.dtype = t.dtype;
  w.data = t.data;
  w.rows = static_cast<size_t>(rows);
  w.cols = static_cast<size_t>(cols);
  w.ld = static_cast<size_t>(cols);
  return w;
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

void AccumulateRow(const ops::Weight& table, size_t row, float* acc) {
  if (table.dtype == DType::kBF16) {
    ops::AccumulateBf16(static_cast<const uint16_t*>(table.data) + row * table.ld, acc, table.cols);
  } else {
    ops::Add(static_cast<const float*>(table.data) + row * table.ld, acc, acc, table.cols);
  }
}

}  // namespace lfmvox
