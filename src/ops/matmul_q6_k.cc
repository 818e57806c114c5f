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
#if HWY_TARGET == HWY_AVX3_DL
HWY_PUSH_ATTRIBUTES("avx512vnni")  // see matmul_quant-inl.h
#endif
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
  // One block a step (QTileBlockSteps), int32 lane g summing group g's 32
  // products whole, read from WeightLayout::kSteps16 (tensor/matrix.h: only
  // the codes move). A decoded block is its 8 code registers (register j,
  // byte 4g + i: the unsigned 6-bit code of element 32g + 4j + i; j < 4 are
  // sub-block 2g, j ≥ 4 sub-block 2g + 1), the sub-scales and d_w. Per X row
  // and 256 weights: 8 pmaddubsw, 4 int16 additions, 5 pmaddwd (one for the
  // X-side term), then one conversion, one scale product and one FMA (the
  // group-at-a-time tile spent a conversion, a product, an FMA, a
  // subtraction and a scale shuffle on every 32).
  static constexpr bool kSteps = true;
  static constexpr bool kBlockSteps = true;
  // X's record per block (QuantizeStepRecords): the 8 groups' values as the
  // code registers have them (part r, 32 bytes at 32r: lane g holds group g's
  // values [4r, 4r + 4)), at kXSumsAt the 16 int16 sums of its 16-value
  // halves (lane g: the first half's, then the second's), at kDxAt the 8 d_x.
  static constexpr size_t kStepBlocks = 8, kXSumsAt = 256, kDxAt = 288, kRecordBytes = 320;
  struct Step {
    __m256i q[8];
    __m256i sc;      // int16 lane pairs (sc_2g, sc_2g+1): the X-side term's
    __m256i sa, sb;  // sc_2g (sa) or sc_2g+1 (sb) in both int16 halves of lane g
    QScale dw;
  };
  static Step DecodeBlock(const uint8_t* blk) {
    Step s;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    HWY_UNROLL(4)
    for (size_t p = 0; p < 4; ++p) {
      const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32 * p));
      s.q[p] = _mm256_and_si256(ql, m4);
      s.q[p + 4] = _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
    }
    // Bit pair 2t of a qh byte to bits 4–5 (16-bit shifts; the bits carried
    // across bytes are masked off).
    HWY_UNROLL(2)
    for (size_t u = 0; u < 2; ++u) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ6_KQh + 32 * u));
      s.q[4 * u] = _mm256_or_si256(s.q[4 * u], _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
      s.q[4 * u + 1] = _mm256_or_si256(s.q[4 * u + 1], _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
      s.q[4 * u + 2] = _mm256_or_si256(s.q[4 * u + 2], _mm256_and_si256(qh, m30));
      s.q[4 * u + 3] = _mm256_or_si256(s.q[4 * u + 3], _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    }
    s.sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kQ6_KScales)));
    s.sa = _mm256_shuffle_epi8(s.sc, _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,  //
                                                      0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13));
    s.sb =
        _mm256_shuffle_epi8(s.sc, _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15,  //
                                                   2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15));
    s.dw = QLoadScale(blk + kQ6_KD);
    return s;
  }
  // Exact integers throughout: a pmaddubsw lane is two codes ≤ 63 times |x| ≤ 127, ≤ 16002, so two of
  // them add in int16 (≤ 32004); pmaddwd by a sub-scale (|sc| ≤ 128) gives ≤ 2·32004·128 a lane, four
  // such sums ≤ 2^25; the X-side term 32·Σ sc·Σx ≤ 32·2·128·2032. The group sum itself,
  // Σ x·(q − 32)·sc, is ≤ 32·127·32·128 < 2^24, so its conversion to f32 is exact.
  static QAcc BlockAcc(const Step& s, const uint8_t* xr, QAcc acc) {
    __m256i p[8];
    HWY_UNROLL(8)
    for (size_t j = 0; j < 8; ++j) p[j] = _mm256_maddubs_epi16(s.q[j], QLoadX(xr + 32 * j));
    const __m256i a = _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(p[0], p[1]), s.sa),
                                       _mm256_madd_epi16(_mm256_add_epi16(p[2], p[3]), s.sa));
    const __m256i b = _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(p[4], p[5]), s.sb),
                                       _mm256_madd_epi16(_mm256_add_epi16(p[6], p[7]), s.sb));
    const __m256i xside = _mm256_slli_epi32(_mm256_madd_epi16(s.sc, QLoadXS(xr + kXSumsAt)), 5);
    const __m256i isum = _mm256_sub_epi32(_mm256_add_epi32(a, b), xside);
    const __m256 dx = _mm256_load_ps(reinterpret_cast<const float*>(xr + kDxAt));
    return QMulAdd(isum, QMulScale(s.dw, dx), acc);
  }
  // The record of one block's 8 X groups (q: 256 int8 in element order, d: their scales).
  static void PackX(const int8_t* q, const float* d, uint8_t* rec) {
    for (size_t r = 0; r < 8; ++r) {
      for (size_t g = 0; g < 8; ++g) std::memcpy(rec + 32 * r + 4 * g, q + 32 * g + 4 * r, 4);
    }
    for (size_t g = 0; g < 16; ++g) {
      int16_t sum = 0;
      for (size_t i = 0; i < 16; ++i) sum = static_cast<int16_t>(sum + q[16 * g + i]);
      std::memcpy(rec + kXSumsAt + 2 * g, &sum, 2);
    }
    std::memcpy(rec + kDxAt, d, 32);
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
#if HWY_TARGET == HWY_AVX3_DL
HWY_POP_ATTRIBUTES
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
LFMVOX_EXPORT_MATMUL_KERNELS(Q6_K)
namespace lfmvox::ops {
HWY_EXPORT(ReadsSteps16Q6_KImpl);
bool internal::ReadsSteps16Q6_K() { return HWY_DYNAMIC_DISPATCH(ReadsSteps16Q6_KImpl)(); }
}  // namespace lfmvox::ops
#endif  // HWY_ONCE
