// MatMul and AccumulateRow for BF16 weights: the engine of matmul-inl.h with a
// decoder that widens bfloat16 to f32. Compiled once per Highway target.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_bf16.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format on

#include "ops/matmul-inl.h"
#include "ops/matmul_kernels.h"
#include "tensor/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

struct Bf16Rows {
  static const uint16_t* At(const uint8_t* row, size_t q) {
    return reinterpret_cast<const uint16_t*>(row) + q;
  }
  // bf16 is the upper half of an f32: widening is an exact 16-bit shift.
  static VF Load(DF df, const uint8_t* row, size_t q) {
    const hn::Rebind<uint16_t, DF> du16;
    const hn::RebindToUnsigned<DF> du32;
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, At(row, q)))));
  }
  static VF LoadTail(DF df, const uint8_t* row, size_t q, size_t count) {
    const uint16_t* p = At(row, q);
    HWY_ALIGN float buf[kMaxLanes] = {};
    for (size_t i = 0; i < count; ++i) buf[i] = Bf16ToF32(p[i]);
    return hn::Load(df, buf);
  }
  static constexpr bool kWidens = true;  // Load costs more than a load (matmul-inl.h: kWideMR)
  static size_t BytesBefore(size_t q) { return q * sizeof(uint16_t); }
};

LFMVOX_DEFINE_MATMUL_KERNELS(Bf16, Bf16Rows)

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
LFMVOX_EXPORT_MATMUL_KERNELS(Bf16)
#endif  // HWY_ONCE
