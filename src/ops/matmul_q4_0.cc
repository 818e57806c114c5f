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
#if HWY_TARGET == HWY_AVX3_DL
HWY_PUSH_ATTRIBUTES("avx512vnni")  // see matmul_quant-inl.h
#endif
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

struct Q4_0Blocks {
  static constexpr const char* kName = "Q4_0";
  static constexpr WeightFormat kFormat = WeightFormat::kQ4_0;
  static constexpr size_t kBlockElems = 32, kBlockBytes = kQ4_0BlockBytes, kGroups = 1;
  static constexpr size_t kScaleAt = 0, kXSideScale = 8;
#if LFMVOX_QUANT_VNNI
  // Sixteen blocks a step on 512-bit vectors (matmul_quant-inl.h), lane l
  // block l: with P_j (j < 4) lane l = code bytes [4j, 4j + 4) of block l
  // (byte i holds weight i in its low nibble, weight i + 16 in its high),
  //   P_j & 15: weights [4j, 4j + 4),   (P_j >> 4) & 15: [16 + 4j, 20 + 4j),
  // i.e. registers 0 .. 7 meet X's parts 0 .. 7 (values [4r, 4r + 4)) as
  // unsigned operands of vpdpbusd. Each row's sum starts from X's correction
  // −8·Σ x (per lane, its block's 32 values), so Σ x·(q − 8) needs eight
  // vpdpbusd per step and row. Per lane |sum| ≤ 32·15·127 + 32·8·127: exact
  // in int32. X's record: parts 0 .. 7, the correction (16 int32), d_x (16
  // floats, lane l: block l).
  static constexpr bool kSteps = true;
  static constexpr size_t kStepBlocks = 16, kRecordBytes = 640, kXSideAt = 512, kDxAt = 576;
  struct Step {
    __m512i p[8];
  };
  static Step Split(const __m512i c[4]) {
    Step s;
    for (size_t j = 0; j < 4; ++j) {
      s.p[j] = PartOf(c[j], 0);
      s.p[4 + j] = PartOf(c[j], 1);
    }
    return s;
  }
  static Step DecodeTail(const uint8_t* blk, size_t n) {
    __m512i c[4];
    for (size_t j = 0; j < 4; ++j) c[j] = QGatherCodes<kBlockBytes>(blk, j, n);
    return Split(c);
  }
  static Step DecodeStep(const uint8_t* blk) { return DecodeTail(blk, kStepBlocks); }
  // WeightLayout::kSteps16 holds P_0 .. P_3 as they are.
  static constexpr size_t kStepCodeBytes = 256;
  static Step LoadStep16(const uint8_t* codes, size_t /*h*/) {
    __m512i c[4];
    for (size_t j = 0; j < 4; ++j) c[j] = _mm512_loadu_si512(codes + 64 * j);
    return Split(c);
  }
  static Step LoadTail16(const uint8_t* tail, size_t n, size_t /*h*/) {
    __m512i c[4];
    for (size_t j = 0; j < 4; ++j) c[j] = QLoadTail16Codes(tail, j, n, 0);
    return Split(c);
  }
  // QTileStepsParts (matmul_quant-inl.h): code register j's low nibbles are part j, its high ones
  // part 4 + j; a row's sum starts from X's correction.
  static constexpr size_t kRawRegs = 4;
  static __m512i PartOf(__m512i raw, size_t h) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    return _mm512_and_si512(h == 0 ? raw : _mm512_srli_epi16(raw, 4), m4);
  }
  static __m512i PartDot(__m512i sum, __m512i w, __m512i x) { return _mm512_dpbusd_epi32(sum, w, x); }
  // kChains (1 or 2) dependency chains of vpdpbusd (matmul_quant-inl.h, QStepAcc).
  template <size_t kChains = 1>
  static QStepI DotStep(const Step& q, const uint8_t* xr) {
    __m512i p[kChains];
    p[0] = _mm512_load_si512(xr + kXSideAt);
    if constexpr (kChains == 2) p[1] = _mm512_setzero_si512();
    for (size_t r = 0; r < 8; ++r)
      p[r % kChains] = _mm512_dpbusd_epi32(p[r % kChains], q.p[r], _mm512_load_si512(xr + 64 * r));
    if constexpr (kChains == 2) return _mm512_add_epi32(p[0], p[1]);
    return p[0];
  }
  static void PackX(const int8_t* q, const float* d, uint8_t* rec) {
    QPackXCorrected<8, kXSideAt, kDxAt>(q, d, rec);
  }
#elif LFMVOX_QUANT_INTRINSICS
  // Eight blocks a step on 256-bit vectors, read from WeightLayout::kSteps16 (half h of its 16-block
  // step; matmul_quant-inl.h), lane l block l: with P_j (j < 4) lane l = code bytes [4j, 4j + 4) of
  // block l, registers P_j & 15 (weights [4j, 4j + 4)) and (P_j >> 4) & 15 ([16 + 4j, 20 + 4j)) meet X's
  // parts j and 4 + j as pmaddubsw's unsigned operands. Each int16 lane sums 16 products of at most
  // 15·127 (|Σ| ≤ 30480), and less X's correction 8·Σ x over the same 16 values it is Σ (q − 8)·x,
  // |·| ≤ 16256: exact in int16 (wrapping adds give it in any order); one pmaddwd then adds each
  // block's two lanes into int32 lane l. X's record: parts 0 .. 7, the correction (16 int16), d_x (8
  // floats, lane l: block l).
  static constexpr bool kSteps = true;
  static constexpr size_t kStepBlocks = 8, kRecordBytes = 320, kDxAt = 288;
  static constexpr size_t kStepCodeBytes = 256;  // a 16-block step of kSteps16
  struct Step {
    __m256i p[8];
  };
  static Step Split(const __m256i c[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    Step s;
    for (size_t j = 0; j < 4; ++j) {
      s.p[j] = _mm256_and_si256(c[j], m4);
      s.p[4 + j] = _mm256_and_si256(_mm256_srli_epi16(c[j], 4), m4);
    }
    return s;
  }
  static Step LoadStep16(const uint8_t* codes, size_t h) {
    __m256i c[4];
    for (size_t j = 0; j < 4; ++j)
      c[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 64 * j + 32 * h));
    return Split(c);
  }
  static Step LoadTail16(const uint8_t* tail, size_t n, size_t h) {
    __m256i c[4];
    for (size_t j = 0; j < 4; ++j) c[j] = QLoadTail16Codes(tail, j, n, h);
    return Split(c);
  }
  static QStepI DotStep(const Step& q, const uint8_t* xr) {
    auto x = [xr](size_t r) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(xr + 32 * r)); };
    __m256i p0 = _mm256_sub_epi16(_mm256_maddubs_epi16(q.p[0], x(0)), x(8));
    __m256i p1 = _mm256_maddubs_epi16(q.p[1], x(1));
    for (size_t r = 2; r < 8; r += 2) {
      p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(q.p[r], x(r)));
      p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(q.p[r + 1], x(r + 1)));
    }
    return _mm256_madd_epi16(_mm256_add_epi16(p0, p1), _mm256_set1_epi16(1));
  }
  static void PackX(const int8_t* q, const float* d, uint8_t* rec) {
    QStepXParts(q, rec);
    const __m256i eight = _mm256_set1_epi8(8);
    __m256i xs = _mm256_setzero_si256();  // 8·Σ x over each int16 lane's values
    for (size_t r = 0; r < 8; ++r) {
      xs = _mm256_add_epi16(
          xs, _mm256_maddubs_epi16(eight, _mm256_load_si256(reinterpret_cast<const __m256i*>(rec + 32 * r))));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(rec + 256), xs);
    _mm256_store_ps(reinterpret_cast<float*>(rec + kDxAt), _mm256_loadu_ps(d));
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
#if HWY_TARGET == HWY_AVX3_DL
HWY_POP_ATTRIBUTES
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
LFMVOX_EXPORT_MATMUL_KERNELS(Q4_0)
namespace lfmvox::ops {
HWY_EXPORT(ReadsSteps16Q4_0Impl);
bool internal::ReadsSteps16Q4_0() { return HWY_DYNAMIC_DISPATCH(ReadsSteps16Q4_0Impl)(); }
}  // namespace lfmvox::ops
#endif  // HWY_ONCE
