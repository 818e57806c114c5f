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
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ6_K:
      return 0;
  }
  return 0;
}

bool DTypeBlock(DType t, size_t* elems, size_t* bytes) {
  switch (t) {
    case DType::kQ8_0:  // f16 d; i8 qs[32]
      *elems = 32;
      *bytes = 34;
      return true;
    case DType::kQ4_0:  // f16 d; u8 qs[16]
      *elems = 32;
      *bytes = 18;
      return true;
    case DType::kQ6_K:  // u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d
      *elems = 256;
      *bytes = 210;
      return true;
    default: {
      const size_t s = DTypeSize(t);
      if (s == 0) return false;
      *elems = 1;
      *bytes = s;
      return true;
    }
  }
}

size_t DTypeRowBytes(DType t, int64_t elements_in_row) {
  size_t elems = 0, bytes = 0;
  if (elements_in_row < 0 || !DTypeBlock(t, &elems, &bytes)) return 0;
  const auto n = static_cast<size_t>(elements_in_row);
  return n % elems == 0 ? n / elems * bytes : 0;
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
// Not in kNames, so that ParseDType (safetensors) never accepts them.
constexpr Name kBlockNames[] = {{DType::kQ8_0, "Q8_0"}, {DType::kQ4_0, "Q4_0"}, {DType::kQ6_K, "Q6_K"}};
}  // namespace

const char* DTypeName(DType t) {
  for (const Name& n : kNames)
    if (n.t == t) return n.s;
  for (const Name& n : kBlockNames)
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
