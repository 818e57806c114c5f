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
    case WeightFormat::kQ8_0:
      return "Q8_0";
    case WeightFormat::kQ4_0:
      return "Q4_0";
    case WeightFormat::kQ6_K:
      return "Q6_K";
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
    case DType::kQ8_0:
      *out = WeightFormat::kQ8_0;
      return true;
    case DType::kQ4_0:
      *out = WeightFormat::kQ4_0;
      return true;
    case DType::kQ6_K:
      *out = WeightFormat::kQ6_K;
      return true;
    default:
      return false;
  }
}

size_t FormatBlockElements(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
      return 1;
    case WeightFormat::kQ8_0:
    case WeightFormat::kQ4_0:
      return 32;
    case WeightFormat::kQ6_K:
      return 256;
  }
  return 1;
}

size_t FormatRowBytes(WeightFormat f, size_t cols) {
  switch (f) {
    case WeightFormat::kF32:
      return cols * 4;
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
      return cols * 2;
    case WeightFormat::kQ8_0:
      return cols % 32 == 0 ? cols / 32 * 34 : 0;
    case WeightFormat::kQ4_0:
      return cols % 32 == 0 ? cols / 32 * 18 : 0;
    case WeightFormat::kQ6_K:
      return cols % 256 == 0 ? cols / 256 * 210 : 0;
  }
  return 0;
}

}  // namespace lfmvox
