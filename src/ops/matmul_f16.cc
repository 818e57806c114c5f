// MatMul and AccumulateRow for F16 (IEEE half) weights: the engine of
// matmul-inl.h with a decoder that widens half to f32 exactly. Compiled once
// per Highway target.
//
// Not hn::PromoteTo: in hwy 1.0.3 its SSE4 and EMU128 versions (no F16C)
// turn inf and NaN into finite numbers. The integer widening below is exact
// for every input, the same on every target. On AVX2 and AVX-512, F16C's
// vcvtph2ps (exact for every finite value, inf and NaN kept) replaces its ~12
// ops a vector: hot [2048×2048] m = 1 on one Zen 3 core went 8.4 → 28 GB/s,
// cold [8192×2048] 6.3 → 10.4 GB/s (the untested AVX-512 path is the same one instruction).
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_f16.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format on

#include "ops/matmul-inl.h"
#include "ops/matmul_kernels.h"
#include "tensor/dtype.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

struct F16Rows {
  static const uint16_t* At(const uint8_t* row, size_t q) {
    return reinterpret_cast<const uint16_t*>(row) + q;
  }
  static VF Load(DF df, const uint8_t* row, size_t q) {
#if HWY_TARGET == HWY_AVX2 && !defined(HWY_DISABLE_F16C)
    (void)df;
    return VF{_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(At(row, q))))};
#elif HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    (void)df;
    return VF{_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(At(row, q))))};
#else
    const hn::Rebind<uint16_t, DF> du16;
    const hn::RebindToUnsigned<DF> du32;
    const hn::RebindToSigned<DF> di32;
    const auto h = hn::PromoteTo(du32, hn::LoadU(du16, At(row, q)));
    const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du32, 0x8000u)));
    const auto mag = hn::And(h, hn::Set(du32, 0x7fffu));
    const auto exp = hn::And(h, hn::Set(du32, 0x7c00u));
    // Normal: exponent and mantissa moved up, the exponent rebiased 15 → 127.
    auto bits = hn::Add(hn::ShiftLeft<13>(mag), hn::Set(du32, 112u << 23));
    // Inf and NaN: exponent 31 → 255 (the mantissa, quiet bit included, moves along).
    bits =
        hn::IfThenElse(hn::Eq(exp, hn::Set(du32, 0x7c00u)), hn::Add(bits, hn::Set(du32, 112u << 23)), bits);
    // Zero and subnormal: mantissa · 2^-24, both steps exact.
    const VF sub = hn::Mul(hn::ConvertTo(df, hn::BitCast(di32, mag)), hn::Set(df, 1.0f / 16777216.0f));
    bits = hn::IfThenElse(hn::Eq(exp, hn::Zero(du32)), hn::BitCast(du32, sub), bits);
    return hn::BitCast(df, hn::Or(bits, sign));
#endif
  }
  static VF LoadTail(DF df, const uint8_t* row, size_t q, size_t count) {
    const uint16_t* p = At(row, q);
    HWY_ALIGN float buf[kMaxLanes] = {};
    for (size_t i = 0; i < count; ++i) buf[i] = F16ToF32(p[i]);
    return hn::Load(df, buf);
  }
  static constexpr bool kWidens = true;  // Load costs more than a load (matmul-inl.h: kWideMR)
  static size_t BytesBefore(size_t q) { return q * sizeof(uint16_t); }
};

LFMVOX_DEFINE_MATMUL_KERNELS(F16, F16Rows)

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
LFMVOX_EXPORT_MATMUL_KERNELS(F16)
#endif  // HWY_ONCE
