// MatMul and AccumulateRow for Q4_0 weights (f16 d; u8 qs[16], low nibbles
// the first 16 weights, high nibbles the last 16, w = (nibble − 8)·d): the
// integer engine of matmul_quant-inl.h. Compiled once per Highway target.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_q4_0.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format on

#include "ops/matmul_kernels.h"
#include "ops/matmul_quant-inl.h"

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

struct Q4_0Blocks {
  static constexpr const char* kName = "Q4_0";
  static constexpr size_t kBlockElems = 32, kBlockBytes = kQ4_0BlockBytes, kGroups = 1;
  static constexpr size_t kScaleAt = 0, kXSideScale = 8, kNrR1 = 8;
#if LFMVOX_QUANT_INTRINSICS
  // The 32 nibbles as unsigned bytes in element order (low nibbles, then high).
  using Codes = __m256i;
  // The 16 bytes in both halves (a load, no shuffle), the upper half shifted
  // down 4 bits, then masked: 2 ALU ops.
  static Codes Decode(const uint8_t* blk, size_t /*g*/) {
    const __m256i raw =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
    const __m256i shifted = _mm256_srlv_epi32(raw, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
  }
  // xs = 8·(pair sums of x): Σ x·(q − 8) = Σ x·q − 8·Σ x.
  static QInt Dot(Codes q, __m256i x, __m256i xs) {
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, x), xs);  // |p| ≤ 2·8·127
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
  }
#else
  using Codes = Codes16;
  static Codes Decode(const uint8_t* blk, size_t /*g*/) {
    Codes c;
    for (size_t j = 0; j < 16; ++j) {
      c.w[j] = static_cast<int16_t>((blk[2 + j] & 0x0f) - 8);
      c.w[j + 16] = static_cast<int16_t>((blk[2 + j] >> 4) - 8);
    }
    return c;
  }
  static QInt Dot(const Codes& c, QX x, int /*xs*/) { return DotI16(c.w, x); }
#endif
};

LFMVOX_DEFINE_QUANT_MATMUL_KERNELS(Q4_0, Q4_0Blocks)

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
LFMVOX_EXPORT_MATMUL_KERNELS(Q4_0)
#endif  // HWY_ONCE
