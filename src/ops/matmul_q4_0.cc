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
  // Eight blocks a step on 512-bit vectors (matmul_quant-inl.h). With E =
  // the code bytes of blocks b, b + 2, b + 4, b + 6 (one per 128-bit lane), O
  // those of b + 1, b + 3, ..., L = their bytes [0, 8) (unpacklo_epi64: lane
  // c holds block 2c's, then block 2c + 1's) and H = bytes [8, 16) alike,
  //   L & 15: weights [0, 8),   H & 15: [8, 16),
  //   L >> 4: [16, 24),         H >> 4: [24, 32)
  // so int32 lane l sums block l / 2 only: unsigned operands of vpdpbusd
  // against X's values in the same order (parts A, B, C, D). Each row's sum
  // starts from X's correction −8·Σ x (per lane, the 16 values it covers),
  // so Σ x·(q − 8) needs four vpdpbusd per step and row. Per lane |sum| ≤
  // 16·15·127 + 16·8·127: exact in int32. X's record: A, B, C, D, the
  // correction (16 int32), d_x (16 floats, lane l: block l / 2).
  static constexpr bool kSteps = true;
  static constexpr size_t kStepBlocks = 8, kRecordBytes = 384, kDxAt = 320;
  struct Step {
    __m512i p[4];
  };
  static Step Split(__m512i l, __m512i h) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    return {{_mm512_and_si512(l, m4), _mm512_and_si512(h, m4), _mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
             _mm512_and_si512(_mm512_srli_epi16(h, 4), m4)}};
  }
  static Step Gather(const uint8_t* blk, size_t n) {
    const __m512i e = QGatherCodeLanes<kBlockBytes>(blk, 0, 0, n),
                  o = QGatherCodeLanes<kBlockBytes>(blk, 1, 0, n);
    return Split(_mm512_unpacklo_epi64(e, o), _mm512_unpackhi_epi64(e, o));
  }
  static Step DecodeStep(const uint8_t* blk) { return Gather(blk, kStepBlocks); }
  // WeightLayout::kSteps8 holds L and H as they are.
  static constexpr size_t kStepCodeBytes = 128;
  static Step LoadStep8(const uint8_t* codes) {
    return Split(_mm512_loadu_si512(codes), _mm512_loadu_si512(codes + 64));
  }
  static Step DecodeTail(const uint8_t* blk, size_t n) { return Gather(blk, n); }
  static int WSide(const Step& /*w*/) { return 0; }
  static QStepI DotStep(const Step& q, int /*ws*/, const uint8_t* xr) {
    __m512i p = _mm512_load_si512(xr + 256);
    for (size_t i = 0; i < 4; ++i) p = _mm512_dpbusd_epi32(p, q.p[i], _mm512_load_si512(xr + 64 * i));
    return p;
  }
  static void PackX(const int8_t* q, const float* d, uint8_t* rec) {
    __m512i part[4];
    QStepXParts(q, part);
    const __m512i eight = _mm512_set1_epi8(8);
    __m512i xs = _mm512_setzero_si512();  // 8·Σ x over each lane's 16 values
    for (size_t i = 0; i < 4; ++i) {
      _mm512_store_si512(rec + 64 * i, part[i]);
      xs = _mm512_dpbusd_epi32(xs, eight, part[i]);
    }
    _mm512_store_si512(rec + 256, _mm512_sub_epi32(_mm512_setzero_si512(), xs));
    QStoreStepDx(d, rec + kDxAt);
  }
#elif LFMVOX_QUANT_INTRINSICS
  // Four blocks a step (matmul_quant-inl.h). Block j's code byte i holds
  // weights i (low nibble) and i + 16 (high). With L = code bytes [0, 8) of
  // blocks b, b + 1 | b + 2, b + 3 (64 bits each; the bar: 128-bit lanes)
  // and H = bytes [8, 16) alike, the four registers
  //   L & 15: weights [0, 8),   H & 15: [8, 16),
  //   L >> 4: [16, 24),         H >> 4: [24, 32)     (of each block)
  // hold 64-bit pieces of one block each, and the X record holds the values
  // in the same order (A, B, C, D), then the X-side correction, then d_x.
  static constexpr bool kSteps = true;
  static constexpr size_t kStepBlocks = 4, kRecordBytes = 192, kDxAt = 160;
  struct Step {
    __m256i a, b, c, d;
  };
  static Step Split(__m256i p, __m256i q) {  // p: blocks b | b + 2, q: b + 1 | b + 3
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i l = _mm256_unpacklo_epi64(p, q), h = _mm256_unpackhi_epi64(p, q);
    return {_mm256_and_si256(l, m4), _mm256_and_si256(h, m4), _mm256_and_si256(_mm256_srli_epi16(l, 4), m4),
            _mm256_and_si256(_mm256_srli_epi16(h, 4), m4)};
  }
  static __m128i Codes(const uint8_t* blk, size_t j) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + j * kBlockBytes + 2));
  }
  static __m256i Join(__m128i lo, __m128i hi) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  }
  static Step DecodeStep(const uint8_t* blk) {
    return Split(Join(Codes(blk, 0), Codes(blk, 2)), Join(Codes(blk, 1), Codes(blk, 3)));
  }
  static Step DecodeTail(const uint8_t* blk, size_t n) {  // n = 1, 2 or 3
    const __m128i z = _mm_setzero_si128();
    return Split(Join(Codes(blk, 0), n > 2 ? Codes(blk, 2) : z), Join(n > 1 ? Codes(blk, 1) : z, z));
  }
  // Pair sums ≤ 2·15·127 each, four of them ≤ 15240, the correction (8 times
  // 8 values) ≤ 8128 in magnitude: the int16 sums and difference are exact.
  static int WSide(const Step& /*q*/) { return 0; }
  static QInt DotStep(const Step& q, int /*ws*/, const uint8_t* xr) {
    auto x = [xr](size_t o) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(xr + o)); };
    const __m256i p = _mm256_add_epi16(
        _mm256_add_epi16(_mm256_maddubs_epi16(q.a, x(0)), _mm256_maddubs_epi16(q.b, x(32))),
        _mm256_add_epi16(_mm256_maddubs_epi16(q.c, x(64)), _mm256_maddubs_epi16(q.d, x(96))));
    return _mm256_madd_epi16(_mm256_sub_epi16(p, x(128)), _mm256_set1_epi16(1));
  }
  // A, B, C, D: values [8·part, 8·part + 8) of groups 0 .. 3 in that order;
  // the correction: 8 times their pair sums, as pmaddubsw forms them.
  static void PackX(const int8_t* q, const float* d, uint8_t* rec) {
    for (size_t part = 0; part < 4; ++part) {
      for (size_t g = 0; g < 4; ++g) std::memcpy(rec + 32 * part + 8 * g, q + 32 * g + 8 * part, 8);
    }
    const __m256i o = _mm256_set1_epi8(8);
    __m256i xs = _mm256_setzero_si256();
    for (size_t part = 0; part < 4; ++part) {
      xs = _mm256_add_epi16(
          xs, _mm256_maddubs_epi16(o, _mm256_load_si256(reinterpret_cast<const __m256i*>(rec + 32 * part))));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(rec + 128), xs);
    _mm256_store_ps(reinterpret_cast<float*>(rec + kDxAt),
                    _mm256_setr_ps(d[0], d[0], d[1], d[1], d[2], d[2], d[3], d[3]));
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
HWY_EXPORT(ReadsSteps8Q4_0Impl);
bool internal::ReadsSteps8Q4_0() { return HWY_DYNAMIC_DISPATCH(ReadsSteps8Q4_0Impl)(); }
}  // namespace lfmvox::ops
#endif  // HWY_ONCE
