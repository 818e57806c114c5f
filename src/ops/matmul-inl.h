// The MatMul engine, templated on a weight row decoder. Each weight format's
// translation unit (matmul_<format>.cc) includes this once per Highway target
// (after hwy/foreach_target.h and hwy/highway.h), defines its decoder and
// instantiates MatMulWith / AccumulateRowWith with it.
//
// A row decoder is a class with static members
//   VF Load(DF, const uint8_t* row, size_t q):
//       weights [q, q + Lanes(DF)) of the row, widened exactly to f32;
//   VF LoadTail(DF, const uint8_t* row, size_t q, size_t count):
//       weights [q, q + count), zero padded, the same values Load gives, and
//       no byte read past element q + count − 1;
//   size_t BytesBefore(size_t q):
//       the offset in the row of the byte that holds element q (q a multiple
//       of Lanes(DF)), for the prefetch.
// q is always a multiple of Lanes(DF), so a block format whose block is a
// multiple of 16 elements decodes whole vectors within one block.

// Per-target include guard.
#if defined(LFMVOX_OPS_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LFMVOX_OPS_MATMUL_INL_H_
#undef LFMVOX_OPS_MATMUL_INL_H_
#else
#define LFMVOX_OPS_MATMUL_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ops/matmul_kernels.h"
#include "ops/ops.h"
#include "ops/simd-inl.h"
#include "threading/thread_team.h"

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

// The canonical computation of one output, the same in every code path below:
//   acc = 0 (one vector); for each full chunk of Lanes(df) along k:
//   acc = MulAdd(x_chunk, w_chunk, acc); then the zero-padded remainder chunk
//   the same way; y = SumOfLanes(acc) (+ bias).
// A tile of R X rows × NR W rows holds R·NR such accumulators side by side and
// never mixes them, so the tile shape, the position of a row in it, the split
// of n across threads and m itself cannot change any bit of the result. The
// weight format only decides how w_chunk is decoded; a decoder widens exactly,
// so the same numbers in two formats give the same bits.
// (-ffp-contract=off keeps the compiler from fusing anything on its own.)

// Tile shapes: R·NR accumulators, NR widened weight vectors and one X vector
// live in registers (16 or 32 of them).
// With R < kMR (small m) NR grows, for independent FMA chains that hide the FMA
// latency: R = 1 gets 8 on AVX2, 2 on AVX-512 (kDecodeStream).
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// R = 7 and 8 only in the X-tile-major sweep below (kWideMR). R = 1 (decode) runs 1 × 2 with the
// linear prefetch stream (kDecodeStream).
constexpr size_t kNrForR[] = {0, 2, 8, 6, 4, 4, 4, 3, 3};
#else
constexpr size_t kNrForR[] = {0, 8, 4, 3, 2, 2, 2};
#endif
constexpr size_t kMR = 6;
// For m > kMR: rows of X processed against each block of W rows while they
// stay in L2 (512 KiB on Zen 3); W is re-read once per such block of rows.
constexpr size_t kXBlockBytes = 256 * 1024;
// Software prefetch: while a tile works through its NR W rows, it prefetches
// the same offsets of the next tile's NR rows (one line per 64 bytes of row),
// so the next tile's weights arrive while this one computes; the hardware
// prefetcher alone falls behind and leaves DRAM and compute to take turns. A
// fixed distance along the row (the first try) missed most of the next tile
// when rows are short (k = 512 bf16 is one KiB). Prefetch never faults, so
// the last tile's look past the end of W is harmless.
// Measured on Zen 3 (AVX2), 1 thread, cold bf16 W, median µs, before → after:
// m = 6: [2304x512] 300 → 250, [512x2304] 320 → 250, [8192x2048] 4600 → 3650;
// m = 1: [2304x512] 265 → 230, [512x2304] 150 → 130, [8192x2048] 2200 → 2150;
// the detokenizer frame (m = 6) 9.4 → 7.3 ms. Two tiles ahead was slower.

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// Decode (R = 1) on AVX-512: W is read once, straight from DRAM, and the tile's prefetch is one linear
// stream of addresses a fixed distance (kDecodePrefetchBytes, rounded up to whole tiles) ahead of the
// tile being read, a line whenever the tile has read another line's worth, as the block formats'
// decode tiles do (QStream in matmul_quant-inl.h). With the next tile's rows prefetched at the same
// offsets instead, a 1 × 8 tile keeps 16 streams open at once, which Zen 4 reads at two thirds of its
// one-stream rate. Zen 4 (EPYC, AVX3_DL), standalone loop, cold F16 W, m = 1, 1 thread, best GB/s of
// four interleaved rounds at k = 2048 / 1024 (one linear read loop: 32): 1 × 8 next tile 18.2 / 14.0,
// 1 × 8 no prefetch 20.5 / 13.4, 1 × 2 with the stream 8 KiB ahead 25.8 / 29.1, 16 KiB 26.4 / 27.2,
// 1 × 1 (one FMA chain, latency-bound) 26.5 / 29.1.
// The stream's lines go to L1 while X's row fits beside them (DecodeL1XBytes: AMD 8 KiB, Intel 4 KiB),
// else to L2, and the tile is then 1 × 8, each X vector loaded for 8 FMAs: at k = 4096 and 8192 W's lines
// arriving in L1 evicted X's (1 × 2 with the stream to L1 15.2 / 13.7 GB/s, to L2 27.2 / 26.5, the same
// loop; at k = 2048 L1 28.5, L2 25.0). bench_quant [2048×8192] F16, three interleaved rounds: 1 × 2 to L2
// 23.4–27.1, 1 × 8 to L2 25.7–27.8 GB/s. On Intel (Emerald Rapids Xeon, 48 KiB L1, whose L1 misses wait
// on 16 fill buffers) k = 2048 reads faster 1 × 8 to L2: bench_quant cold m = 1 F16 [8192×2048] 1 thread
// 15.2 → 17.0–17.3 GB/s, 2 threads 31.2 → 33.4–35.8 (Q8_0 17.3 / 34.0 the same minutes), bench_backbone F16
// decode 6.6 → 7.2 tok/s (1 thread), 12.7 → 13.9 (2), three alternating rounds each; k = 512 (W in L3)
// stays faster 1 × 2 to L1 there too (bench_ops [2304×512] 39.6–40.8 GB/s against 34.6–36.1).
constexpr bool kDecodeStream = true;
constexpr size_t kDecodePrefetchBytes = 8192;
HWY_INLINE void DecodePrefetch(const uint8_t* p, bool to_l1) {
  if (to_l1) {
    hwy::Prefetch(p);
  } else {
    PrefetchL2(p);
  }
}
#else
constexpr bool kDecodeStream = false;
constexpr size_t kDecodePrefetchBytes = 0;
HWY_INLINE void DecodePrefetch(const uint8_t*, bool) {}
#endif

// An X vector feeds NR FMAs. Left alone, GCC folds its load into every one
// of them as a memory operand, and with 2 vector loads per cycle (Zen 3) the
// loads instead of the FMAs become the limit; an empty asm pins it in a
// register (it changes no bits).
HWY_INLINE VF InRegister(VF v) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  asm("" : "+v"(v.raw));
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4
  asm("" : "+x"(v.raw));
#endif
  return v;
}

// The R·NR lane sums of a tile, each the same tree as Sum (simd-inl.h) gives on
// one vector. On AVX-512, Sum is GCC's _mm512_reduce_add_ps: s8[i] = a[i] +
// a[i+8], s4[i] = s8[i] + s8[i+4], s2[i] = s4[i] + s4[i+2], s = s2[0] + s2[1].
// One at a time that costs ~4 shuffles, 4 adds and a broadcast per sum (15%
// of the perf samples of the codec's 6 × 4 bf16 tile, k = 512); here the same
// four levels run on 16 sums at once (two shuffles and one add per level and
// pair of vectors), so every bit stays what Sum gives, and so what every
// other tile shape gives. Measured (one core of this Xeon, hot bf16 W, best
// µs): [6×512]·[512×512] 26.4 → 25.7, [6×1024]·[1024×1024] 98.5 → 90.8.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// Level 1 of two sums: lanes 0-7 a's s8, 8-15 b's.
HWY_INLINE __m512 SumLevel8(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}
// Level 2 of four (two level-1 vectors): 128-bit block b holds sum b's s4.
HWY_INLINE __m512 SumLevel4(__m512 c, __m512 d) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 1, 3, 1)));
}
// Level 3 of eight (two level-2 vectors e, f): block b holds e's sum b's s2
// in lanes 0-1 and f's in lanes 2-3.
HWY_INLINE __m512 SumLevel2(__m512 e, __m512 f) {
  const __m512d ed = _mm512_castps_pd(e), fd = _mm512_castps_pd(f);
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(ed, fd)),
                       _mm512_castpd_ps(_mm512_unpackhi_pd(ed, fd)));
}
// Level 4 of sixteen (two level-3 vectors g, h): lane 4·b + t the sum of
// quad t's sum b (quads 0, 1 from g, 2, 3 from h).
HWY_INLINE __m512 SumLevel1(__m512 g, __m512 h) {
  return _mm512_add_ps(_mm512_shuffle_ps(g, h, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(g, h, _MM_SHUFFLE(3, 1, 3, 1)));
}
// out[j] = Sum(v[j]) for j < count (count ≤ 16; missing vectors count as 0).
HWY_INLINE void SumsOf16(const VF* v, size_t count, float* out) {
  __m512 in[16];
  for (size_t j = 0; j < 16; ++j) in[j] = j < count ? v[j].raw : _mm512_setzero_ps();
  __m512 l4[4];
  for (size_t t = 0; t < 4; ++t)
    l4[t] = SumLevel4(SumLevel8(in[4 * t], in[4 * t + 1]), SumLevel8(in[4 * t + 2], in[4 * t + 3]));
  const __m512 s = SumLevel1(SumLevel2(l4[0], l4[1]), SumLevel2(l4[2], l4[3]));
  // Sum j = 4·t + b sits in lane 4·b + t.
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  HWY_ALIGN float buf[16];
  _mm512_store_ps(buf, _mm512_permutexvar_ps(idx, s));
  for (size_t j = 0; j < count; ++j) out[j] = buf[j];
}
#endif

// out[j] = Sum(df, v[j]) for j < count.
template <size_t kCount>
HWY_INLINE void SumsOf(DF df, const VF* v, float* out) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  (void)df;
  for (size_t j = 0; j < kCount; j += 16) SumsOf16(v + j, std::min<size_t>(16, kCount - j), out + j);
#else
  for (size_t j = 0; j < kCount; ++j) out[j] = Sum(df, v[j]);
#endif
}

// The arguments every MatMul helper passes along: X, W and Y from row 0.
struct MatMulArgs {
  const float* x;
  size_t ldx;
  const uint8_t* w;
  size_t w_row_bytes;
  size_t k;
  const float* bias;  // nullable
  float* y;
  size_t ldy;
  size_t decode_l1x_bytes;  // the longest X row (bytes) whose decode stream prefetches to L1 (kDecodeStream)
};

// Y[i .. i+R, j .. j+NR) = the lane sums of a tile's accumulators (+ bias).
template <size_t R, size_t NR>
HWY_INLINE void StoreTile(const MatMulArgs& a, size_t i, size_t j, const VF (&acc)[R][NR]) {
  float sums[R * NR];
  SumsOf<R * NR>(DF(), &acc[0][0], sums);
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < NR; ++c) {
      float s = sums[r * NR + c];
      if (a.bias != nullptr) s += a.bias[j + c];
      a.y[(i + r) * a.ldy + j + c] = s;
    }
  }
}

// Y[i .. i+R, j .. j+NR) from X rows [i, i + R) and W rows [j, j + NR).
template <size_t R, size_t NR, class Fmt>
HWY_NOINLINE void Tile(const MatMulArgs& a, size_t i, size_t j) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t k = a.k, ldx = a.ldx, rb = a.w_row_bytes;
  const float* HWY_RESTRICT x = a.x + i * ldx;
  const uint8_t* HWY_RESTRICT w = a.w + j * rb;
  VF acc[R][NR];
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) acc[r][c] = hn::Zero(df);
  }
  constexpr bool kStream = kDecodeStream && R == 1;
  // The stream (kDecodeStream): `pf` the next line to prefetch, `due` where the stream should be.
  const size_t tile_bytes = NR * rb;  // 0 when k = 0
  const size_t ahead =
      kStream && tile_bytes != 0 ? (kDecodePrefetchBytes + tile_bytes - 1) / tile_bytes * tile_bytes : 0;
  const uint8_t* pf = w + ahead;
  const bool x_in_l1 = k * sizeof(float) <= a.decode_l1x_bytes;
  const uint8_t* due = pf;
  size_t q = 0;
  for (; q + N <= k; q += N) {
    // Whether this step starts another 64-byte line of each W row.
    const size_t at = Fmt::BytesBefore(q);
    const size_t step_bytes = Fmt::BytesBefore(q + N) - at;
    const bool new_line = (at & 63) < step_bytes;
    if constexpr (kStream) {
      for (due += NR * step_bytes; pf < due; pf += 64) DecodePrefetch(pf, x_in_l1);
    }
    VF wv[NR];
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
      if (!kStream && new_line) hwy::Prefetch(w + (c + NR) * rb + at);
      wv[c] = Fmt::Load(df, w + c * rb, q);
    }
    HWY_UNROLL(8)
    for (size_t r = 0; r < R; ++r) {
      const VF xv = InRegister(hn::LoadU(df, x + r * ldx + q));
      HWY_UNROLL(8)
      for (size_t c = 0; c < NR; ++c) acc[r][c] = hn::MulAdd(xv, wv[c], acc[r][c]);
    }
  }
  if (q < k) {  // the zero-padded tail
    VF wv[NR];
    for (size_t c = 0; c < NR; ++c) wv[c] = Fmt::LoadTail(df, w + c * rb, q, k - q);
    for (size_t r = 0; r < R; ++r) {
      const VF xv = LoadTail(df, x + r * ldx + q, k - q);
      for (size_t c = 0; c < NR; ++c) acc[r][c] = hn::MulAdd(xv, wv[c], acc[r][c]);
    }
  }
  StoreTile<R, NR>(a, i, j, acc);
}

// Tile<rows, NR> for a run-time rows in [R, MaxR] (only those are compiled).
template <size_t NR, size_t R, size_t MaxR, class Fmt>
HWY_INLINE void TileRows(const MatMulArgs& a, size_t rows, size_t i, size_t j) {
  if constexpr (R <= MaxR) {
    if (rows == R) return Tile<R, NR, Fmt>(a, i, j);
    TileRows<NR, R + 1, MaxR, Fmt>(a, rows, i, j);
  }
}

// X rows [i0, i1) against W rows [j0, j1): for each block of NR W rows
// (which then stays in L1/L2), tiles of kMR X rows, the last fewer; leftover
// W rows one at a time. Every tile has MinR..MaxR rows.
template <size_t NR, size_t MinR, size_t MaxR, class Fmt>
void Sweep(const MatMulArgs& a, size_t i0, size_t i1, size_t j0, size_t j1) {
  constexpr size_t kRows = MaxR;
  size_t j = j0;
  for (; j + NR <= j1; j += NR) {
    for (size_t i = i0; i < i1; i += kRows) TileRows<NR, MinR, MaxR, Fmt>(a, std::min(kRows, i1 - i), i, j);
  }
  for (; j < j1; ++j) {
    for (size_t i = i0; i < i1; i += kRows) TileRows<1, MinR, MaxR, Fmt>(a, std::min(kRows, i1 - i), i, j);
  }
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// A widening format (bf16, f16: Fmt::kWidens) against many X rows with long W rows (k > kWideMaxK):
// Sweep's 6 × 4 tile widens each W vector once per X tile on the FMA ports (a shuffle and a shift for
// bf16, a conversion for f16) and loads 6 X vectors from L2 per 24 FMAs. Here each tile of kSpanNR W
// rows is widened once, kWidenSpan columns at a time, into the thread's scratch (exact f32: the values
// Fmt::Load gives, zeros past k as Fmt::LoadTail), and 4 × 6 tiles (4 X vectors per 24 FMAs) run every
// X tile of the block over that span of f32 rows in L1, their accumulators kept in the scratch between
// spans. Each accumulator sees the same MulAdds in the same order as in Tile: the same bits.
// Measured (Emerald Rapids Xeon, 1 thread, cold F16 W, GFLOP/s, interleaved runs on a noisy host):
// [256×2048]·[8192×2048]ᵀ 86–93 → 99–116, [256×8192]·[2048×8192]ᵀ 107–110 → 128–138 (with the
// 32-row blocks; 110–115 with kXBlockBytes' 8), bf16 [64×2816]·[1024×2816]ᵀ 105 → 112; m = 12–24
// level; `bench_backbone` F16 pp256 +6.6 % at 1 thread (8 pairs, every one faster), +11 % at 2 (6).
// Spans of 256 columns were slower, as were whole rows (k = 2048: W and X then miss L1).
constexpr size_t kWidenSpan = 512;  // columns, a multiple of Lanes(DF)
constexpr size_t kSpanMR = 4, kSpanNR = 6;
// X blocks of at least this many rows, however long (a widened W tile serves 8 X tiles): at k = 8192
// the 256 KiB of kXBlockBytes are 8 rows, whose W tiles were widened for 2 X tiles each.
constexpr size_t kSpanMinRows = 32;

// One X tile of R rows against the kSpanNR widened rows w (stride kWidenSpan) over columns [q0, q1);
// q1 is k in the last span, whose partial vector (W zero padded in w) takes X's zero-padded tail.
// `first`: start from zero, else from `carry`; `last`: write Y (+ bias) at columns [j, j + kSpanNR),
// else save the accumulators to `carry`.
template <size_t R>
HWY_NOINLINE void TileSpan(const MatMulArgs& a, size_t i, size_t j, const float* HWY_RESTRICT w, size_t q0,
                           size_t q1, float* HWY_RESTRICT carry, bool first, bool last) {
  constexpr size_t NR = kSpanNR;
  const DF df;
  const size_t N = hn::Lanes(df), ldx = a.ldx;
  const float* HWY_RESTRICT x = a.x + i * ldx;
  VF acc[R][NR];
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) acc[r][c] = first ? hn::Zero(df) : hn::Load(df, carry + (r * NR + c) * N);
  }
  size_t q = q0;
  for (; q + N <= q1; q += N) {
    VF wv[NR];
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) wv[c] = hn::Load(df, w + c * kWidenSpan + (q - q0));
    HWY_UNROLL(8)
    for (size_t r = 0; r < R; ++r) {
      const VF xv = InRegister(hn::LoadU(df, x + r * ldx + q));
      HWY_UNROLL(8)
      for (size_t c = 0; c < NR; ++c) acc[r][c] = hn::MulAdd(xv, wv[c], acc[r][c]);
    }
  }
  if (q < q1) {  // k's zero-padded tail
    for (size_t r = 0; r < R; ++r) {
      const VF xv = LoadTail(df, x + r * ldx + q, q1 - q);
      for (size_t c = 0; c < NR; ++c) {
        acc[r][c] = hn::MulAdd(xv, hn::Load(df, w + c * kWidenSpan + (q - q0)), acc[r][c]);
      }
    }
  }
  if (!last) {
    HWY_UNROLL(8)
    for (size_t r = 0; r < R; ++r) {
      HWY_UNROLL(8)
      for (size_t c = 0; c < NR; ++c) hn::Store(acc[r][c], df, carry + (r * NR + c) * N);
    }
    return;
  }
  StoreTile<R, NR>(a, i, j, acc);
}

// TileSpan<rows> for a run-time rows in [R, kSpanMR].
template <size_t R = 1>
HWY_INLINE void TileSpanRows(size_t rows, const MatMulArgs& a, size_t i, size_t j, const float* w, size_t q0,
                             size_t q1, float* carry, bool first, bool last) {
  if constexpr (R <= kSpanMR) {
    if (rows == R) return TileSpan<R>(a, i, j, w, q0, q1, carry, first, last);
    TileSpanRows<R + 1>(rows, a, i, j, w, q0, q1, carry, first, last);
  }
}

template <class Fmt>
void SweepWidened(const MatMulArgs& a, size_t i0, size_t i1, size_t j0, size_t j1) {
  const DF df;
  const size_t N = hn::Lanes(df), k = a.k, tiles = (i1 - i0 + kSpanMR - 1) / kSpanMR;
  internal::QuantScratch& scratch = internal::ThreadQuantScratch();
  float* w = reinterpret_cast<float*>(scratch.ReserveW(kSpanNR * kWidenSpan * sizeof(float)));
  float* carry =
      reinterpret_cast<float*>(scratch.ReserveCarry(tiles * kSpanMR * kSpanNR * N * sizeof(float)));
  size_t j = j0;
  for (; j + kSpanNR <= j1; j += kSpanNR) {
    for (size_t q0 = 0; q0 < k; q0 += kWidenSpan) {
      const size_t q1 = std::min(k, q0 + kWidenSpan);
      for (size_t c = 0; c < kSpanNR; ++c) {
        const uint8_t* row = a.w + (j + c) * a.w_row_bytes;
        float* out = w + c * kWidenSpan;
        size_t q = q0;
        for (; q + N <= q1; q += N) hn::Store(Fmt::Load(df, row, q), df, out + (q - q0));
        if (q < q1) hn::Store(Fmt::LoadTail(df, row, q, q1 - q), df, out + (q - q0));
      }
      // The next span's W rows (the next tile's first span after the last) stream into L2 while this
      // one computes, one row before every tiles / kSpanNR X tiles: in one burst after the widening,
      // the prefetches (into L1 then) stalled on the fill buffers, 10 % of the samples.
      const size_t jn = q1 < k ? j : j + kSpanNR, qn = q1 < k ? q1 : 0;
      const size_t from = Fmt::BytesBefore(qn), to = Fmt::BytesBefore(qn + kWidenSpan);
      size_t fetched = jn + kSpanNR <= j1 ? 0 : kSpanNR;  // rows of the next span prefetched
      auto fetch_until = [&](size_t rows) {
        for (; fetched < rows; ++fetched) {
          const uint8_t* row = a.w + (jn + fetched) * a.w_row_bytes;
          for (size_t b = from; b < to; b += 64) PrefetchL2(row + b);
        }
      };
      for (size_t t = 0; t < tiles; ++t) {
        fetch_until(std::min(kSpanNR, t * kSpanNR / tiles + 1));
        const size_t i = i0 + t * kSpanMR;
        TileSpanRows(std::min(kSpanMR, i1 - i), a, i, j, w, q0, q1, carry + t * kSpanMR * kSpanNR * N,
                     q0 == 0, q1 == k);
      }
      fetch_until(kSpanNR);
    }
  }
  if (j < j1) Sweep<1, 1, kMR, Fmt>(a, i0, i1, j, j1);
}
#endif

// m = R rows in one tile, with the NR that suits R, for a run-time m in [R, kMR).
template <class Fmt, size_t R = 1>
HWY_INLINE void SweepSmallM(const MatMulArgs& a, size_t m, size_t j0, size_t j1) {
  if constexpr (R < kMR) {
    if constexpr (R == 1 && kDecodeStream) {
      if (m == 1 && a.k * sizeof(float) > a.decode_l1x_bytes) return Sweep<8, 1, 1, Fmt>(a, 0, m, j0, j1);
    }
    if (m == R) return Sweep<kNrForR[R], R, R, Fmt>(a, 0, m, j0, j1);
    SweepSmallM<Fmt, R + 1>(a, m, j0, j1);
  }
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// Large m, short rows, AVX-512: the other loop order. Sweep above keeps NR W
// rows in L1 and streams the X rows of an L2 block past them, 6 X vectors
// (384 bytes from L2) per 24 FMAs, which L2 cannot feed at this core's FMA
// rate. Here a tile of kWideMR X rows (≤ 32 KiB: k ≤ kWideMaxK) stays in L1
// and the W rows of an L2-resident block (kWBlockBytes) stream past it: NR
// W vectors (96 bytes of bf16) per 24 FMAs. With 8 rows, a widened W vector
// (shuffle and shift uops on the FMA ports for bf16 and f16) feeds 8 FMAs
// instead of 6; f32 W costs only a load and keeps 6 × 4.
// Measured (one core of this Xeon, hot bf16 W, best µs, shared machine):
// [64×1024]·[1024×1024] 1251 → 790, [64×512]·[512×512] 334 → 265.
template <class Fmt>
constexpr size_t kWideMR = Fmt::kWidens ? 8 : 6;
constexpr size_t kWideMaxK = 1024;
constexpr size_t kWBlockBytes = 512 * 1024;

template <class Fmt>
void SweepXTiles(const MatMulArgs& a, size_t m, size_t j0, size_t j1) {
  constexpr size_t kRows = kWideMR<Fmt>, kNr = kNrForR[kRows];
  const size_t w_rows = std::max(kNr, kWBlockBytes / std::max<size_t>(a.w_row_bytes, 1) / kNr * kNr);
  for (size_t jb = j0; jb < j1; jb += w_rows) {
    const size_t je = std::min(j1, jb + w_rows);
    for (size_t i = 0; i < m; i += kRows) Sweep<kNr, 1, kRows, Fmt>(a, i, std::min(m, i + kRows), jb, je);
  }
}
#endif

// All m rows of X against W rows [j0, j1).
template <class Fmt>
void MatMulColumns(const MatMulArgs& a, size_t m, size_t j0, size_t j1) {
  if (m < kMR) return SweepSmallM<Fmt>(a, m, j0, j1);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (m >= kWideMR<Fmt> && a.k <= kWideMaxK) return SweepXTiles<Fmt>(a, m, j0, j1);
#endif
  const size_t row_bytes = std::max<size_t>(a.k, 1) * sizeof(float);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (Fmt::kWidens && m >= 2 * kMR) {
    // Blocks of equal height (whole tiles), none over kXBlockBytes of X where the rows allow.
    const size_t most = std::max(kSpanMinRows, kXBlockBytes / row_bytes / kSpanMR * kSpanMR);
    const size_t blocks = (m + most - 1) / most;
    const size_t block = ((m + blocks - 1) / blocks + kSpanMR - 1) / kSpanMR * kSpanMR;
    for (size_t i0 = 0; i0 < m; i0 += block) SweepWidened<Fmt>(a, i0, std::min(m, i0 + block), j0, j1);
    return;
  }
#endif
  const size_t block = std::max(kMR, kXBlockBytes / row_bytes / kMR * kMR);
  for (size_t i0 = 0; i0 < m; i0 += block)
    Sweep<kNrForR[kMR], 1, kMR, Fmt>(a, i0, std::min(m, i0 + block), j0, j1);
}

template <class Fmt>
void MatMulWith(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, float* y,
                size_t ldy, ThreadTeam& team) {
  if (m == 0 || w.rows == 0) return;
  const size_t l1x = kDecodeStream ? internal::DecodeL1XBytes() : 0;
  const MatMulArgs a{x, ldx, static_cast<const uint8_t*>(w.data), w.row_bytes, w.cols, bias, y, ldy, l1x};
  // Shares in multiples of 24 W rows: whole tiles for every NR (all divide 24).
  team.ParallelFor(w.rows, 24, [&](size_t j0, size_t j1) { MatMulColumns<Fmt>(a, m, j0, j1); });
}

// acc[c] += W[row, c] for c < w.cols.
template <class Fmt>
void AccumulateRowWith(const MatrixView& w, size_t row, float* acc) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t n = w.cols;
  const uint8_t* p = w.row(row);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Add(hn::LoadU(df, acc + i), Fmt::Load(df, p, i)), df, acc + i);
  if (i < n) {
    StoreTail(hn::Add(LoadTail(df, acc + i, n - i), Fmt::LoadTail(df, p, i, n - i)), df, acc + i, n - i);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
