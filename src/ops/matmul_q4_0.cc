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
  // Two blocks a step (matmul_quant-inl.h): both blocks' 16 code bytes, one
  // per 128-bit lane, then the low nibbles (xA's weights) and the high ones.
  static constexpr bool kPairs = true;
  struct Pair {
    __m256i lo, hi;
  };
  static Pair Split(__m256i raw) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    return {_mm256_and_si256(raw, m4), _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4)};
  }
  static Pair DecodePair(const uint8_t* blk) {
    const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kBlockBytes + 2));
    return Split(_mm256_inserti128_si256(_mm256_castsi128_si256(b0), b1, 1));
  }
  static Pair DecodeTail(const uint8_t* blk) {
    const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    return Split(_mm256_inserti128_si256(_mm256_setzero_si256(), b0, 0));
  }
  static __m256 PairScale(const uint8_t* blk) { return QLoadScalePair(blk, blk + kBlockBytes); }
  static __m256 TailScale(const uint8_t* blk) { return QLoadScale(blk); }
  // Pair sums of both halves ≤ 2·2·15·127 and the correction ≤ 4·8·127 in
  // magnitude: the int16 sum and difference are exact.
  static QInt DotPair(const Pair& q, const uint8_t* xr) {
    const __m256i xa = _mm256_load_si256(reinterpret_cast<const __m256i*>(xr));
    const __m256i xb = _mm256_load_si256(reinterpret_cast<const __m256i*>(xr + 32));
    const __m256i xs = _mm256_load_si256(reinterpret_cast<const __m256i*>(xr + 64));
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(q.lo, xa), _mm256_maddubs_epi16(q.hi, xb));
    return _mm256_madd_epi16(_mm256_sub_epi16(p, xs), _mm256_set1_epi16(1));
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
