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
  // Eight blocks a step on 512-bit vectors (matmul_quant-inl.h): register
  // P_i (i < 4) holds in its 128-bit lane c the values [8i, 8i + 8) of block
  // 2c, then those of block 2c + 1, so int32 lane l sums block l / 2 only.
  // vpdpbusd wants one unsigned operand: X's record holds x + 128 (1 .. 255),
  // so Σ (x + 128)·w = Σ x·w + 128·Σ w, and the W-side term −128·Σ w (four
  // vpdpbusd per decoded step, shared by the tile's X rows) starts each
  // row's sum. Per lane 16 products, |(x + 128)·w| ≤ 255·128: exact in int32.
  // X's record: its P_0 .. P_3, then d_x (16 floats, lane l: block l / 2).
  static constexpr bool kSteps = true;
  static constexpr size_t kStepBlocks = 8, kRecordBytes = 320, kDxAt = 256;
  struct Step {
    __m512i p[4];
  };
  static Step Gather(const uint8_t* blk, size_t n) {
    Step s;
    for (size_t h = 0; h < 2; ++h) {
      const __m512i e = QGatherCodeLanes<kBlockBytes>(blk, 0, 16 * h, n),
                    o = QGatherCodeLanes<kBlockBytes>(blk, 1, 16 * h, n);
      s.p[2 * h] = _mm512_unpacklo_epi64(e, o);
      s.p[2 * h + 1] = _mm512_unpackhi_epi64(e, o);
    }
    return s;
  }
  static Step DecodeStep(const uint8_t* blk) { return Gather(blk, kStepBlocks); }
  // WeightLayout::kSteps8 holds P_0 .. P_3 as they are.
  static constexpr size_t kStepCodeBytes = 256;
  static Step LoadStep8(const uint8_t* codes) {
    Step s;
    for (size_t i = 0; i < 4; ++i) s.p[i] = _mm512_loadu_si512(codes + 64 * i);
    return s;
  }
  static Step DecodeTail(const uint8_t* blk, size_t n) { return Gather(blk, n); }
  static __m512i WSide(const Step& w) {
    const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i z = _mm512_setzero_si512();
    __m512i c = z;
    for (size_t i = 0; i < 4; ++i) c = _mm512_dpbusd_epi32(c, k128, w.p[i]);
    return _mm512_sub_epi32(z, c);
  }
  static QStepI DotStep(const Step& w, __m512i ws, const uint8_t* xr) {
    __m512i p = ws;
    for (size_t i = 0; i < 4; ++i) p = _mm512_dpbusd_epi32(p, _mm512_load_si512(xr + 64 * i), w.p[i]);
    return p;
  }
  static void PackX(const int8_t* q, const float* d, uint8_t* rec) {
    __m512i part[4];
    QStepXParts(q, part);
    const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));  // x + 128 as a byte: x ^ 0x80
    for (size_t i = 0; i < 4; ++i) _mm512_store_si512(rec + 64 * i, _mm512_xor_si512(part[i], k128));
    QStoreStepDx(d, rec + kDxAt);
  }
#elif LFMVOX_QUANT_INTRINSICS
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
  static int WSide(const Step& /*w*/) { return 0; }
  static QInt DotStep(const Step& w, int /*ws*/, const uint8_t* xr) {
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
#if HWY_TARGET == HWY_AVX3_DL
HWY_POP_ATTRIBUTES
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
LFMVOX_EXPORT_MATMUL_KERNELS(Q8_0)
namespace lfmvox::ops {
HWY_EXPORT(ReadsSteps8Q8_0Impl);
bool internal::ReadsSteps8Q8_0() { return HWY_DYNAMIC_DISPATCH(ReadsSteps8Q8_0Impl)(); }
}  // namespace lfmvox::ops
#endif  // HWY_ONCE
