#include "tensor/matrix.h"

namespace lfmvox {

const char* WeightFormatName(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
      return "F32";
    case WeightFormat::kBF16:
      return "BF16";
    case WeightFormat::kF16:
      return "F16";
  }
  return "?";
}

bool WeightFormatForDType(DType t, WeightFormat* out) {
  switch (t) {
    case DType::kF32:
      *out = WeightFormat::kF32;
      return true;
    case DType::kBF16:
      *out = WeightFormat::kBF16;
      return true;
    case DType::kF16:
      *out = WeightFormat::kF16;
      return true;
    default:
      return false;
  }
}

size_t FormatRowBytes(WeightFormat f, size_t cols) {
  switch (f) {
    case WeightFormat::kF32:
      return cols * 4;
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
      return cols * 2;
  }
  return 0;
}

}  // namespace lfmvox
