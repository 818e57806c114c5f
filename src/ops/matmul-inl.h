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

#include <algorithm>
#include <cstddef>
#include <cstdint>

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
// With R < kMR (small m) NR grows: R = 1 gets 8 independent FMA chains to
// hide the FMA latency.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr size_t kNrForR[] = {0, 8, 8, 6, 4, 4, 4};
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
};

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
  size_t q = 0;
  for (; q + N <= k; q += N) {
    // Whether this step starts another 64-byte line of each W row.
    const size_t at = Fmt::BytesBefore(q);
    const bool new_line = (at & 63) < Fmt::BytesBefore(q + N) - at;
    VF wv[NR];
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
      if (new_line) hwy::Prefetch(w + (c + NR) * rb + at);
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
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < NR; ++c) {
      float s = Sum(df, acc[r][c]);
      if (a.bias != nullptr) s += a.bias[j + c];
      a.y[(i + r) * a.ldy + j + c] = s;
    }
  }
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
  size_t j = j0;
  for (; j + NR <= j1; j += NR) {
    for (size_t i = i0; i < i1; i += kMR) TileRows<NR, MinR, MaxR, Fmt>(a, std::min(kMR, i1 - i), i, j);
  }
  for (; j < j1; ++j) {
    for (size_t i = i0; i < i1; i += kMR) TileRows<1, MinR, MaxR, Fmt>(a, std::min(kMR, i1 - i), i, j);
  }
}

// m = R rows in one tile, with the NR that suits R, for a run-time m in [R, kMR).
template <class Fmt, size_t R = 1>
HWY_INLINE void SweepSmallM(const MatMulArgs& a, size_t m, size_t j0, size_t j1) {
  if constexpr (R < kMR) {
    if (m == R) return Sweep<kNrForR[R], R, R, Fmt>(a, 0, m, j0, j1);
    SweepSmallM<Fmt, R + 1>(a, m, j0, j1);
  }
}

// All m rows of X against W rows [j0, j1).
template <class Fmt>
void MatMulColumns(const MatMulArgs& a, size_t m, size_t j0, size_t j1) {
  if (m < kMR) return SweepSmallM<Fmt>(a, m, j0, j1);
  const size_t rows_in_l2 = kXBlockBytes / (std::max<size_t>(a.k, 1) * sizeof(float));
  const size_t block = std::max(kMR, rows_in_l2 / kMR * kMR);
  for (size_t i0 = 0; i0 < m; i0 += block)
    Sweep<kNrForR[kMR], 1, kMR, Fmt>(a, i0, std::min(m, i0 + block), j0, j1);
}

template <class Fmt>
void MatMulWith(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, float* y,
                size_t ldy, ThreadTeam& team) {
  if (m == 0 || w.rows == 0) return;
  const MatMulArgs a{x, ldx, static_cast<const uint8_t*>(w.data), w.row_bytes, w.cols, bias, y, ldy};
  // Shares in multiples of 8 W rows: whole tiles for every NR that divides 8.
  team.ParallelFor(w.rows, 8, [&](size_t j0, size_t j1) { MatMulColumns<Fmt>(a, m, j0, j1); });
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
