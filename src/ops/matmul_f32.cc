// MatMul and AccumulateRow for F32 weights: the engine of matmul-inl.h with a
// decoder that loads the floats as they are. Compiled once per Highway target.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_f32.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format on

#include "ops/matmul-inl.h"
#include "ops/matmul_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

struct F32Rows {
  static const float* At(const uint8_t* row, size_t q) { return reinterpret_cast<const float*>(row) + q; }
  static VF Load(DF df, const uint8_t* row, size_t q) { return hn::LoadU(df, At(row, q)); }
  static VF LoadTail(DF df, const uint8_t* row, size_t q, size_t count) {
    return HWY_NAMESPACE::LoadTail(df, At(row, q), count);
  }
  static constexpr bool kWidens = false;  // Load costs more than a load (matmul-inl.h: kWideMR)
  static size_t BytesBefore(size_t q) { return q * sizeof(float); }
};

LFMVOX_DEFINE_MATMUL_KERNELS(F32, F32Rows)

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
LFMVOX_EXPORT_MATMUL_KERNELS(F32)
#endif  // HWY_ONCE
