#include "tensor/dtype.h"

#include <cmath>

namespace lfmvox {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
    case DType::kI16:
      return 2;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

namespace {
struct Name {
  DType t;
  const char* s;
};
constexpr Name kNames[] = {
    {DType::kF32, "F32"}, {DType::kBF16, "BF16"}, {DType::kF16, "F16"}, {DType::kF64, "F64"},
    {DType::kI64, "I64"}, {DType::kI32, "I32"},   {DType::kI16, "I16"}, {DType::kI8, "I8"},
    {DType::kU8, "U8"},   {DType::kBool, "BOOL"},
};
}  // namespace

const char* DTypeName(DType t) {
  for (const Name& n : kNames)
    if (n.t == t) return n.s;
  return "?";
}

bool ParseDType(std::string_view s, DType* out) {
  for (const Name& n : kNames) {
    if (s == n.s) {
      *out = n.t;
      return true;
    }
  }
  return false;
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

uint16_t F32ToF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t au = u & 0x7fffffffu;
  if (au > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (au >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (au < 0x38800000u) {  // subnormal half (or zero): round to nearest even of man·2^-24
    const float a = std::fabs(f) * 16777216.0f;  // exact scaling
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a)));
  }
  uint32_t r = au + 0xfffu + ((au >> 13) & 1u) - 0x38000000u;  // rebias 127 -> 15
  return static_cast<uint16_t>(sign | (r >> 13));
}

}  // namespace lfmvox
