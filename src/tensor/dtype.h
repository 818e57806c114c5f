// Element types found in checkpoints, and exact conversions to float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace lfmvox {

enum class DType : uint8_t { kF32, kBF16, kF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

size_t DTypeSize(DType t);
const char* DTypeName(DType t);  // safetensors spelling: "F32", "BF16", ...
// Parses a safetensors dtype string; false if unknown.
bool ParseDType(std::string_view s, DType* out);

// bfloat16 is the top half of an IEEE float32: widening is exact.
inline float Bf16ToF32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even (NaN stays NaN), as torch does.
inline uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE half to float, exact (subnormals included).
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);

}  // namespace lfmvox
