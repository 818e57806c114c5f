// MatMul and AccumulateRow for Q8_0 weights (f16 d; i8 qs[32]): the integer
// engine of matmul_quant-inl.h. Compiled once per Highway target.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_q8_0.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format on

#include "ops/matmul_kernels.h"
#include "ops/matmul_quant-inl.h"

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

struct Q8_0Blocks {
  static constexpr const char* kName = "Q8_0";
  static constexpr size_t kBlockElems = 32, kBlockBytes = kQ8_0BlockBytes, kGroups = 1;
  static constexpr size_t kScaleAt = 0, kXSideScale = 0;
#if LFMVOX_QUANT_INTRINSICS
  // Two blocks a step (matmul_quant-inl.h): A = values [0, 16) of both
  // blocks (one per 128-bit lane), B = [16, 32); X's record: its A, its B,
  // then d_x.
  static constexpr bool kSteps = true;
  static constexpr size_t kStepBlocks = 2, kRecordBytes = 96, kDxAt = 64;
  struct Step {
    __m256i a, b;
  };
  static __m128i Load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  static __m256i Join(__m128i lo, __m128i hi) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  }
  static Step DecodeStep(const uint8_t* blk) {
    return {Join(Load16(blk + 2), Load16(blk + kBlockBytes + 2)),
            Join(Load16(blk + 18), Load16(blk + kBlockBytes + 18))};
  }
  static Step DecodeTail(const uint8_t* blk, size_t /*n = 1*/) {
    return {Join(Load16(blk + 2), _mm_setzero_si128()), Join(Load16(blk + 18), _mm_setzero_si128())};
  }
  // pmaddubsw wants one unsigned operand: |w| · (x with w's sign) = w·x. A
  // half's pair sums stay below 2·128·127 < 2^15, so nothing saturates, but
  // two halves could: each is widened to int32 on its own.
  static QInt DotStep(const Step& w, const uint8_t* xr) {
    const __m256i xa = _mm256_load_si256(reinterpret_cast<const __m256i*>(xr));
    const __m256i xb = _mm256_load_si256(reinterpret_cast<const __m256i*>(xr + 32));
    const __m256i one = _mm256_set1_epi16(1);
    const __m256i pa = _mm256_maddubs_epi16(_mm256_sign_epi8(w.a, w.a), _mm256_sign_epi8(xa, w.a));
    const __m256i pb = _mm256_maddubs_epi16(_mm256_sign_epi8(w.b, w.b), _mm256_sign_epi8(xb, w.b));
    return _mm256_add_epi32(_mm256_madd_epi16(pa, one), _mm256_madd_epi16(pb, one));
  }
  static void PackX(const int8_t* q, const float* d, uint8_t* rec) {
    const __m256i v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q));
    const __m256i v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32));
    _mm256_store_si256(reinterpret_cast<__m256i*>(rec), _mm256_permute2x128_si256(v0, v1, 0x20));
    _mm256_store_si256(reinterpret_cast<__m256i*>(rec + 32), _mm256_permute2x128_si256(v0, v1, 0x31));
    _mm256_store_ps(reinterpret_cast<float*>(rec + kDxAt),
                    _mm256_blend_ps(_mm256_set1_ps(d[0]), _mm256_set1_ps(d[1]), 0xF0));
  }
#else
  using Codes = Codes16;
  static Codes Decode(const uint8_t* blk, size_t /*g*/) {
    Codes c;
    for (size_t j = 0; j < 32; ++j) c.w[j] = static_cast<int8_t>(blk[2 + j]);
    return c;
  }
  static QInt Dot(const Codes& c, QX x, int /*xs*/) { return DotI16(c.w, x); }
#endif
};

LFMVOX_DEFINE_QUANT_MATMUL_KERNELS(Q8_0, Q8_0Blocks)

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
LFMVOX_EXPORT_MATMUL_KERNELS(Q8_0)
#endif  // HWY_ONCE
