// The integer MatMul engine for the GGUF block formats (Q8_0, Q4_0, Q6_K),
// templated on a block decoder, as llama.cpp does it: each X row is
// quantized once per call to int8 with one f32 scale per 32 values
// (QuantizeGroups below), each 32-value group's dot product with
// the weights is computed exactly in integers, and only then scaled:
//   acc ← acc + f32(isum_g) · (d_w · d_x,g)      (one fused multiply-add)
// A float dequantize-then-FMA path needs ~4 vector ops per 8 weights and on
// two cores stays compute-bound at Q4_0; the integer one multiplies 32
// weights per instruction and keeps up with DRAM.
//
// A decoder (matmul_q8_0.cc, matmul_q4_0.cc, matmul_q6_k.cc) has
//   kBlockElems, kBlockBytes, kGroups = kBlockElems / 32, kScaleAt (the
//   byte offset of the block's f16 d_w);
//   and per target flavour (see kIntrinsics below):
//   Codes Decode(const uint8_t* block, size_t g): group g's weights, reused
//       for every X row of a tile;
//   kXSideScale: for a code offset o (Q4_0: 8, Q6_K: 32; Q8_0: 0, none),
//       Σ x·(q − o) = Σ x·q − o·Σ x; the X-only term, o times X's pair sums
//       as pmaddubsw forms them, is computed once per call for every group;
//   Dot(codes, x, xside): int32 lanes whose sum is Σ_j x_q[j]·w_int[j] (for
//       Q6_K with the 16-value sub-scales folded in), exact.
// On AVX2/AVX-512 the 32-blocks (Q8_0, Q4_0) instead run several blocks a
// step (kSteps, QTileSteps below): each int32 lane still sums one block's
// products only and is scaled by that block's d_w·d_x, but one pmaddwd, one
// conversion, one multiply of the scales and one FMA serve 64 (Q8_0) or 128
// (Q4_0) weights, and X's record is laid out in the order the weights decode.
// Q6_K's step is one block (QTileBlockSteps), int32 lane g summing its group
// g, so the conversion, the scale product and the FMA serve 256 weights.
//
// Determinism: each output's accumulator vector sees the same sequence of
// operations (its groups or steps in order, the same lanes, one FMA each; then one
// fixed-order lane sum and the bias) whatever m, the tile shape, the row's
// place in a tile or the split of W rows across threads, and X is quantized
// row by row; so the contract of ops.h holds: batched == alone, bit for bit.
// Lane structure depends on the Highway target, as in matmul-inl.h.

// Per-target include guard.
#if defined(LFMVOX_OPS_MATMUL_QUANT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LFMVOX_OPS_MATMUL_QUANT_INL_H_
#undef LFMVOX_OPS_MATMUL_QUANT_INL_H_
#else
#define LFMVOX_OPS_MATMUL_QUANT_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ops/matmul_kernels.h"
#include "ops/ops.h"
#include "ops/simd-inl.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "threading/thread_team.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
// hwy 1.0.3 compiles AVX3_DL without avx512vnni (it names "avxvnni", the VEX
// form), although its run-time check for AVX3_DL requires AVX-512 VNNI.
#if HWY_TARGET == HWY_AVX3_DL
HWY_PUSH_ATTRIBUTES("avx512vnni")
#endif
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

// On AVX2 and AVX-512 the group products use 256-bit integer intrinsics that
// Highway 1.0.3 lacks (pmaddubsw: u8×i8 pairs → i16; pmaddwd: i16 pairs →
// i32; psignb); elsewhere a portable i16×i16→i32 path
// (ReorderWidenMulAccumulate) on weights the decoder widens to int16.
#undef LFMVOX_QUANT_INTRINSICS
#undef LFMVOX_QUANT_VNNI
// AVX3_DL (Icelake and later) has AVX-512 VNNI: the steps of the 32-blocks
// run on 512-bit vectors with vpdpbusd (u8×i8 quadruples summed into int32
// lanes, no intermediate int16), see the step primitives below.
#if HWY_TARGET == HWY_AVX3_DL
#define LFMVOX_QUANT_VNNI 1
#else
#define LFMVOX_QUANT_VNNI 0
#endif
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define LFMVOX_QUANT_INTRINSICS 1
struct QAcc {
  __m256 v;
};
using QInt = __m256i;  // 32 int8 codes or 8 int32 partial sums
HWY_INLINE QAcc QZero() { return {_mm256_setzero_ps()}; }
HWY_INLINE QInt QLoadX(const uint8_t* x) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(x)); }
// A group's X-only correction, precomputed per call (see QuantMatMulWith).
HWY_INLINE QInt QLoadXS(const uint8_t* xs) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(xs)); }
// acc + f32(p)·scale, exactly one rounding (FMA).
HWY_INLINE QAcc QMulAdd(QInt p, __m256 scale, QAcc acc) {
  return {_mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc.v)};
}
using QScale = __m256;
HWY_INLINE QScale QSetScale(float s) { return _mm256_set1_ps(s); }
HWY_INLINE QScale QMulScale(QScale a, QScale b) { return _mm256_mul_ps(a, b); }
HWY_INLINE float QSum(QAcc a) {
  HWY_ALIGN float l[8];
  _mm256_store_ps(l, a.v);
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}
#else
#define LFMVOX_QUANT_INTRINSICS 0
using DQ16 = hn::CappedTag<int16_t, 32>;
using DQ32 = hn::RepartitionToWide<DQ16>;
using DQF = hn::Rebind<float, DQ32>;
struct QAcc {
  hn::Vec<DQF> v;
};
using QInt = hn::Vec<DQ32>;
// The X group stays int8 in memory; the portable Dot widens it.
using QX = const int8_t*;
HWY_INLINE QAcc QZero() { return {hn::Zero(DQF())}; }
HWY_INLINE QX QLoadX(const uint8_t* x) { return reinterpret_cast<const int8_t*>(x); }
HWY_INLINE int QLoadXS(const uint8_t* /*xs*/) { return 0; }
HWY_INLINE QAcc QMulAdd(QInt p, hn::Vec<DQF> scale, QAcc acc) {
  return {hn::MulAdd(hn::ConvertTo(DQF(), p), scale, acc.v)};
}
using QScale = hn::Vec<DQF>;
HWY_INLINE QScale QSetScale(float s) { return hn::Set(DQF(), s); }
HWY_INLINE QScale QMulScale(QScale a, QScale b) { return hn::Mul(a, b); }
HWY_INLINE float QSum(QAcc a) { return hn::GetLane(hn::SumOfLanes(DQF(), a.v)); }

// Σ_j x[j]·w16[j] over one group of 32, as int32 lanes (exact: |x| ≤ 127,
// |w16| ≤ 32·128, 32 terms).
HWY_INLINE QInt DotI16(const int16_t* HWY_RESTRICT w16, const int8_t* HWY_RESTRICT x) {
  const DQ16 d16;
  const DQ32 d32;
  const hn::Rebind<int8_t, DQ16> d8;
  const size_t N = hn::Lanes(d16);
  auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
  for (size_t j = 0; j < 32; j += N) {
    s0 = hn::ReorderWidenMulAccumulate(d32, hn::Load(d16, w16 + j), hn::PromoteTo(d16, hn::LoadU(d8, x + j)),
                                       s0, s1);
  }
  return hn::Add(s0, s1);
}
// A decoded group for the portable path: the weights as exact int16.
struct Codes16 {
  HWY_ALIGN int16_t w[32];
};
#endif

// X quantized as ops::QuantizeActivations (ops.h) defines it, `groups` groups of 32 values, group g to
// q + g·q_stride and d[g], on vectors: per group amax = max |x| (exact in any order), d = amax/127 and
// 1/d (one division each), x·(1/d) rounded once and then to the nearest integer, ties to even: the
// reference's bits on every target. A group holding NaN or ±inf (found as a sum of x·0, which is 0
// only when every x is finite) gets d = NaN and q = 0, so the products it enters are NaN, as in f32
// arithmetic, instead of finite values made from the rest of the group. (It was a scalar loop, ~13 %
// of a 6-row Q4_0 MatMul.)
HWY_INLINE void QuantizeGroups(const float* HWY_RESTRICT x, size_t groups, int8_t* HWY_RESTRICT q,
                               size_t q_stride, float* HWY_RESTRICT d) {
  const hn::CappedTag<float, 32> df;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t N = hn::Lanes(df);
  for (size_t b = 0; b < groups; ++b, x += 32, q += q_stride) {
    auto amax = hn::Zero(df), probe = hn::Zero(df);
    for (size_t j = 0; j < 32; j += N) {
      const auto v = hn::LoadU(df, x + j);
      amax = hn::Max(hn::Abs(v), amax);
      probe = hn::Add(probe, hn::Mul(v, hn::Zero(df)));
    }
    if (!(hn::GetLane(hn::SumOfLanes(df, probe)) == 0.0f)) {
      d[b] = std::numeric_limits<float>::quiet_NaN();
      std::memset(q, 0, 32);
      continue;
    }
    const float db = hn::GetLane(hn::MaxOfLanes(df, amax)) / 127.0f;
    const auto id = hn::Set(df, db != 0.0f ? 1.0f / db : 0.0f);
    d[b] = db;
    // |x·id| ≤ 127 up to rounding, so the int8 conversion cannot saturate.
    for (size_t j = 0; j < 32; j += N)
      hn::StoreU(hn::DemoteTo(d8, hn::NearestInt(hn::Mul(hn::LoadU(df, x + j), id))), d8, q + j);
  }
}

// The f16 scale at p, widened exactly, in every lane (F16C where the target
// has it: a broadcast load and one conversion).
HWY_INLINE QScale QLoadScale(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#if LFMVOX_QUANT_INTRINSICS && !defined(HWY_DISABLE_F16C)
  return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
#else
  return QSetScale(F16ToF32(h));
#endif
}

HWY_INLINE QScale QLoadXScale(const uint8_t* p) {
  float d;
  std::memcpy(&d, p, 4);
  return QSetScale(d);
}

// Quantized X, one record per row, ldx bytes apart (64-aligned): for each
// group g a 64-byte line at 64·g holding its 32 int8 values, then its 16
// int16 X-side corrections; after the groups, their f32 scales. One pointer
// per X row reaches all three (with three, the 6-row tiles ran out of
// general registers and spilled).
struct QuantArgs {
  const uint8_t* x;
  size_t ldx;
  size_t d_at;  // offset of the scales in a record: 64·groups
  const uint8_t* w;
  size_t w_row_bytes;
  size_t blocks;      // W blocks per row
  bool steps16;       // W in WeightLayout::kSteps16 (tensor/matrix.h)
  const float* bias;  // nullable
  float* y;
  size_t ldy;
};

// The tile shapes of the group-at-a-time formats (every block format on the
// portable targets): accumulators R·NR, plus one decoded group live at once.
// R = 1 (decode) runs 1×4; Q6_K's NR block scales stay live across its 8
// groups. Larger R shares each decoded W group among more X rows. m ≥ 4 runs
// 4×2 tiles: 8 accumulators leave the decoded group, its scale, the constants
// and temporaries in the 16 AVX2 registers. Hot [2048×2048], 1 thread (Zen 3),
// GFLOP/s at m = 64 (Q8_0 / Q4_0 / Q6_K, before the steps): the former 6×1
// tiles 55 / 57 / 50; 4×3 spilled accumulators 64 / 65 / 42; 4×2 (with every
// tile loop unrolled, without which GCC kept the accumulator array on the
// stack) 63 / 71 / 61.
constexpr size_t kQNrForR[] = {0, 4, 4, 3, 2};
constexpr size_t kQMR = 4;
// The 512-bit VNNI steps of AVX3_DL (32 registers) run up to 8 X rows a tile,
// so that each decoded step (Q4_0's 12 nibble operations, Q8_0's W-side term)
// serves twice as many rows: m ≥ 8 runs 8×2 tiles, m = 4 4×4. Decode (m = 1)
// runs 1×2: with 16-block steps, 1×4 read W from DRAM ~6 % slower (Q4_0
// backbone tg64, 1 thread: 18.3 against 19.5–19.7 tok/s, three rounds
// interleaved), 1×1, 1×3, 1×6 and 1×8 were no better than 1×2. m = 5 runs 5×2: 5×3 (QTileStepsParts)
// kept part of its 30 sums and accumulators on the stack, and stores in the loop cost it both the hot rate
// and the overlap of reading W with computing (Zen 5, 1 thread, best of interleaved rounds: hot Q4_0 /
// Q8_0 358–409 / 307–312 → 414–490 / 328–413 GFLOP/s; cold [65536×2048] Q4_0 12.1 → 14.3 GB/s, Q8_0
// 13.0–14.8 → 15.7–16.3). 4×2 instead of 4×4 (no stack either, X loaded twice as often) was slower hot
// (438–487 → 366–456) and no faster cold; 3×2 no better than 3×4.
constexpr size_t kQNrForRVnni[] = {0, 2, 4, 4, 4, 2, 2, 2, 2};
constexpr size_t kQMRVnni = 8;
// The 256-bit steps of the 32-blocks (AVX2/AVX3: eight blocks a step, one a
// lane) decode a step into 8 of the 16 registers: m = 1 runs 1×4 (each step
// used as it is decoded), m = 2 2×2, larger m tiles of one W row and up to 8
// X rows. L2-resident [192×2048], 1 thread, Zen (family 23), GFLOP/s at m = 8
// / 64, Q8_0 and Q4_0: 8×1 29.3 / 28.9 and 46.8 / 45.9; 4×1 (no spills) 28.0 /
// 28.2 and 44.5 / 43.8; 6×1 28.3 / 28.9 and 44.6 / 45.2; 4×2 26.4 / 26.5 and
// 40.4 / 40.3; 2×2 24.4 / 24.2 and 37.5 / 37.0.
constexpr size_t kQNrForRSteps[] = {0, 4, 2, 1, 1, 1, 1, 1, 1};
constexpr size_t kQMRSteps = 8;
// For m of a whole tile or more: W rows in blocks of this many bytes, each block run against every tile of X
// rows in turn (QMatMulColumns), so that W is read from memory once and then from L2, and a tile's X record
// (8 rows: 20 KiB at k = 2048) stays in L1. The former order (a W row pair against every X tile, X
// from L2 each time) held the 8 × 2 VNNI tiles to the L2's rate: Q4_0 [8192×2048], 1 thread, Zen 5,
// GFLOP/s at m = 64 / 256: 276–369 / 281–369 before, 459–488 / 523–554 with 256 KiB blocks (128 and
// 512 KiB no better); [2048×8192] (a tile's X is 80 KiB there) 266–317 / 257–269 → 329–336 / 334–351;
// Q8_0 +10–50 %; backbone prefill of 128 tokens, 1 / 2 threads, 150 / 240 → 190 / 310 tokens/s.
constexpr size_t kQWBlockBytes = 256 * 1024;

// Prefetch of the next tile's rows, as matmul-inl.h does: at every block,
// addresses 64 bytes apart from its start, which touch every line the block
// spans. Unconditional: a branch per block costs more than the few repeated
// prefetches of a line shared by neighbouring small blocks.
template <class Fmt>
HWY_INLINE void PrefetchBlock(const uint8_t* block) {
  for (size_t o = 0; o < Fmt::kBlockBytes; o += 64) hwy::Prefetch(block + o);
}

// Y[i .. i+R, j .. j+NR) from X rows [i, i + R) and W rows [j, j + NR).
// w: W row j (a.w + j·rb, or its rows unpacked, see QSweep), rows rb apart.
template <size_t R, size_t NR, class Fmt>
HWY_NOINLINE void QTile(const QuantArgs& a, size_t i, size_t j, const uint8_t* HWY_RESTRICT w) {
  const size_t rb = a.w_row_bytes;
  const uint8_t* HWY_RESTRICT x = a.x + i * a.ldx;
  QAcc acc[R][NR];  // acc[r][c]: Y[i + r, j + c]
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) acc[r][c] = QZero();
  }
  for (size_t b = 0; b < a.blocks; ++b) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) PrefetchBlock<Fmt>(w + (c + NR) * rb + b * Fmt::kBlockBytes);
    if constexpr (R == 1 && Fmt::kGroups == 1) {
      // One X row, one group a block: each W row decoded and used at once,
      // so that the NR accumulators and the X group share the registers.
      const auto xv = QLoadX(x + 64 * b);
      const auto xs = QLoadXS(x + 64 * b + 32);
      const QScale dx = QLoadXScale(x + a.d_at + 4 * b);
      HWY_UNROLL(8)
      for (size_t c = 0; c < NR; ++c) {
        const uint8_t* blk = w + c * rb + b * Fmt::kBlockBytes;
        const QScale dw = QLoadScale(blk + Fmt::kScaleAt);
        acc[0][c] = QMulAdd(Fmt::Dot(Fmt::Decode(blk, 0), xv, xs), QMulScale(dw, dx), acc[0][c]);
      }
    } else {
      // W row outer, X row inner: one decoded group and R·NR accumulators
      // live; the X group, its correction and scale come from L1 each time
      // (loads, which Zen 3 issues 3 a cycle, instead of registers). With one
      // group a block, d_w is loaded next to its use: NR fewer live registers.
      QScale dw[Fmt::kGroups == 1 ? 1 : NR];
      if constexpr (Fmt::kGroups != 1) {
        HWY_UNROLL(8)
        for (size_t c = 0; c < NR; ++c) dw[c] = QLoadScale(w + c * rb + b * Fmt::kBlockBytes + Fmt::kScaleAt);
      }
      HWY_UNROLL(8)
      for (size_t g = 0; g < Fmt::kGroups; ++g) {
        const size_t xg = b * Fmt::kGroups + g;  // the X group: values [32·xg, 32·xg + 32)
        HWY_UNROLL(8)
        for (size_t c = 0; c < NR; ++c) {
          const uint8_t* blk = w + c * rb + b * Fmt::kBlockBytes;
          const typename Fmt::Codes codes = Fmt::Decode(blk, g);
          const QScale dwc =
              Fmt::kGroups == 1 ? QLoadScale(blk + Fmt::kScaleAt) : dw[Fmt::kGroups == 1 ? 0 : c];
          HWY_UNROLL(8)
          for (size_t r = 0; r < R; ++r) {
            const uint8_t* xr = x + r * a.ldx;
            const auto xv = QLoadX(xr + 64 * xg);
            const auto xs = QLoadXS(xr + 64 * xg + 32);
            const QScale dx = QLoadXScale(xr + a.d_at + 4 * xg);
            acc[r][c] = QMulAdd(Fmt::Dot(codes, xv, xs), QMulScale(dwc, dx), acc[r][c]);
          }
        }
      }
    }
  }
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
      float s = QSum(acc[r][c]);
      if (a.bias != nullptr) s += a.bias[j + c];
      a.y[(i + r) * a.ldy + j + c] = s;
    }
  }
}

#if LFMVOX_QUANT_INTRINSICS
// The 32-blocks (Q8_0, Q4_0) on AVX2/AVX-512, kStepBlocks = S blocks a step,
// int32 lane l of a step summing block l's products whole (S = 8 on 256-bit
// AVX2/AVX3, 16 on AVX3_DL). Register j of a step holds, in lane l, block l's
// code bytes [4j, 4j + 4), as WeightLayout::kSteps16 (tensor/matrix.h) stores
// them; X's record part r holds, in lane l, block l's values [4r, 4r + 4)
// (for Q4_0, part r < 4 meets the low nibbles of register r, part 4 + r their
// high nibbles). A decoder with kSteps has
//   kStepCodeBytes: the code bytes of a 16-block step of kSteps16;
//   Step LoadStep16(codes, h): half h (of 16 / S) of the kSteps16 step whose
//       codes are at `codes`; LoadTail16(tail, n, h): the same of the n < 16
//       tail blocks, lanes past n 0;
//   on AVX3_DL also DecodeStep(blk) / DecodeTail(blk, n): the same registers
//       gathered from the file's layout (blk: block b's start);
//   QStepI DotStep(step, xrec): S int32 lanes, lane l block l's sum, exact;
//   PackX(q, d, rec): the X record of a step from its S groups (q: 32·S int8
//       in element order, d: their f32 scales; zeros past a row's end):
//       the parts, the X-side correction if the decoder has one, and at kDxAt
//       the S floats d.
// Every tile shape runs the same steps in the same order: per output, one FMA
// per step in order, then the tail, then the lane sum (batched == alone). On
// AVX2/AVX3 a step is 8 pmaddubsw per X row (Q4_0 adds them exactly in int16;
// Q8_0's could overflow it and are widened one by one), then per 256 weights
// one conversion, one multiply of the scales and one FMA; a W in the file's
// layout is repacked a tile of rows at a time (QTileW), so that both layouts
// give the same bits. (The steps of 4 Q4_0 / 2 Q8_0 blocks they replace, one
// block per 64-bit piece, spent 4 loads, 2 inserts, 2 unpacks and a scale
// gather through general registers on each 128 weights.) On AVX3_DL eight
// vpdpbusd per step and X row replace the pmaddubsw/pmaddwd chain, and the
// conversion, the multiply and the FMA serve 512 weights. The X record is
// private to the call, so its layout is free.

// The step primitives: f32 lanes QStepF (the accumulators, the scales) and
// int32 lanes QStepI (a step's exact sums); 256-bit on AVX2/AVX3, 512-bit on
// AVX3_DL.
#if LFMVOX_QUANT_VNNI
using QStepF = __m512;
using QStepI = __m512i;
HWY_INLINE QStepF QStepZero() { return _mm512_setzero_ps(); }
HWY_INLINE QStepF QStepMulAdd(QStepI p, QStepF scale, QStepF acc) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale, acc);
}
HWY_INLINE QStepF QStepLoadF(const uint8_t* p) { return _mm512_load_ps(reinterpret_cast<const float*>(p)); }
HWY_INLINE QStepF QStepMul(QStepF a, QStepF b) { return _mm512_mul_ps(a, b); }
// Halves added, then the 8-lane tree of QSum: 4 roundings, a fixed order.
HWY_INLINE float QStepSum(QStepF a) {
  return QSum({_mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1))});
}
// The lanes l < n, for the blocks a step or a tail has.
HWY_INLINE __mmask16 QLaneMask(size_t n) {
  return n >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << n) - 1);
}
// File layout (kBlocks): the 4 bytes at offset o of each of the blocks at blk (kBlockBytes apart) in lane l
// = block l, 0 for l ≥ n (masked lanes are not read).
template <size_t kBlockBytes>
HWY_INLINE __m512i QGatherBlockDwords(const uint8_t* blk, size_t o, size_t n) {
  constexpr int B = static_cast<int>(kBlockBytes);
  const __m512i at = _mm512_setr_epi32(0, B, 2 * B, 3 * B, 4 * B, 5 * B, 6 * B, 7 * B, 8 * B, 9 * B, 10 * B,
                                       11 * B, 12 * B, 13 * B, 14 * B, 15 * B);
  return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), QLaneMask(n), at, blk + o, 1);
}
// Register j of a step (its lane l: code bytes [4j, 4j + 4) of block l, after the block's f16 d).
template <size_t kBlockBytes>
HWY_INLINE __m512i QGatherCodes(const uint8_t* blk, size_t j, size_t n) {
  return QGatherBlockDwords<kBlockBytes>(blk, 2 + 4 * j, n);
}
#else
using QStepF = __m256;
using QStepI = __m256i;
HWY_INLINE QStepF QStepZero() { return _mm256_setzero_ps(); }
HWY_INLINE QStepF QStepMulAdd(QStepI p, QStepF scale, QStepF acc) { return QMulAdd(p, scale, {acc}).v; }
HWY_INLINE QStepF QStepLoadF(const uint8_t* p) { return _mm256_load_ps(reinterpret_cast<const float*>(p)); }
HWY_INLINE QStepF QStepMul(QStepF a, QStepF b) { return _mm256_mul_ps(a, b); }
HWY_INLINE float QStepSum(QStepF a) { return QSum({a}); }
#endif

#if LFMVOX_QUANT_VNNI
// File layout (kBlocks): d_w of the 16 blocks at blk (kBlockBytes apart), one
// gather, the lanes from n on 0 (their products are 0 too).
template <size_t kBlockBytes>
HWY_INLINE QStepF QLoadStepScales(const uint8_t* blk, size_t n = 16) {
  const __m512i d = QGatherBlockDwords<kBlockBytes>(blk, 0, n);  // d in each dword's low half
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d));
}

// File layout: prefetch of the next tile's rows at a step, offsets 64 apart
// from its start (steps are contiguous, so every line is touched).
template <class Fmt>
HWY_INLINE void PrefetchStep(const uint8_t* p) {
  for (size_t o = 0; o < Fmt::kStepBlocks * Fmt::kBlockBytes; o += 64) hwy::Prefetch(p + o);
}
#endif

// WeightLayout::kSteps16 (tensor/matrix.h): a 16-block step's codes are
// kStepCodeBytes contiguous bytes, 64 per register (Fmt::LoadStep16; half h
// of a 256-bit step at 32·h), its 16 f16 d_w 32 bytes after its group's
// codes, widened exactly (on AVX3_DL the same values in the same lanes as the
// file's layout gives, so both layouts give the same bits). The tail's n
// blocks: register j at 4n·j (Fmt::LoadTail16), their n d_w after the codes;
// lanes from n on 0.
#if LFMVOX_QUANT_VNNI
HWY_INLINE QStepF QLoadStep16Scales(const uint8_t* p, size_t /*h*/) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
HWY_INLINE QStepF QLoadTail16Scales(const uint8_t* p, size_t n, size_t /*h*/) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(QLaneMask(n), p));
}
HWY_INLINE __m512i QLoadTail16Codes(const uint8_t* tail, size_t j, size_t n, size_t /*h*/) {
  return _mm512_maskz_loadu_epi32(QLaneMask(n), tail + 4 * n * j);
}
#else
HWY_INLINE QStepF QLoadStep16Scales(const uint8_t* p, size_t h) {
#if !defined(HWY_DISABLE_F16C)
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h)));
#else
  HWY_ALIGN float f[8];
  for (size_t l = 0; l < 8; ++l)
    f[l] = F16ToF32(static_cast<uint16_t>(p[16 * h + 2 * l] | p[16 * h + 2 * l + 1] << 8));
  return _mm256_load_ps(f);
#endif
}
// The tail's lanes [8h, min(n, 8h + 8)); the others 0 (read from a copy: AVX2 has no 16-bit masked load,
// and the row may end right after the scales).
HWY_INLINE QStepF QLoadTail16Scales(const uint8_t* p, size_t n, size_t h) {
  HWY_ALIGN uint8_t d[16] = {};
  std::memcpy(d, p + 16 * h, 2 * std::min<size_t>(8, n - 8 * h));
  return QLoadStep16Scales(d, 0);
}
HWY_INLINE __m256i QLoadTail16Codes(const uint8_t* tail, size_t j, size_t n, size_t h) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - 8 * h)), lane);
  return _mm256_maskload_epi32(reinterpret_cast<const int*>(tail + 4 * n * j + 32 * h), mask);
}
#endif

#if LFMVOX_QUANT_VNNI
// X's 16 groups at q (32 int8 each) in the order of the 512-bit steps: part[r] holds in lane l group l's
// values [4r, 4r + 4).
HWY_INLINE void QStepXParts(const int8_t* q, __m512i part[8]) {
  const __m512i at =
      _mm512_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448, 480);
  for (size_t r = 0; r < 8; ++r) part[r] = _mm512_i32gather_epi32(at, q + 4 * r, 1);
}
// X's record for a decoder whose codes meet X as q + kOffset (unsigned): the parts, at kXSideAt the
// correction −kOffset·Σ x (16 int32, lane l: block l), at kDxAt d_x (16 floats).
template <uint8_t kOffset, size_t kXSideAt, size_t kDxAt>
HWY_INLINE void QPackXCorrected(const int8_t* q, const float* d, uint8_t* rec) {
  __m512i part[8];
  QStepXParts(q, part);
  const __m512i o = _mm512_set1_epi8(static_cast<char>(kOffset));
  __m512i xs = _mm512_setzero_si512();  // kOffset·Σ x over each lane's block
  for (size_t r = 0; r < 8; ++r) {
    _mm512_store_si512(rec + 64 * r, part[r]);
    xs = _mm512_dpbusd_epi32(xs, o, part[r]);
  }
  _mm512_store_si512(rec + kXSideAt, _mm512_sub_epi32(_mm512_setzero_si512(), xs));
  _mm512_store_ps(rec + kDxAt, _mm512_loadu_ps(d));
}
#else
// X's 8 groups at q (32 int8 each) in the order of the 256-bit steps, at rec: part r (32 bytes at 32·r)
// holds in lane l group l's values [4r, 4r + 4). (Once per row and step, not per W row.)
HWY_INLINE void QStepXParts(const int8_t* q, uint8_t* rec) {
  for (size_t r = 0; r < 8; ++r) {
    for (size_t l = 0; l < 8; ++l) std::memcpy(rec + 32 * r + 4 * l, q + 32 * l + 4 * r, 4);
  }
}
#endif

#if LFMVOX_QUANT_VNNI
// out[i] = QStepSum(a[i]) for i < N, bit for bit, 16 at a time: the same additions in the same order
// for every output (halves, then lanes j and j + 4, then (0 + 2) and (1 + 3), then the two), done on
// registers holding several accumulators' partial sums, not one horizontal sum per output: ~3 vector
// operations an output instead of ~16 scalar ones, a third of a 6 × 2 tile's time when a row has
// only two steps (k = 512). out: RoundUp(N, 16) floats, 64-byte aligned.
template <size_t N>
HWY_INLINE void QStepSums(const QStepF* a, float* out) {
  const __m512 zero = _mm512_setzero_ps();
  // After the last stage, lane 4q + e holds accumulator q + 4e of the 16.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  for (size_t g = 0; g < N; g += 16) {
    __m512 t[8], u[4], v[2];
    HWY_UNROLL(8)
    for (size_t i = 0; i < 8; ++i) {  // 128-bit lanes [x.h0-3, x.h4-7, y.h0-3, y.h4-7], h_j = a_j + a_j+8
      const __m512 x = g + 2 * i < N ? a[g + 2 * i] : zero, y = g + 2 * i + 1 < N ? a[g + 2 * i + 1] : zero;
      t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    HWY_UNROLL(4)
    for (size_t i = 0; i < 4; ++i) {  // 128-bit lane q: accumulator 4i + q's s_j = h_j + h_j+4
      u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
    HWY_UNROLL(2)
    for (size_t i = 0; i < 2; ++i) {  // per 128-bit lane: s0 + s2, s1 + s3 of two accumulators
      v[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_store_ps(out + g, _mm512_permutexvar_ps(order, r));
  }
}
#endif

template <class Fmt, size_t R>
HWY_INLINE QStepF QStepAcc(const typename Fmt::Step& codes, QStepF dw, const uint8_t* xr, QStepF acc) {
#if LFMVOX_QUANT_VNNI
  // Tiles of 1 or 2 X rows (decode) have few products in flight: there a step's eight vpdpbusd run as two
  // chains of four, added once (exact in int32, so the same sums): Q4_0 backbone tg64 at 1 thread 2.5 %
  // faster than one chain of eight (three interleaved rounds; 2 threads the same).
  return QStepMulAdd(Fmt::template DotStep<(R <= 2 ? 2 : 1)>(codes, xr),
                     QStepMul(dw, QStepLoadF(xr + Fmt::kDxAt)), acc);
#else
  return QStepMulAdd(Fmt::DotStep(codes, xr), QStepMul(dw, QStepLoadF(xr + Fmt::kDxAt)), acc);
#endif
}

// Y[i .. i + R, j .. j + NR) from a tile's accumulators: each lane sum, then the bias.
template <size_t R, size_t NR>
HWY_INLINE void QStoreSteps(const QuantArgs& a, size_t i, size_t j, QStepF (&acc)[R][NR]) {
#if LFMVOX_QUANT_VNNI
  HWY_ALIGN float sums[RoundUp(R * NR, 16)];
  QStepSums<R * NR>(&acc[0][0], sums);
#endif
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
#if LFMVOX_QUANT_VNNI
      float s = sums[r * NR + c];
#else
      float s = QStepSum(acc[r][c]);
#endif
      if (a.bias != nullptr) s += a.bias[j + c];
      a.y[(i + r) * a.ldy + j + c] = s;
    }
  }
}

// How many tiles ahead the prefetch stream of the step kernels runs. Tiles read W front to back, so
// the stream is one linear run of addresses, what the hardware prefetchers follow too. For decode
// (R = 1 or 2: each W byte read once, straight from DRAM) the nearest whole tile at least kQPrefetchBytes
// past the one being read: one tile ahead was too close when a tile is small (1 × 2 Q4_0 rows at k =
// 2048: 2.3 KB, ~0.1 µs of DRAM reading, less than a miss takes). Measured on Zen 5 (AVX3_DL, cold
// W, m = 1, 1 thread, median GB/s; docs/benchmarks.md "Zen 5"): each row's next step at the same
// offset Q4_0 [65536×2048] 10–13, [8192×2048] 10–14; the stream one tile ahead 20–24 and 23–24; 8 KiB
// ahead 27–29 and 25–29; 32 KiB 27–30 and 27–30 (no better, more wasted past a share's end). The
// tiles of a few X rows (several conversations' decode steps batched, m < 8) read W from DRAM while
// they compute, and without the stream the two did not overlap (m = 4: 13–16 GB/s, each alone ~30):
// the stream took Q4_0 [65536×2048] m = 4 from 11–12 to 13–19 GB/s (1 thread), m = 6 from 9 to 13,
// and 4 batched Q4_0 audio steps (bench_batching) 64–69 → 56–60 ms on 1 thread, ~4 % on 2. The 8-row
// tiles of prefill reuse W across X rows and keep one tile (the stream cost them 20–30 %).
constexpr size_t kQPrefetchBytes = 8192;
constexpr size_t kQStreamRows = 7;  // tiles of at most this many X rows prefetch far ahead
template <size_t R>
HWY_INLINE size_t QPrefetchTiles(size_t tile_bytes) {
  if (R > kQStreamRows || tile_bytes == 0) return 1;
  return std::max<size_t>(1, (kQPrefetchBytes + tile_bytes - 1) / tile_bytes);
}
// One line of the stream. On AVX-512 the streaming tiles (R ≤ kQStreamRows) prefetch to L2
// (prefetcht1), so that W's lines do not push X's records out of L1 (Zen 4 has 32 KiB) before the next
// W rows read them again. Zen 4 (EPYC, AVX3_DL), cold W, 1 thread, GB/s (bench_quant, rounds against
// the L1 hint): m = 1 Q8_0 [2048×8192] 15.2–16.5 → 20.5–21.1, [65536×2048] 13.4–13.5 → 18.6–19.2,
// [8192×2048] 19.0–19.2 → 19.1–19.9, Q4_0 within the spread; m = 4 Q4_0 / Q8_0 [8192×2048] 9.9–10.7 /
// 9.8–9.9 → 22.1 / 23.7–24.5, [65536×2048] 9.3–9.4 / 9.3–9.7 → 21.2–21.6 / 20.5–23.2; Q4_0 [8192×2048]
// m = 2 23.3 → 27.4, m = 3 16.7 → 25.8, m = 6 11.6 → 12.6. Four realtime conversations (bench_realtime
// --sessions 4 --max-new 200, Q4_0, 2 threads): 2.90 → 4.17–4.42 audio s/s. Zen 5, where every hint
// fills L1, was not re-measured (an L2 hint for four batched conversations was no faster there).
template <size_t R>
HWY_INLINE void QStreamPrefetch(const uint8_t* p) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if constexpr (R <= kQStreamRows) {
    PrefetchL2(p);
    return;
  }
#endif
  hwy::Prefetch(p);
}
// A tile's prefetch stream over a later tile's NR rows (QPrefetchTiles<R> ahead), Next() called
// `issues` times a W row (at every step, half step or block), each time its share of the lines.
template <size_t R, size_t NR>
struct QStream {
  QStream(const uint8_t* w, size_t rb, size_t issues)
      : pf(w + QPrefetchTiles<R>(NR * rb) * NR * rb),
        lines(issues == 0 ? 0 : (rb + 64 * issues - 1) / (64 * issues)) {}
  HWY_INLINE void Next() {
    for (size_t q = 0; q < lines; ++q, pf += 64) QStreamPrefetch<R>(pf);
  }
  const uint8_t* pf;
  size_t lines;
};

// The tail of a kSteps16 row (its blocks % 16 blocks, after `steps` steps) into a tile's accumulators.
template <size_t R, size_t NR, class Fmt>
HWY_INLINE void QTail16(const QuantArgs& a, const uint8_t* HWY_RESTRICT x, const uint8_t* HWY_RESTRICT w,
                        size_t steps, QStepF (&acc)[R][NR]) {
  constexpr size_t kC = Fmt::kStepCodeBytes, kH = 16 / Fmt::kStepBlocks, kXB = Fmt::kRecordBytes;
  const size_t n = a.blocks % 16;
  if (n == 0) return;
  for (size_t h = 0; h * Fmt::kStepBlocks < n; ++h) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
      const uint8_t* row = w + c * a.w_row_bytes;
      const typename Fmt::Step codes = Fmt::LoadTail16(row + steps * (kC + 32), n, h);
      const QStepF dw = QLoadTail16Scales(row + Steps16TailScalesAt(steps, kC, n, kC / 16), n, h);
      HWY_UNROLL(8)
      for (size_t r = 0; r < R; ++r)
        acc[r][c] = QStepAcc<Fmt, R>(codes, dw, x + r * a.ldx + kXB * (kH * steps + h), acc[r][c]);
    }
  }
}

// W in WeightLayout::kSteps16: per 16-block step its 16 / S halves (one on
// AVX3_DL), each loaded as whole registers, then the tail's.
// Steps [p0, p1) only, with `carry` (R·NR accumulators, 64-byte aligned), when the rows are run a
// chunk of steps at a time (QMatMulChunked): the accumulators come from `carry` unless p0 = 0 and go
// back to it unless the chunk is the row's last, which adds the tail and writes Y. The FMAs of each
// output are the same and in the same order as in one call over the whole row, so the same bits.
template <size_t R, size_t NR, class Fmt>
HWY_NOINLINE void QTileSteps16(const QuantArgs& a, size_t i, size_t j, const uint8_t* HWY_RESTRICT w,
                               size_t p0 = 0, size_t p1 = SIZE_MAX, QStepF* carry = nullptr) {
  const size_t rb = a.w_row_bytes;
  const uint8_t* HWY_RESTRICT x = a.x + i * a.ldx;
  constexpr size_t kC = Fmt::kStepCodeBytes, kH = 16 / Fmt::kStepBlocks, kXB = Fmt::kRecordBytes;
  QStepF acc[R][NR];  // acc[r][c]: Y[i + r, j + c]
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) acc[r][c] = p0 == 0 ? QStepZero() : carry[r * NR + c];
  }
  const size_t all = a.blocks / 16, steps = std::min(all, p1);
  // Prefetch: at R ≤ kQStreamRows, and on 256-bit targets (kH = 2) at any R, one front-to-back stream
  // over a later tile's NR·rb bytes, a few lines at every step (or half step) and row, enough to cover
  // them by the tile's end: QPrefetchTiles<R> ahead (below). The 8-row tiles on AVX3_DL prefetch each
  // row's next step in the next tile (the stream there cost 20–30 % of m ≥ 64 on Zen 5).
  constexpr bool kStream = kH == 2 || R <= kQStreamRows;
  QStream<R, NR> stream(w, rb, all * kH);
  for (size_t p = p0; p < steps; ++p) {
    // W row outer, X row inner: one decoded step and its d_w live; each X
    // row's record parts come from L1 as memory operands.
    const size_t at = Steps16CodesAt(p, all, kC), scales = Steps16ScalesAt(p, all, kC);
    HWY_UNROLL(2)
    for (size_t h = 0; h < kH; ++h) {
      HWY_UNROLL(8)
      for (size_t c = 0; c < NR; ++c) {
        if constexpr (kStream) {
          stream.Next();
        } else {
          const uint8_t* next = w + (c + NR) * rb;
          for (size_t o = 0; o < kC; o += 64) hwy::Prefetch(next + at + o);
          hwy::Prefetch(next + scales);
        }
        const uint8_t* row = w + c * rb;
        const typename Fmt::Step codes = Fmt::LoadStep16(row + at, h);
        const QStepF dw = QLoadStep16Scales(row + scales, h);
        HWY_UNROLL(8)
        for (size_t r = 0; r < R; ++r)
          acc[r][c] = QStepAcc<Fmt, R>(codes, dw, x + r * a.ldx + kXB * (kH * p + h), acc[r][c]);
      }
    }
  }
  if (steps < all) {
    HWY_UNROLL(8)
    for (size_t r = 0; r < R; ++r) {
      HWY_UNROLL(8)
      for (size_t c = 0; c < NR; ++c) carry[r * NR + c] = acc[r][c];
    }
    return;
  }
  QTail16<R, NR, Fmt>(a, x, w, all, acc);
  QStoreSteps<R, NR>(a, i, j, acc);
}

#if LFMVOX_QUANT_VNNI
// The decode-batch tiles on AVX3_DL (2–7 X rows, QPartsTile), W in kSteps16, register part outer:
// per step, each code register of the NR W rows is loaded once and each X part of the R rows once,
// and all R·NR int32 sums live in registers, so each vpdpbusd takes both operands from registers.
// QTileSteps16 instead loads every X part from L1 for every W row (R·NR·8 loads a step against
// 8·R + 4·NR here) and the loads, not the vpdpbusd, set its rate. The f32 accumulators go to L1 (no
// registers left), once a step. The same operations per output as QTileSteps16 (the int32 sums
// exact in any order, then one conversion, one multiply of the scales and one FMA a step, the tail
// by QTail16), so the same bits. A decoder has kRawRegs (code registers a step: Q4_0 4, each two
// parts by its nibbles; Q8_0 8), PartOf(raw, h) and PartDot(sum, w part, x part); an output's sum
// starts from X's correction (kXSideAt in X's record).
// Measured: see QPartsTile.
template <size_t R, size_t NR, class Fmt>
HWY_NOINLINE void QTileStepsParts(const QuantArgs& a, size_t i, size_t j, const uint8_t* HWY_RESTRICT w) {
  const size_t rb = a.w_row_bytes, ldx = a.ldx;
  const uint8_t* HWY_RESTRICT x = a.x + i * ldx;
  constexpr size_t kC = Fmt::kStepCodeBytes, kXB = Fmt::kRecordBytes, kRaw = Fmt::kRawRegs;
  HWY_ALIGN float accm[R][NR][16];  // acc[r][c]: Y[i + r, j + c]
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) _mm512_store_ps(accm[r][c], QStepZero());
  }
  const size_t steps = a.blocks / 16;
  QStream<R, NR> stream(w, rb, steps);  // as QTileSteps16's
  for (size_t p = 0; p < steps; ++p) {
    const size_t at = Steps16CodesAt(p, steps, kC), scales = Steps16ScalesAt(p, steps, kC);
    const uint8_t* xp = x + kXB * p;
    QStepI s[R][NR];
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
      stream.Next();
      HWY_UNROLL(8)
      for (size_t r = 0; r < R; ++r) s[r][c] = _mm512_load_si512(xp + r * ldx + Fmt::kXSideAt);
    }
    HWY_UNROLL(8)
    for (size_t jr = 0; jr < kRaw; ++jr) {
      __m512i raw[NR];
      HWY_UNROLL(8)
      for (size_t c = 0; c < NR; ++c) raw[c] = _mm512_loadu_si512(w + c * rb + at + 64 * jr);
      HWY_UNROLL(2)
      for (size_t h = 0; h < 8 / kRaw; ++h) {
        __m512i xv[R];
        HWY_UNROLL(8)
        for (size_t r = 0; r < R; ++r) xv[r] = _mm512_load_si512(xp + r * ldx + 64 * (jr + kRaw * h));
        HWY_UNROLL(8)
        for (size_t c = 0; c < NR; ++c) {
          const __m512i part = Fmt::PartOf(raw[c], h);
          HWY_UNROLL(8)
          for (size_t r = 0; r < R; ++r) s[r][c] = Fmt::PartDot(s[r][c], part, xv[r]);
        }
      }
    }
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
      const QStepF dw = QLoadStep16Scales(w + c * rb + scales, 0);
      HWY_UNROLL(8)
      for (size_t r = 0; r < R; ++r) {
        const QStepF dx = QStepLoadF(xp + r * ldx + Fmt::kDxAt);
        _mm512_store_ps(accm[r][c], QStepMulAdd(s[r][c], QStepMul(dw, dx), _mm512_load_ps(accm[r][c])));
      }
    }
  }
  QStepF acc[R][NR];
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) acc[r][c] = _mm512_load_ps(accm[r][c]);
  }
  QTail16<R, NR, Fmt>(a, x, w, steps, acc);
  QStoreSteps<R, NR>(a, i, j, acc);
}
#endif

#if LFMVOX_QUANT_VNNI
// W in the file's layout on AVX3_DL: the same steps in the same order, each
// gathered from its 16 blocks.
template <size_t R, size_t NR, class Fmt>
HWY_NOINLINE void QTileStepsBlocks(const QuantArgs& a, size_t i, size_t j, const uint8_t* HWY_RESTRICT w) {
  const size_t rb = a.w_row_bytes;
  const uint8_t* HWY_RESTRICT x = a.x + i * a.ldx;
  constexpr size_t kS = Fmt::kStepBlocks, kSB = kS * Fmt::kBlockBytes, kXB = Fmt::kRecordBytes;
  QStepF acc[R][NR];  // acc[r][c]: Y[i + r, j + c]
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) acc[r][c] = QStepZero();
  }
  const size_t steps = a.blocks / kS;
  for (size_t p = 0; p < steps; ++p) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) PrefetchStep<Fmt>(w + (c + NR) * rb + p * kSB);
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
      const uint8_t* blk = w + c * rb + p * kSB;
      const typename Fmt::Step codes = Fmt::DecodeStep(blk);
      const QStepF dw = QLoadStepScales<Fmt::kBlockBytes>(blk);
      HWY_UNROLL(8)
      for (size_t r = 0; r < R; ++r)
        acc[r][c] = QStepAcc<Fmt, R>(codes, dw, x + r * a.ldx + kXB * p, acc[r][c]);
    }
  }
  if (const size_t n = a.blocks % kS; n != 0) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
      const uint8_t* blk = w + c * rb + steps * kSB;
      const typename Fmt::Step codes = Fmt::DecodeTail(blk, n);
      const QStepF dw = QLoadStepScales<Fmt::kBlockBytes>(blk, n);
      HWY_UNROLL(8)
      for (size_t r = 0; r < R; ++r)
        acc[r][c] = QStepAcc<Fmt, R>(codes, dw, x + r * a.ldx + kXB * steps, acc[r][c]);
    }
  }
  QStoreSteps<R, NR>(a, i, j, acc);
}
#endif

// A format whose step is one block (Q6_K: 8 groups of 32 in int32 lanes), read from
// WeightLayout::kSteps16 on every target with intrinsics: Fmt::DecodeBlock(blk) once per W row and
// block, Fmt::BlockAcc(step, xr, acc) per X row (xr: the block's X record). 256-bit accumulators on
// every target, so the same bits on AVX2, AVX3 and AVX3_DL. Prefetch: the linear stream of
// QTileSteps16's 256-bit targets.
template <size_t R, size_t NR, class Fmt>
HWY_NOINLINE void QTileBlockSteps(const QuantArgs& a, size_t i, size_t j, const uint8_t* HWY_RESTRICT w) {
  const size_t rb = a.w_row_bytes;
  const uint8_t* HWY_RESTRICT x = a.x + i * a.ldx;
  constexpr size_t kBB = Fmt::kBlockBytes, kXB = Fmt::kRecordBytes;
  QAcc acc[R][NR];  // acc[r][c]: Y[i + r, j + c]
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) acc[r][c] = QZero();
  }
  QStream<R, NR> stream(w, rb, a.blocks);
  for (size_t b = 0; b < a.blocks; ++b) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
      stream.Next();
      const typename Fmt::Step step = Fmt::DecodeBlock(w + c * rb + b * kBB);
      HWY_UNROLL(8)
      for (size_t r = 0; r < R; ++r) acc[r][c] = Fmt::BlockAcc(step, x + r * a.ldx + kXB * b, acc[r][c]);
    }
  }
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
      float s = QSum(acc[r][c]);
      if (a.bias != nullptr) s += a.bias[j + c];
      a.y[(i + r) * a.ldy + j + c] = s;
    }
  }
}

// X row `x` (k values) as step records at rec (see PackX).
template <class Fmt>
void QuantizeStepRecords(const float* x, size_t k, uint8_t* rec) {
  constexpr size_t kS = Fmt::kStepBlocks;
  const size_t groups = k / 32;
  for (size_t g0 = 0; g0 < groups; g0 += kS) {
    HWY_ALIGN int8_t q[32 * kS] = {};
    float d[kS] = {};
    QuantizeGroups(x + 32 * g0, std::min(kS, groups - g0), q, 32, d);
    Fmt::PackX(q, d, rec + Fmt::kRecordBytes * (g0 / kS));
  }
}
#endif  // LFMVOX_QUANT_INTRINSICS

// Whether Fmt runs several blocks a step (QTileSteps) on this target.
template <class Fmt>
constexpr bool QSteps() {
#if LFMVOX_QUANT_INTRINSICS
  return Fmt::kSteps;
#else
  return false;
#endif
}

// Whether Fmt's steps read WeightLayout::kSteps16 on this target, and whether
// they read the file's layout (QSweep converts a W's rows to the layout its
// tiles read: both, kSteps16 only, or the file's only).
template <class Fmt>
constexpr bool QReadsSteps16() {
  return QSteps<Fmt>();  // every target with steps reads kSteps16
}
// Whether Fmt's step is one block (QTileBlockSteps).
template <class Fmt>
constexpr bool QBlockSteps() {
  if constexpr (requires { Fmt::kBlockSteps; }) {
    return QSteps<Fmt>() && Fmt::kBlockSteps;
  } else {
    return false;
  }
}
template <class Fmt>
constexpr bool QReadsBlocks() {
  return !QReadsSteps16<Fmt>() || (LFMVOX_QUANT_VNNI && !QBlockSteps<Fmt>());
}

// The tile rows (kQMR) and the W rows a tile for R X rows (kQNrForR) of Fmt.
template <class Fmt>
constexpr size_t QMR() {
  if constexpr (!QSteps<Fmt>()) return kQMR;
  return LFMVOX_QUANT_VNNI ? kQMRVnni : kQMRSteps;
}
template <class Fmt>
constexpr size_t QNrForR(size_t r) {
  if constexpr (!QSteps<Fmt>()) return kQNrForR[r];
  return LFMVOX_QUANT_VNNI ? kQNrForRVnni[r] : kQNrForRSteps[r];
}

// The bytes of Fmt's X record per row of k values.
template <class Fmt>
constexpr size_t QRecordBytes(size_t k) {
  const size_t groups = k / 32;
#if LFMVOX_QUANT_INTRINSICS
  if constexpr (QSteps<Fmt>())
    return Fmt::kRecordBytes * ((groups + Fmt::kStepBlocks - 1) / Fmt::kStepBlocks);
#endif
  return RoundUp(64 * groups + 4 * groups, 64);
}

// The decoder's kDotShift (see QuantMatMulWith), 0 where it has none.
template <class Fmt>
constexpr unsigned QDotShift() {
  if constexpr (requires { Fmt::kDotShift; }) {
    return Fmt::kDotShift;
  } else {
    return 0;
  }
}

#if LFMVOX_QUANT_VNNI
// Whether a tile of R × NR runs QTileStepsParts: 2–7 X rows, R·NR ≤ 16 (the sums, X's parts and the
// codes fit the 32 registers). Zen 5, 1 thread, GFLOP/s, interleaved rounds, QTileSteps16 →
// QTileStepsParts: hot [2048×2048] (L3) m = 4 Q4_0 361–404 → 450–503, Q8_0 260–302 → 317–395; m = 6 /
// 7 Q4_0 244–333 / 250–254 → 379–397 / 383–399; [192×2048] (L2) m = 4 Q4_0 264–345 → 318–413. Four
// batched Q4_0 conversations (10.6 s answers each): depth head 2.45–2.55 → 1.99–2.17 s, wall 10.8–11.4
// → 10.1–11.0 s. The 8 × 2 tiles of prefill were no faster (m = 8: 446–452 → 428–447) and keep
// QTileSteps16.
template <class Fmt>
constexpr bool QPartsTile(size_t r, size_t nr) {
  if constexpr (requires { Fmt::kRawRegs; }) {
    return r >= 2 && r <= 7 && r * nr <= 16;
  } else {
    return false;
  }
}
#endif

// w: W row j in the layout the tile reads (see QSweep).
template <size_t R, size_t NR, class Fmt>
HWY_INLINE void QTileAny(const QuantArgs& a, size_t i, size_t j, const uint8_t* w) {
#if LFMVOX_QUANT_INTRINSICS
  if constexpr (QBlockSteps<Fmt>()) {
    QTileBlockSteps<R, NR, Fmt>(a, i, j, w);
  } else if constexpr (QSteps<Fmt>()) {
#if LFMVOX_QUANT_VNNI
    if (!a.steps16) return QTileStepsBlocks<R, NR, Fmt>(a, i, j, w);
    if constexpr (QPartsTile<Fmt>(R, NR)) return QTileStepsParts<R, NR, Fmt>(a, i, j, w);
#endif
    QTileSteps16<R, NR, Fmt>(a, i, j, w);
  } else  // NOLINT(readability/braces)
#endif
  {
    QTile<R, NR, Fmt>(a, i, j, w);
  }
}

template <size_t NR, size_t R, size_t MaxR, class Fmt>
HWY_INLINE void QTileRows(const QuantArgs& a, size_t rows, size_t i, size_t j, const uint8_t* w) {
  if constexpr (R <= MaxR) {
    if (rows == R) return QTileAny<R, NR, Fmt>(a, i, j, w);
    QTileRows<NR, R + 1, MaxR, Fmt>(a, rows, i, j, w);
  }
}

// W rows [j, j + nr) for the tiles: in place, or, in a layout the target's
// tiles do not read, converted into the thread's scratch (a kSteps16 W
// unpacked, a file-layout W repacked; the same values, so the same results;
// rows rb apart). The loader gives every target the layout it reads, so this
// is for views made otherwise.
template <class Fmt>
HWY_INLINE const uint8_t* QTileW(const QuantArgs& a, size_t j, size_t nr) {
  const uint8_t* w = a.w + j * a.w_row_bytes;
  if (a.steps16 ? QReadsSteps16<Fmt>() : QReadsBlocks<Fmt>()) return w;
  uint8_t* buf = internal::ThreadQuantScratch().ReserveW(nr * a.w_row_bytes);
  for (size_t c = 0; c < nr; ++c) {
    const uint8_t* from = w + c * a.w_row_bytes;
    uint8_t* to = buf + c * a.w_row_bytes;
    if (a.steps16) {
      UnpackRowSteps16(Fmt::kFormat, from, a.blocks * Fmt::kBlockElems, to);
    } else {
      RepackRowSteps16(Fmt::kFormat, from, a.blocks * Fmt::kBlockElems, to);
    }
  }
  return buf;
}

template <size_t NR, size_t MinR, size_t MaxR, class Fmt>
void QSweep(const QuantArgs& a, size_t i0, size_t i1, size_t j0, size_t j1) {
  size_t j = j0;
  for (; j + NR <= j1; j += NR) {
    const uint8_t* w = QTileW<Fmt>(a, j, NR);
    for (size_t i = i0; i < i1; i += MaxR) QTileRows<NR, MinR, MaxR, Fmt>(a, std::min(MaxR, i1 - i), i, j, w);
  }
  for (; j < j1; ++j) {
    const uint8_t* w = QTileW<Fmt>(a, j, 1);
    for (size_t i = i0; i < i1; i += MaxR) QTileRows<1, MinR, MaxR, Fmt>(a, std::min(MaxR, i1 - i), i, j, w);
  }
}

template <class Fmt, size_t R = 1>
HWY_INLINE void QSweepSmallM(const QuantArgs& a, size_t m, size_t j0, size_t j1) {
  if constexpr (R < QMR<Fmt>()) {
    if (m == R) return QSweep<QNrForR<Fmt>(R), R, R, Fmt>(a, 0, m, j0, j1);
    QSweepSmallM<Fmt, R + 1>(a, m, j0, j1);
  }
}

#if LFMVOX_QUANT_VNNI
// Long rows (the FFN's down projection, k = 8192: a tile's X records 8 × 9 KiB, more than L1): the
// whole-tile part of a block of kQChunkTiles W tiles runs a chunk of steps at a time (about
// kQXChunkBytes of the tile's X, which then stays in L1 for all the block's W tiles; the W block in
// L2), each tile's accumulators kept between chunks (QTileSteps16's carry, 8 KiB a block). Zen 5,
// 1 thread, [2048×8192] m = 256, GFLOP/s, interleaved rounds: Q4_0 281–319 → 354–436, Q8_0 250–330 →
// 289–359 ([8192×2048] in the same runs 470–508); 16 KiB chunks and 8 tiles beat 8 / 24 KiB and 4 / 16
// tiles. The spoken question's prefill (94 positions) 2–6 % faster.
constexpr size_t kQXChunkBytes = 16 * 1024;
constexpr size_t kQChunkTiles = 8;
template <class Fmt>
constexpr size_t QChunkSteps() {
  return std::max<size_t>(1, kQXChunkBytes / (QMR<Fmt>() * Fmt::kRecordBytes));
}

template <class Fmt>
void QMatMulChunked(const QuantArgs& a, size_t m, size_t j0, size_t j1) {
  constexpr size_t kMR = QMR<Fmt>(), kNR = QNrForR<Fmt>(kMR);
  const size_t all = a.blocks / 16, chunk = QChunkSteps<Fmt>(), full = m / kMR * kMR;
  auto* carry = reinterpret_cast<QStepF*>(
      internal::ThreadQuantScratch().ReserveCarry(kQChunkTiles * kMR * kNR * sizeof(QStepF)));
  for (size_t jb = j0; jb < j1; jb += kQChunkTiles * kNR) {
    const size_t je = std::min(j1, jb + kQChunkTiles * kNR), jt = jb + (je - jb) / kNR * kNR;
    for (size_t i = 0; i < full; i += kMR) {
      for (size_t p0 = 0; p0 < all; p0 += chunk) {
        const size_t p1 = std::min(all, p0 + chunk);  // the last chunk adds the tail and writes Y
        for (size_t j = jb, t = 0; j < jt; j += kNR, ++t)
          QTileSteps16<kMR, kNR, Fmt>(a, i, j, a.w + j * a.w_row_bytes, p0, p1, carry + t * kMR * kNR);
      }
    }
    if (full < m) QSweep<kNR, 1, kMR, Fmt>(a, full, m, jb, jt);
    if (jt < je) QSweep<kNR, 1, kMR, Fmt>(a, 0, m, jt, je);
  }
}
#endif

template <class Fmt>
void QMatMulColumns(const QuantArgs& a, size_t m, size_t j0, size_t j1) {
  constexpr size_t kMR = QMR<Fmt>();
  if (m < kMR) return QSweepSmallM<Fmt>(a, m, j0, j1);
#if LFMVOX_QUANT_VNNI
  if constexpr (QSteps<Fmt>() && !QBlockSteps<Fmt>()) {
    if (a.steps16 && 2 * QChunkSteps<Fmt>() < a.blocks / 16) return QMatMulChunked<Fmt>(a, m, j0, j1);
  }
#endif
  // A block of W rows (kQWBlockBytes) against one tile of X rows after another, as the float
  // engine's SweepXTiles (matmul-inl.h): the block comes from memory for the first tile and from L2
  // for the rest, each tile's X from L1.
  constexpr size_t kNR = QNrForR<Fmt>(kMR);
  const size_t block = std::max(kNR, kQWBlockBytes / std::max<size_t>(a.w_row_bytes, 1) / kNR * kNR);
  for (size_t jb = j0; jb < j1; jb += block) {
    const size_t je = std::min(j1, jb + block);
    for (size_t i0 = 0; i0 < m; i0 += kMR) QSweep<kNR, 1, kMR, Fmt>(a, i0, std::min(m, i0 + kMR), jb, je);
  }
}

template <class Fmt>
void QuantMatMulWith(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, float* y,
                     size_t ldy, ThreadTeam& team) {
  if (m == 0 || w.rows == 0) return;
  const size_t k = w.cols;
  if (k % Fmt::kBlockElems != 0) HWY_ABORT("ops: %s rows of %zu values are not whole blocks", Fmt::kName, k);
  if (w.layout == WeightLayout::kSteps16 && !HasSteps16Layout(w.format))
    HWY_ABORT("ops: %s has no kSteps16 layout", Fmt::kName);
  if (k == 0) {
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < w.rows; ++j) y[i * ldy + j] = bias != nullptr ? bias[j] : 0.0f;
    }
    return;
  }
  // X quantized here, in the calling thread, into its scratch (grown only).
  const size_t groups = k / 32;
#if LFMVOX_QUANT_VNNI
  // Where this CPU has AMX-INT8, the 32-blocks in kSteps16 against many X rows run on it, with these
  // steps' bits (matmul_quant_amx.cc); X quantized the same way, in its tiles' order.
  if constexpr (QSteps<Fmt>() && !QBlockSteps<Fmt>()) {
    if (w.layout == WeightLayout::kSteps16 && internal::QuantAmxFor(Fmt::kFormat, m)) {
      const size_t tiles = (m + 15) / 16, q_bytes = tiles * groups * 512;
      uint8_t* buf =
          internal::ThreadQuantScratch().Reserve(q_bytes + (tiles * 16 + 1) * groups * sizeof(float));
      auto* q = reinterpret_cast<int8_t*>(buf);
      auto* d = reinterpret_cast<float*>(buf + q_bytes);
      float* row_d = d + tiles * 16 * groups;  // one row's d_x, then spread
      for (size_t i = 0; i < m; ++i) {
        const size_t at = i / 16 * groups;
        QuantizeGroups(x + i * ldx, groups, q + at * 512 + 32 * (i % 16), 512, row_d);
        for (size_t g = 0; g < groups; ++g) d[(at + g) * 16 + i % 16] = row_d[g];
      }
      return internal::QuantMatMulAmx(q, d, m, w, bias, y, ldy, team);
    }
  }
#endif
  const size_t d_at = 64 * groups;
  const size_t ld = QRecordBytes<Fmt>(k);
  uint8_t* xq = internal::ThreadQuantScratch().Reserve(m * ld);
  for (size_t i = 0; i < m; ++i) {
#if LFMVOX_QUANT_INTRINSICS
    if constexpr (QSteps<Fmt>()) {
      QuantizeStepRecords<Fmt>(x + i * ldx, k, xq + i * ld);
      continue;
    }
#endif
    uint8_t* rec = xq + i * ld;
    QuantizeGroups(x + i * ldx, groups, reinterpret_cast<int8_t*>(rec), 64,
                   reinterpret_cast<float*>(rec + d_at));
#if LFMVOX_QUANT_INTRINSICS
    if constexpr (Fmt::kXSideScale != 0) {
      const __m256i o = _mm256_set1_epi8(static_cast<char>(Fmt::kXSideScale));
      for (size_t g = 0; g < groups; ++g) {
        const __m256i v = _mm256_maddubs_epi16(o, QLoadX(rec + 64 * g));
        _mm256_store_si256(reinterpret_cast<__m256i*>(rec + 64 * g + 32), v);
      }
    }
    // A decoder whose Dot returns 2^kDotShift times the group sum (exactly:
    // the factor is a power of two and the sums stay below 2^24 / 2^shift)
    // gets d_x · 2^-kDotShift, so that the product of the scales is the same
    // f32 value times that power of two and the FMA's result the same bits.
    // (Exact while d_x · 2^-kDotShift is normal, i.e. d_x > 2^-118.)
    if constexpr (QDotShift<Fmt>() != 0) {
      float* d = reinterpret_cast<float*>(rec + d_at);
      for (size_t g = 0; g < groups; ++g) d[g] *= 1.0f / static_cast<float>(1u << QDotShift<Fmt>());
    }
#endif
  }
  QuantArgs a;
  a.x = xq;
  a.ldx = ld;
  a.d_at = d_at;
  a.w = static_cast<const uint8_t*>(w.data);
  a.w_row_bytes = w.row_bytes;
  a.blocks = k / Fmt::kBlockElems;
  a.steps16 = w.layout == WeightLayout::kSteps16;
  a.bias = bias;
  a.y = y;
  a.ldy = ldy;
  team.ParallelFor(w.rows, 8, [&](size_t j0, size_t j1) { QMatMulColumns<Fmt>(a, m, j0, j1); });
}

// acc[c] += W[row, c]: the exact dequantization (tensor/quant.h), a stack
// chunk at a time (embedding lookups, not a hot path).
template <class Fmt>
void QuantAccumulateRowWith(const MatrixView& w, size_t row, float* acc) {
  constexpr size_t kChunk = 256;  // a multiple of every block
  HWY_ALIGN float buf[kChunk];
  uint8_t blocks[kChunk / Fmt::kBlockElems * Fmt::kBlockBytes];
  for (size_t c = 0; c < w.cols; c += kChunk) {
    const size_t n = std::min(kChunk, w.cols - c);
    CopyBlocksOfRow(w, row, c / Fmt::kBlockElems, n / Fmt::kBlockElems, blocks);
    DequantizeRow(w.format, blocks, n, buf);
    for (size_t i = 0; i < n; ++i) acc[c + i] += buf[i];
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
#if HWY_TARGET == HWY_AVX3_DL
HWY_POP_ATTRIBUTES
#endif
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
