// Element types found in checkpoints, and exact conversions to float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace lfmvox {

// The last three are GGUF block types: a row is whole blocks of `elems`
// weights in `bytes` bytes, scales inline (tensor/quant.h has the layouts).
enum class DType : uint8_t {
  kF32,
  kBF16,
  kF16,
  kF64,
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
  kQ8_0,
  kQ4_0,
  kQ6_K
};

// Bytes per element; 0 for the block types, whose elements have no whole-byte size.
size_t DTypeSize(DType t);
// Elements and bytes per block: (1, DTypeSize) for a plain type; false (and
// nothing written) for no known type.
bool DTypeBlock(DType t, size_t* elems, size_t* bytes);
// Bytes of `elements_in_row` consecutive elements; 0 when they are not whole blocks.
size_t DTypeRowBytes(DType t, int64_t elements_in_row);
const char* DTypeName(DType t);  // safetensors spelling: "F32", "BF16", ...; GGUF's "Q8_0", "Q4_0", "Q6_K"
// Parses a safetensors dtype string; false if unknown (the block types are
// not safetensors dtypes and never parse).
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
