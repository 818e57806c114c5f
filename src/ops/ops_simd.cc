// SIMD kernels, compiled once per Highway target (see CMakeLists.txt for the
// list) and chosen at run time for the CPU. This file is re-included by
// hwy/foreach_target.h once per target; everything between
// HWY_BEFORE_NAMESPACE and HWY_AFTER_NAMESPACE is built for that target.
//
// Remainders (sizes not a multiple of the vector length) go through a small
// zero-padded stack buffer instead of a masked load: rows of mmap'd weights
// may end at the end of the mapping, so no kernel reads past its last element.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "threading/thread_team.h"

// foreach_target.h must come first, and highway.h before the contrib headers.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/ops_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Upper bound of Lanes(DF) on every x86 target (64-byte AVX-512 vectors), for
// the stack buffers of the remainder path. Arrays of vectors below are fine
// for the same reason: x86 vectors are sized types.
constexpr size_t kMaxLanes = 16;
static_assert(HWY_MAX_BYTES / sizeof(float) <= kMaxLanes);

constexpr float kInf = std::numeric_limits<float>::infinity();

// Lanes [0, count) from p, the rest `pad`; reads nothing beyond p + count.
HWY_INLINE VF LoadTail(DF df, const float* HWY_RESTRICT p, size_t count, float pad = 0.0f) {
  HWY_ALIGN float buf[kMaxLanes];
  for (size_t i = 0; i < kMaxLanes; ++i) buf[i] = i < count ? p[i] : pad;
  return hn::Load(df, buf);
}

// Writes lanes [0, count) of v to p and nothing else.
HWY_INLINE void StoreTail(VF v, DF df, float* HWY_RESTRICT p, size_t count) {
  HWY_ALIGN float buf[kMaxLanes];
  hn::Store(v, df, buf);
  std::memcpy(p, buf, count * sizeof(float));
}

// bf16 is the upper half of an f32: widening is an exact 16-bit shift.
HWY_INLINE VF WidenBf16(DF df, const uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> du16;
  const hn::RebindToUnsigned<DF> du32;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}

// A full vector of weights, widened to f32.
HWY_INLINE VF LoadWeights(DF df, const float* HWY_RESTRICT p) { return hn::LoadU(df, p); }
HWY_INLINE VF LoadWeights(DF df, const uint16_t* HWY_RESTRICT p) { return WidenBf16(df, p); }

// The first `count` weights, zero padded; the same values LoadWeights gives.
HWY_INLINE VF LoadWeightsTail(DF df, const float* HWY_RESTRICT p, size_t count) {
  return LoadTail(df, p, count);
}
HWY_INLINE VF LoadWeightsTail(DF df, const uint16_t* HWY_RESTRICT p, size_t count) {
  HWY_ALIGN float buf[kMaxLanes] = {};
  for (size_t i = 0; i < count; ++i) buf[i] = Bf16ToF32(p[i]);
  return hn::Load(df, buf);
}

HWY_INLINE float Sum(DF df, VF v) { return hn::GetLane(hn::SumOfLanes(df, v)); }

// The largest lane of a NaN-free v. Not MaxOfLanes: on EMU128 that starts
// from -FLT_MAX, which turns an all -inf vector into -FLT_MAX.
HWY_INLINE float MaxLane(DF df, VF v) {
  HWY_ALIGN float buf[kMaxLanes];
  hn::Store(v, df, buf);
  float m = buf[0];
  for (size_t i = 1; i < hn::Lanes(df); ++i) m = buf[i] > m ? buf[i] : m;
  return m;
}

// ---------------------------------------------------------------------------
// MatMul
//
// The canonical computation of one output, the same in every code path below:
//   acc = 0 (one vector); for each full chunk of Lanes(df) along k:
//   acc = MulAdd(x_chunk, w_chunk, acc); then the zero-padded remainder chunk
//   the same way; y = SumOfLanes(acc) (+ bias).
// A tile of R X rows × NR W rows holds R·NR such accumulators side by side and
// never mixes them, so the tile shape, the position of a row in it, the split
// of n across threads and m itself cannot change any bit of the result.
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
template <typename WT>
struct MatMulArgs {
  const float* x;
  size_t ldx;
  const WT* w;
  size_t ldw;
  size_t k;
  const float* bias;  // nullable
  float* y;
  size_t ldy;
};

// Y[i .. i+R, j .. j+NR) from X rows [i, i + R) and W rows [j, j + NR).
template <size_t R, size_t NR, typename WT>
HWY_NOINLINE void Tile(const MatMulArgs<WT>& a, size_t i, size_t j) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t k = a.k, ldx = a.ldx, ldw = a.ldw;
  const float* HWY_RESTRICT x = a.x + i * ldx;
  const WT* HWY_RESTRICT w = a.w + j * ldw;
  VF acc[R][NR];
  HWY_UNROLL(8)
  for (size_t r = 0; r < R; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) acc[r][c] = hn::Zero(df);
  }
  size_t q = 0;
  for (; q + N <= k; q += N) {
    // Whether this step starts another 64-byte line of each W row.
    const bool new_line = ((q * sizeof(WT)) & 63) < N * sizeof(WT);
    VF wv[NR];
    HWY_UNROLL(8)
    for (size_t c = 0; c < NR; ++c) {
      if (new_line) hwy::Prefetch(w + (c + NR) * ldw + q);
      wv[c] = LoadWeights(df, w + c * ldw + q);
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
    for (size_t c = 0; c < NR; ++c) wv[c] = LoadWeightsTail(df, w + c * ldw + q, k - q);
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
template <size_t NR, size_t R, size_t MaxR, typename WT>
HWY_INLINE void TileRows(const MatMulArgs<WT>& a, size_t rows, size_t i, size_t j) {
  if constexpr (R <= MaxR) {
    if (rows == R) return Tile<R, NR>(a, i, j);
    TileRows<NR, R + 1, MaxR>(a, rows, i, j);
  }
}

// X rows [i0, i1) against W rows [j0, j1): for each block of NR W rows
// (which then stays in L1/L2), tiles of kMR X rows, the last fewer; leftover
// W rows one at a time. Every tile has MinR..MaxR rows.
template <size_t NR, size_t MinR, size_t MaxR, typename WT>
void Sweep(const MatMulArgs<WT>& a, size_t i0, size_t i1, size_t j0, size_t j1) {
  size_t j = j0;
  for (; j + NR <= j1; j += NR) {
    for (size_t i = i0; i < i1; i += kMR) TileRows<NR, MinR, MaxR>(a, std::min(kMR, i1 - i), i, j);
  }
  for (; j < j1; ++j) {
    for (size_t i = i0; i < i1; i += kMR) TileRows<1, MinR, MaxR>(a, std::min(kMR, i1 - i), i, j);
  }
}

// m = R rows in one tile, with the NR that suits R, for a run-time m in [R, kMR).
template <size_t R = 1, typename WT>
HWY_INLINE void SweepSmallM(const MatMulArgs<WT>& a, size_t m, size_t j0, size_t j1) {
  if constexpr (R < kMR) {
    if (m == R) return Sweep<kNrForR[R], R, R>(a, 0, m, j0, j1);
    SweepSmallM<R + 1>(a, m, j0, j1);
  }
}

// All m rows of X against W rows [j0, j1).
template <typename WT>
void MatMulColumns(const MatMulArgs<WT>& a, size_t m, size_t j0, size_t j1) {
  if (m < kMR) return SweepSmallM(a, m, j0, j1);
  const size_t rows_in_l2 = kXBlockBytes / (std::max<size_t>(a.k, 1) * sizeof(float));
  const size_t block = std::max(kMR, rows_in_l2 / kMR * kMR);
  for (size_t i0 = 0; i0 < m; i0 += block)
    Sweep<kNrForR[kMR], 1, kMR>(a, i0, std::min(m, i0 + block), j0, j1);
}

template <typename WT>
void MatMulTyped(const float* x, size_t m, size_t ldx, const Weight& w, const float* bias, float* y,
                 size_t ldy, ThreadTeam& team) {
  const MatMulArgs<WT> a{x, ldx, static_cast<const WT*>(w.data), w.ld, w.cols, bias, y, ldy};
  // Shares in multiples of 8 W rows: whole tiles for every NR that divides 8.
  team.ParallelFor(w.rows, 8, [&](size_t j0, size_t j1) { MatMulColumns(a, m, j0, j1); });
}

void MatMulImpl(const float* x, size_t m, size_t ldx, const Weight& w, const float* bias, float* y,
                size_t ldy, ThreadTeam& team) {
  if (m == 0 || w.rows == 0) return;
  switch (w.dtype) {
    case DType::kBF16:
      return MatMulTyped<uint16_t>(x, m, ldx, w, bias, y, ldy, team);
    case DType::kF32:
      return MatMulTyped<float>(x, m, ldx, w, bias, y, ldy, team);
    default:  // a caller bug (see ops.h): make it visible rather than silent
      for (size_t i = 0; i < m; ++i) {
        std::fill(y + i * ldy, y + i * ldy + w.rows, std::numeric_limits<float>::quiet_NaN());
      }
  }
}

// ---------------------------------------------------------------------------
// Reductions and element-wise kernels

HWY_INLINE float DotInline(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  // Four chains hide the FMA latency.
  VF s0 = hn::Zero(df), s1 = hn::Zero(df), s2 = hn::Zero(df), s3 = hn::Zero(df);
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    s0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), s0);
    s1 = hn::MulAdd(hn::LoadU(df, a + i + N), hn::LoadU(df, b + i + N), s1);
    s2 = hn::MulAdd(hn::LoadU(df, a + i + 2 * N), hn::LoadU(df, b + i + 2 * N), s2);
    s3 = hn::MulAdd(hn::LoadU(df, a + i + 3 * N), hn::LoadU(df, b + i + 3 * N), s3);
  }
  for (; i + N <= n; i += N) s0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), s0);
  if (i < n) s1 = hn::MulAdd(LoadTail(df, a + i, n - i), LoadTail(df, b + i, n - i), s1);
  return Sum(df, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)));
}

float DotImpl(const float* a, const float* b, size_t n) { return DotInline(a, b, n); }

void RmsNormImpl(const float* x, const float* w, size_t n, float eps, float* y) {
  // Sum of squares in double, as the contract says.
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> dfh;  // as many floats as dd has doubles
  const size_t Nd = hn::Lanes(dd);
  auto s0 = hn::Zero(dd), s1 = hn::Zero(dd);
  size_t i = 0;
  for (; i + 2 * Nd <= n; i += 2 * Nd) {
    const auto v0 = hn::PromoteTo(dd, hn::LoadU(dfh, x + i));
    const auto v1 = hn::PromoteTo(dd, hn::LoadU(dfh, x + i + Nd));
    s0 = hn::MulAdd(v0, v0, s0);
    s1 = hn::MulAdd(v1, v1, s1);
  }
  double ss = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
  for (; i < n; ++i) ss += double{x[i]} * x[i];
  const double mean = n > 0 ? ss / static_cast<double>(n) : 0.0;
  const float inv = static_cast<float>(1.0 / std::sqrt(mean + eps));

  // y = w ⊙ (x · inv), the reference's order of operations.
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF vinv = hn::Set(df, inv);
  for (i = 0; i + N <= n; i += N) {
    hn::StoreU(hn::Mul(hn::LoadU(df, w + i), hn::Mul(hn::LoadU(df, x + i), vinv)), df, y + i);
  }
  if (i < n) {
    StoreTail(hn::Mul(LoadTail(df, w + i, n - i), hn::Mul(LoadTail(df, x + i, n - i), vinv)), df, y + i,
              n - i);
  }
}

// (a, b) ← (a·c − b·s, b·c + a·s), exactly the reference's operations.
HWY_INLINE void Rotate(VF& a, VF& b, VF c, VF s) {
  const VF na = hn::Sub(hn::Mul(a, c), hn::Mul(b, s));
  b = hn::Add(hn::Mul(b, c), hn::Mul(a, s));
  a = na;
}

void RopeSplitHalfImpl(float* x, size_t d, const float* cos, const float* sin) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t h = d / 2;
  float* x2 = x + h;
  size_t i = 0;
  for (; i + N <= h; i += N) {
    VF a = hn::LoadU(df, x + i), b = hn::LoadU(df, x2 + i);
    Rotate(a, b, hn::LoadU(df, cos + i), hn::LoadU(df, sin + i));
    hn::StoreU(a, df, x + i);
    hn::StoreU(b, df, x2 + i);
  }
  if (i < h) {
    const size_t r = h - i;
    VF a = LoadTail(df, x + i, r), b = LoadTail(df, x2 + i, r);
    Rotate(a, b, LoadTail(df, cos + i, r), LoadTail(df, sin + i, r));
    StoreTail(a, df, x + i, r);
    StoreTail(b, df, x2 + i, r);
  }
}

void RopeInterleavedImpl(float* x, size_t d, const float* cos, const float* sin) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t h = d / 2;
  size_t p = 0;
  for (; p + N <= h; p += N) {
    VF a, b;  // even and odd elements of N pairs
    hn::LoadInterleaved2(df, x + 2 * p, a, b);
    Rotate(a, b, hn::LoadU(df, cos + p), hn::LoadU(df, sin + p));
    hn::StoreInterleaved2(a, b, df, x + 2 * p);
  }
  for (; p < h; ++p) {  // fewer than N pairs: scalar, same operations
    const float a = x[2 * p], b = x[2 * p + 1];
    x[2 * p] = a * cos[p] - b * sin[p];
    x[2 * p + 1] = b * cos[p] + a * sin[p];
  }
}

// NaN inputs give an unspecified (NaN or garbage) result.
void SoftmaxImpl(float* x, size_t n) {
  if (n == 0) return;
  const DF df;
  const size_t N = hn::Lanes(df);
  VF vmax = hn::Set(df, -kInf);
  size_t i = 0;
  for (; i + N <= n; i += N) vmax = hn::Max(vmax, hn::LoadU(df, x + i));
  if (i < n) vmax = hn::Max(vmax, LoadTail(df, x + i, n - i, -kInf));
  vmax = hn::Set(df, MaxLane(df, vmax));

  // Exp returns exactly 0 below -104, so -inf inputs give exact zeros; the
  // padded lanes of the tail hold -inf for the same reason.
  VF vsum = hn::Zero(df);
  for (i = 0; i + N <= n; i += N) {
    const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, x + i), vmax));
    hn::StoreU(e, df, x + i);
    vsum = hn::Add(vsum, e);
  }
  if (i < n) {
    const VF e = hn::Exp(df, hn::Sub(LoadTail(df, x + i, n - i, -kInf), vmax));
    StoreTail(e, df, x + i, n - i);
    vsum = hn::Add(vsum, e);
  }
  const VF inv = hn::Div(hn::Set(df, 1.0f), hn::SumOfLanes(df, vsum));
  for (i = 0; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), inv), df, x + i);
  if (i < n) StoreTail(hn::Mul(LoadTail(df, x + i, n - i), inv), df, x + i, n - i);
}

// silu(g)·u with sigmoid(g) = 1 / (1 + e^-g) for g ≥ 0 and e^g / (1 + e^g) for
// g < 0: the exponent argument is always ≤ 0, inside Exp's valid range.
HWY_INLINE VF SwiGluVec(DF df, VF g, VF u) {
  const VF one = hn::Set(df, 1.0f);
  const VF e = hn::Exp(df, hn::Neg(hn::Abs(g)));
  const VF sig = hn::Div(hn::IfThenElse(hn::Lt(g, hn::Zero(df)), e, one), hn::Add(one, e));
  return hn::Mul(hn::Mul(g, sig), u);
}

void SwiGluImpl(const float* gate, const float* up, float* out, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(SwiGluVec(df, hn::LoadU(df, gate + i), hn::LoadU(df, up + i)), df, out + i);
  }
  if (i < n) {
    StoreTail(SwiGluVec(df, LoadTail(df, gate + i, n - i), LoadTail(df, up + i, n - i)), df, out + i, n - i);
  }
}

// out[i] = f(a[i], b[i]) for an exact lane-wise f.
template <class F>
HWY_INLINE void Binary(const float* a, const float* b, float* out, size_t n, F f) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(f(hn::LoadU(df, a + i), hn::LoadU(df, b + i)), df, out + i);
  if (i < n) StoreTail(f(LoadTail(df, a + i, n - i), LoadTail(df, b + i, n - i)), df, out + i, n - i);
}

void MulImpl(const float* a, const float* b, float* out, size_t n) {
  Binary(a, b, out, n, [](VF u, VF v) HWY_ATTR { return hn::Mul(u, v); });
}

void AddImpl(const float* a, const float* b, float* out, size_t n) {
  Binary(a, b, out, n, [](VF u, VF v) HWY_ATTR { return hn::Add(u, v); });
}

void ScaleImpl(const float* a, float s, float* out, size_t n) {
  const VF vs = hn::Set(DF(), s);
  Binary(a, a, out, n, [vs](VF u, VF) HWY_ATTR { return hn::Mul(u, vs); });
}

void AccumulateBf16Impl(const uint16_t* row, float* acc, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Add(hn::LoadU(df, acc + i), WidenBf16(df, row + i)), df, acc + i);
  if (i < n) {
    StoreTail(hn::Add(LoadTail(df, acc + i, n - i), LoadWeightsTail(df, row + i, n - i)), df, acc + i, n - i);
  }
}

// Vectorised across channels. Taps beyond this go to the reference kernel
// (the models use 3 or 4).
constexpr size_t kMaxConvTaps = 32;

void CausalDepthwiseConvImpl(const float* x, size_t t, size_t ldx, size_t c, const float* w, size_t k,
                             float* state, float* y, size_t ldy) {
  if (k == 0 || k > kMaxConvTaps) return ref::CausalDepthwiseConv(x, t, ldx, c, w, k, state, y, ldy);
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t hist = k - 1;
  HWY_ALIGN float taps[kMaxConvTaps * kMaxLanes];  // [k, N]: taps[j·N + lane] = w[(ch0 + lane)·k + j]
  for (size_t ch0 = 0; ch0 < c; ch0 += N) {
    const size_t width = std::min(N, c - ch0);
    for (size_t j = 0; j < k; ++j) {
      for (size_t l = 0; l < N; ++l) taps[j * N + l] = l < width ? w[(ch0 + l) * k + j] : 0.0f;
    }
    for (size_t r = 0; r < t; ++r) {
      VF acc = hn::Zero(df);
      for (size_t j = 0; j < k; ++j) {
        // Input row r - hist + j: from the state while negative, else from x.
        const size_t q = r + j;
        const float* u = q < hist ? state + q * c + ch0 : x + (q - hist) * ldx + ch0;
        const VF uv = width == N ? hn::LoadU(df, u) : LoadTail(df, u, width);
        acc = hn::MulAdd(hn::Load(df, taps + j * N), uv, acc);
      }
      if (width == N) {
        hn::StoreU(acc, df, y + r * ldy + ch0);
      } else {
        StoreTail(acc, df, y + r * ldy + ch0, width);
      }
    }
  }
  internal::AdvanceConvState(x, t, ldx, c, hist, state);
}

void AttendOneImpl(const float* q, const float* keys, size_t ld_k, const float* values, size_t ld_v, size_t n,
                   size_t d, float scale, float* scores, float* out) {
  for (size_t j = 0; j < n; ++j) scores[j] = scale * DotInline(q, keys + j * ld_k, d);
  SoftmaxImpl(scores, n);
  const DF df;
  const size_t N = hn::Lanes(df);
  std::fill(out, out + d, 0.0f);
  for (size_t j = 0; j < n; ++j) {
    const VF p = hn::Set(df, scores[j]);
    const float* v = values + j * ld_v;
    size_t e = 0;
    for (; e + N <= d; e += N)
      hn::StoreU(hn::MulAdd(p, hn::LoadU(df, v + e), hn::LoadU(df, out + e)), df, out + e);
    if (e < d) {
      StoreTail(hn::MulAdd(p, LoadTail(df, v + e, d - e), LoadTail(df, out + e, d - e)), df, out + e, d - e);
    }
  }
}

// NaNs never win (comparisons with NaN are false); all-NaN or n == 0 gives 0.
size_t ArgMaxImpl(const float* x, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  // Pass 1: the maximum over non-NaN entries (each lane keeps its own).
  VF best = hn::Set(df, -kInf);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF v = hn::LoadU(df, x + i);
    best = hn::IfThenElse(hn::Gt(v, best), v, best);
  }
  if (i < n) {
    const VF v = LoadTail(df, x + i, n - i, -kInf);
    best = hn::IfThenElse(hn::Gt(v, best), v, best);
  }
  const float m = MaxLane(df, best);  // no NaN lanes here
  // Pass 2: the first index holding it.
  const VF vmax = hn::Set(df, m);
  for (i = 0; i + N <= n; i += N) {
    const intptr_t pos = hn::FindFirstTrue(df, hn::Eq(hn::LoadU(df, x + i), vmax));
    if (pos >= 0) return i + static_cast<size_t>(pos);
  }
  for (; i < n; ++i) {
    if (x[i] == m) return i;
  }
  return 0;
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lfmvox::ops {

HWY_EXPORT(MatMulImpl);
HWY_EXPORT(DotImpl);
HWY_EXPORT(RmsNormImpl);
HWY_EXPORT(RopeSplitHalfImpl);
HWY_EXPORT(RopeInterleavedImpl);
HWY_EXPORT(SoftmaxImpl);
HWY_EXPORT(SwiGluImpl);
HWY_EXPORT(MulImpl);
HWY_EXPORT(AddImpl);
HWY_EXPORT(ScaleImpl);
HWY_EXPORT(AccumulateBf16Impl);
HWY_EXPORT(CausalDepthwiseConvImpl);
HWY_EXPORT(AttendOneImpl);
HWY_EXPORT(ArgMaxImpl);
HWY_EXPORT(TargetNameImpl);

void MatMul(const float* x, size_t m, size_t ldx, const Weight& w, const float* bias, float* y, size_t ldy,
            ThreadTeam& team) {
  HWY_DYNAMIC_DISPATCH(MatMulImpl)(x, m, ldx, w, bias, y, ldy, team);
}
float Dot(const float* a, const float* b, size_t n) { return HWY_DYNAMIC_DISPATCH(DotImpl)(a, b, n); }
void RmsNorm(const float* x, const float* w, size_t n, float eps, float* y) {
  HWY_DYNAMIC_DISPATCH(RmsNormImpl)(x, w, n, eps, y);
}
void RopeSplitHalf(float* x, size_t d, const float* cos, const float* sin) {
  HWY_DYNAMIC_DISPATCH(RopeSplitHalfImpl)(x, d, cos, sin);
}
void RopeInterleaved(float* x, size_t d, const float* cos, const float* sin) {
  HWY_DYNAMIC_DISPATCH(RopeInterleavedImpl)(x, d, cos, sin);
}
void Softmax(float* x, size_t n) { HWY_DYNAMIC_DISPATCH(SoftmaxImpl)(x, n); }
void SwiGlu(const float* gate, const float* up, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(SwiGluImpl)(gate, up, out, n);
}
void Mul(const float* a, const float* b, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(MulImpl)(a, b, out, n);
}
void Add(const float* a, const float* b, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(AddImpl)(a, b, out, n);
}
void Scale(const float* a, float s, float* out, size_t n) { HWY_DYNAMIC_DISPATCH(ScaleImpl)(a, s, out, n); }
void AccumulateBf16(const uint16_t* row, float* acc, size_t n) {
  HWY_DYNAMIC_DISPATCH(AccumulateBf16Impl)(row, acc, n);
}
void CausalDepthwiseConv(const float* x, size_t t, size_t ldx, size_t c, const float* w, size_t k,
                         float* state, float* y, size_t ldy) {
  HWY_DYNAMIC_DISPATCH(CausalDepthwiseConvImpl)(x, t, ldx, c, w, k, state, y, ldy);
}
void AttendOne(const float* q, const float* keys, size_t ld_k, const float* values, size_t ld_v, size_t n,
               size_t d, float scale, float* scores, float* out) {
  HWY_DYNAMIC_DISPATCH(AttendOneImpl)(q, keys, ld_k, values, ld_v, n, d, scale, scores, out);
}
size_t ArgMax(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(ArgMaxImpl)(x, n); }
const char* ChosenTarget() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

}  // namespace lfmvox::ops
#endif  // HWY_ONCE
