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
#if HWY_TARGET == HWY_AVX3_DL
HWY_PUSH_ATTRIBUTES("avx512vnni")  // see matmul_quant-inl.h
#endif
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

struct Q8_0Blocks {
  static constexpr const char* kName = "Q8_0";
  static constexpr WeightFormat kFormat = WeightFormat::kQ8_0;
  static constexpr size_t kBlockElems = 32, kBlockBytes = kQ8_0BlockBytes, kGroups = 1;
  static constexpr size_t kScaleAt = 0, kXSideScale = 0;
#if LFMVOX_QUANT_VNNI
  // Sixteen blocks a step on 512-bit vectors (matmul_quant-inl.h): register
  // P_j (j < 8) holds in lane l the values [4j, 4j + 4) of block l, so int32
  // lane l sums block l only. vpdpbusd wants one unsigned operand: the codes
  // are read as w + 128 (w ^ 0x80, 1 .. 255: one xor a register), so
  // Σ (w + 128)·x = Σ w·x + 128·Σ x, and X's term −128·Σ x, made once when X
  // is quantized, starts each row's sum (the W side used to pay eight more
  // vpdpbusd a decoded step for −128·Σ w). Per lane 32 products,
  // |(w + 128)·x| ≤ 255·128: exact in int32, the same integer as Σ w·x, so
  // the same bits. X's record: its parts 0 .. 7 (values [4r, 4r + 4) of each
  // block), the correction (16 int32), d_x (16 floats, lane l: block l).
  static constexpr bool kSteps = true;
  static constexpr size_t kStepBlocks = 16, kRecordBytes = 640, kXSideAt = 512, kDxAt = 576;
  struct Step {
    __m512i p[8];
  };
  static __m512i Unsigned(__m512i codes) {
    return _mm512_xor_si512(codes, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  static Step DecodeTail(const uint8_t* blk, size_t n) {
    Step s;
    for (size_t j = 0; j < 8; ++j) s.p[j] = Unsigned(QGatherCodes<kBlockBytes>(blk, j, n));
    return s;
  }
  static Step DecodeStep(const uint8_t* blk) { return DecodeTail(blk, kStepBlocks); }
  // WeightLayout::kSteps16 holds P_0 .. P_7 as they are.
  static constexpr size_t kStepCodeBytes = 512;
  static Step LoadStep16(const uint8_t* codes, size_t /*h*/) {
    Step s;
    for (size_t j = 0; j < 8; ++j) s.p[j] = Unsigned(_mm512_loadu_si512(codes + 64 * j));
    return s;
  }
  static Step LoadTail16(const uint8_t* tail, size_t n, size_t /*h*/) {
    Step s;
    for (size_t j = 0; j < 8; ++j) s.p[j] = Unsigned(QLoadTail16Codes(tail, j, n, 0));
    return s;
  }
  // QTileStepsParts (matmul_quant-inl.h): code register j is part j; a row's sum starts from X's
  // correction.
  static constexpr size_t kRawRegs = 8;
  static __m512i PartOf(__m512i raw, size_t /*h*/) { return Unsigned(raw); }
  static __m512i PartDot(__m512i sum, __m512i w, __m512i x) { return _mm512_dpbusd_epi32(sum, w, x); }
  // kChains (1 or 2) dependency chains of vpdpbusd (matmul_quant-inl.h, QStepAcc).
  template <size_t kChains = 1>
  static QStepI DotStep(const Step& w, const uint8_t* xr) {
    __m512i p[kChains];
    p[0] = _mm512_load_si512(xr + kXSideAt);
    if constexpr (kChains == 2) p[1] = _mm512_setzero_si512();
    for (size_t j = 0; j < 8; ++j)
      p[j % kChains] = _mm512_dpbusd_epi32(p[j % kChains], w.p[j], _mm512_load_si512(xr + 64 * j));
    if constexpr (kChains == 2) return _mm512_add_epi32(p[0], p[1]);
    return p[0];
  }
  static void PackX(const int8_t* q, const float* d, uint8_t* rec) {
    QPackXCorrected<128, kXSideAt, kDxAt>(q, d, rec);
  }
#elif LFMVOX_QUANT_INTRINSICS
  // Eight blocks a step on 256-bit vectors, read from WeightLayout::kSteps16 (half h of its 16-block
  // step; matmul_quant-inl.h): register P_j (j < 8) holds in lane l the values [4j, 4j + 4) of block l.
  // pmaddubsw wants one unsigned operand: |w| · (x with w's sign) = w·x, pair sums below 2·128·127 <
  // 2^15, but two registers' could overflow int16, so each is widened (pmaddwd) on its own; int32 lane l
  // sums block l only. X's record: its parts 0 .. 7 (values [4r, 4r + 4) of each block), then d_x (8
  // floats, lane l: block l).
  static constexpr bool kSteps = true;
  static constexpr size_t kStepBlocks = 8, kRecordBytes = 288, kDxAt = 256;
  static constexpr size_t kStepCodeBytes = 512;  // a 16-block step of kSteps16
  struct Step {
    __m256i w[8];
  };
  static Step LoadStep16(const uint8_t* codes, size_t h) {
    Step s;
    for (size_t j = 0; j < 8; ++j)
      s.w[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 64 * j + 32 * h));
    return s;
  }
  static Step LoadTail16(const uint8_t* tail, size_t n, size_t h) {
    Step s;
    for (size_t j = 0; j < 8; ++j) s.w[j] = QLoadTail16Codes(tail, j, n, h);
    return s;
  }
  static QStepI DotStep(const Step& w, const uint8_t* xr) {
    const __m256i one = _mm256_set1_epi16(1);
    auto dot = [&](size_t j) {
      const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(xr + 32 * j));
      return _mm256_madd_epi16(
          _mm256_maddubs_epi16(_mm256_sign_epi8(w.w[j], w.w[j]), _mm256_sign_epi8(x, w.w[j])), one);
    };
    __m256i p0 = dot(0), p1 = dot(1);
    for (size_t j = 2; j < 8; j += 2) {
      p0 = _mm256_add_epi32(p0, dot(j));
      p1 = _mm256_add_epi32(p1, dot(j + 1));
    }
    return _mm256_add_epi32(p0, p1);
  }
  static void PackX(const int8_t* q, const float* d, uint8_t* rec) {
    QStepXParts(q, rec);
    _mm256_store_ps(reinterpret_cast<float*>(rec + kDxAt), _mm256_loadu_ps(d));
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
#if HWY_TARGET == HWY_AVX3_DL
HWY_POP_ATTRIBUTES
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
LFMVOX_EXPORT_MATMUL_KERNELS(Q8_0)
namespace lfmvox::ops {
HWY_EXPORT(ReadsSteps16Q8_0Impl);
bool internal::ReadsSteps16Q8_0() { return HWY_DYNAMIC_DISPATCH(ReadsSteps16Q8_0Impl)(); }
}  // namespace lfmvox::ops
#endif  // HWY_ONCE
