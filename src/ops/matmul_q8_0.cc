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
  using Codes = __m256i;
  static Codes Decode(const uint8_t* blk, size_t /*g*/) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  }
  // pmaddubsw wants one unsigned operand: |w| · (x with w's sign) = w·x. The
  // pair sums stay below 2·128·127 < 2^15, so nothing saturates.
  static QInt Dot(Codes w, __m256i x, __m256i /*xs*/) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
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
