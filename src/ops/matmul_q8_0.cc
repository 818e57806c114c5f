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
  static constexpr size_t kScaleAt = 0, kXSideScale = 0, kNrR1 = 8;
#if LFMVOX_QUANT_INTRINSICS
  // Two blocks a step (matmul_quant-inl.h): wA = values [0, 16) of both
  // blocks (one per 128-bit lane), wB = [16, 32).
  static constexpr bool kPairs = true;
  struct Pair {
    __m256i a, b;
  };
  static __m256i Join(const uint8_t* lo, const uint8_t* hi) {
    const __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(l), h, 1);
  }
  static Pair DecodePair(const uint8_t* blk) {
    return {Join(blk + 2, blk + kBlockBytes + 2), Join(blk + 18, blk + kBlockBytes + 18)};
  }
  static Pair DecodeTail(const uint8_t* blk) {
    const __m256i z = _mm256_setzero_si256();
    return {_mm256_inserti128_si256(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)), 0),
            _mm256_inserti128_si256(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18)), 0)};
  }
  static __m256 PairScale(const uint8_t* blk) { return QLoadScalePair(blk, blk + kBlockBytes); }
  static __m256 TailScale(const uint8_t* blk) { return QLoadScale(blk); }
  // pmaddubsw wants one unsigned operand: |w| · (x with w's sign) = w·x. A
  // half's pair sums stay below 2·128·127 < 2^15, so nothing saturates, but
  // two halves could: each is widened to int32 on its own.
  static QInt DotPair(const Pair& w, const uint8_t* xr) {
    const __m256i xa = _mm256_load_si256(reinterpret_cast<const __m256i*>(xr));
    const __m256i xb = _mm256_load_si256(reinterpret_cast<const __m256i*>(xr + 32));
    const __m256i one = _mm256_set1_epi16(1);
    const __m256i pa = _mm256_maddubs_epi16(_mm256_sign_epi8(w.a, w.a), _mm256_sign_epi8(xa, w.a));
    const __m256i pb = _mm256_maddubs_epi16(_mm256_sign_epi8(w.b, w.b), _mm256_sign_epi8(xb, w.b));
    return _mm256_add_epi32(_mm256_madd_epi16(pa, one), _mm256_madd_epi16(pb, one));
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
