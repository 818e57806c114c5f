// MatMul and AccumulateRow for Q6_K weights (256 per 210-byte block: 6-bit
// codes split into ql nibbles and qh bit pairs, an int8 scale per 16 weights,
// one f16 d; tensor/quant.h has the layout): the integer engine of
// matmul_quant-inl.h. Compiled once per Highway target.
//
// X is quantized in groups of 32, so a group covers two 16-weight sub-blocks:
// isum_g = sc_a·Σ_a x·(q − 32) + sc_b·Σ_b x·(q − 32), exact in int32, then
// scaled by d_w·d_x,g like the other formats.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_q6_k.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format on

#include "ops/matmul_kernels.h"
#include "ops/matmul_quant-inl.h"

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

struct Q6_KBlocks {
  static constexpr const char* kName = "Q6_K";
  static constexpr WeightFormat kFormat = WeightFormat::kQ6_K;
  static constexpr size_t kBlockElems = 256, kBlockBytes = kQ6_KBlockBytes, kGroups = 8;
  static constexpr size_t kScaleAt = kQ6_KD, kXSideScale = 32;
  // Group g = 4h + t covers weights 128h + 32t + l, l < 32: low bits in the
  // ql bytes 64h + 32(t & 1) + l (low nibbles for t < 2, high for t ≥ 2),
  // high bits at qh[32h + l] >> 2t, sub-scales scales[8h + 2t] (l < 16) and
  // scales[8h + 2t + 1].
  static int8_t SubScale(const uint8_t* blk, size_t g, size_t half) {
    return static_cast<int8_t>(blk[kQ6_KScales + 8 * (g / 4) + 2 * (g % 4) + half]);
  }
#if LFMVOX_QUANT_INTRINSICS
  static constexpr bool kSteps = false;
  static constexpr unsigned kDotShift = 8;
  struct Codes {
    __m256i q;   // the unsigned 6-bit codes, element order
    __m256i sc;  // 256 × the sub-scales as int16: 8 lanes of sc_a, then 8 of sc_b
  };
  static Codes Decode(const uint8_t* blk, size_t g) {
    const size_t h = g / 4, t = g % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32 * (t & 1)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ6_KQh + 32 * h));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i lo = t < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
    // qh's bit pair 2t..2t+1 moved to bits 4-5 of each byte (one 16-bit
    // shift; the bits it carries across bytes are masked off).
    const __m256i m30 = _mm256_set1_epi8(0x30);
    const __m256i hi = t == 0   ? _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)
                       : t == 1 ? _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)
                       : t == 2 ? _mm256_and_si256(qh, m30)
                                : _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30);
    Codes c;
    c.q = _mm256_or_si256(lo, hi);
    // The 16 sub-scales in both 128-bit lanes; scales[2g] into the high
    // byte of each int16 of lane 0, scales[2g + 1] of lane 1, low bytes 0:
    // 256 times the sub-scale, one shuffle (kDotShift undoes the 256).
    const __m256i sc8 =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kQ6_KScales)));
    const char a = static_cast<char>(2 * g), b = static_cast<char>(2 * g + 1), z = -128;
    c.sc = _mm256_shuffle_epi8(sc8, _mm256_setr_epi8(z, a, z, a, z, a, z, a, z, a, z, a, z, a, z, a,  //
                                                     z, b, z, b, z, b, z, b, z, b, z, b, z, b, z, b));
    return c;
  }
  // xs = 32·(pair sums of x): Σ x·(q − 32) = Σ x·q − 32·Σ x.
  // Pairs: |x·q| sums ≤ 2·63·127 and 32·|x| sums ≤ 2·32·127, their
  // difference < 2^15; pmaddwd then multiplies each by 256 times its
  // sub-scale: ≤ 2·24130·128·256 < 2^31 per lane, 256 times a sum < 2^23,
  // so f32 holds it exactly (kDotShift: d_x comes divided by 256).
  static QInt Dot(const Codes& c, __m256i x, __m256i xs) {
    return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(c.q, x), xs), c.sc);
  }
#else
  using Codes = Codes16;
  static Codes Decode(const uint8_t* blk, size_t g) {
    const size_t h = g / 4, t = g % 4;
    const uint8_t* ql = blk + 64 * h + 32 * (t & 1);
    const uint8_t* qh = blk + kQ6_KQh + 32 * h;
    Codes c;
    for (size_t l = 0; l < 32; ++l) {
      const int lo = t < 2 ? ql[l] & 0x0f : ql[l] >> 4;
      const int q = lo | ((qh[l] >> (2 * t) & 3) << 4);
      c.w[l] = static_cast<int16_t>((q - 32) * SubScale(blk, g, l / 16));
    }
    return c;
  }
  static QInt Dot(const Codes& c, QX x, int /*xs*/) { return DotI16(c.w, x); }
#endif
};

LFMVOX_DEFINE_QUANT_MATMUL_KERNELS(Q6_K, Q6_KBlocks)

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
LFMVOX_EXPORT_MATMUL_KERNELS(Q6_K)
#endif  // HWY_ONCE
