// The element-wise and reduction kernels of ops.h (everything but MatMul and
// AccumulateRow, which live in the matmul_<format>.cc units), compiled once
// per Highway target (see CMakeLists.txt for the list) and chosen at run time
// for the CPU. This file is re-included by hwy/foreach_target.h once per
// target; everything between HWY_BEFORE_NAMESPACE and HWY_AFTER_NAMESPACE is
// built for that target. Remainders go through the zero-padded buffers of
// simd-inl.h, so no kernel reads past its last element.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/ops.h"
#include "ops/ops_internal.h"

// foreach_target.h must come first, and highway.h before the contrib headers.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/elementwise.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/cache_control.h>
// clang-format on

#include "ops/matmul-inl.h"  // SumsOf16
#include "ops/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The largest lane of a NaN-free v. Not MaxOfLanes: on EMU128 that starts
// from -FLT_MAX, which turns an all -inf vector into -FLT_MAX.
HWY_INLINE float MaxLane(DF df, VF v) {
  HWY_ALIGN float buf[kMaxLanes];
  hn::Store(v, df, buf);
  float m = buf[0];
  for (size_t i = 1; i < hn::Lanes(df); ++i) m = buf[i] > m ? buf[i] : m;
  return m;
}

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
  const float max = MaxLane(df, vmax);
  // Every entry masked is 0/0, as torch gives; answered here because x - max
  // would be NaN and Exp converts its argument to an integer (undefined for
  // NaN on the scalar target).
  if (!(max > -kInf)) {
    std::fill(x, x + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  vmax = hn::Set(df, max);

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

// Rows of keys and values a head reads are d floats of rows ld apart (Mimi: 256 bytes of each 2 KiB row,
// two rows a 4 KiB page, which the hardware prefetcher does not cross), 8 MiB a call for Mimi's 8 layers,
// mostly from L3: each row is prefetched kAttendAhead rows ahead (24 ahead was no better than 8).
// Prefetch never faults, so looking past the last row is harmless. With the scores 16 at a time and the
// weighted sum in registers, one Mimi layer's attention (bench_mimi_kernels: 8 heads × 8 queries × 249
// keys, one core of this Xeon) went 142 → 102 µs hot, 181 → 137 µs median cold.
constexpr size_t kAttendAhead = 8;
HWY_INLINE void PrefetchRow(const float* row, size_t d) {
  for (size_t e = 0; e < d; e += 16) hwy::Prefetch(row + e);
}

// out = Σ_j scores[j]·values[j] for d = kV·Lanes: the sums stay in registers (with them in `out` each
// key's step waited for the last one's store; Mimi's 64-wide heads, 250 keys: 4.7 → ~2 % of a frame on one
// core of this Xeon), the same fma per key in the same order, so the same bits.
template <size_t kV>
HWY_INLINE void WeightedSumInRegisters(const float* scores, const float* values, size_t ld_v, size_t n,
                                       float* out) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF acc[kV];
  for (size_t v = 0; v < kV; ++v) acc[v] = hn::Zero(df);
  for (size_t j = 0; j < n; ++j) {
    const VF p = hn::Set(df, scores[j]);
    const float* row = values + j * ld_v;
    PrefetchRow(values + (j + kAttendAhead) * ld_v, kV * N);
    HWY_UNROLL(8)
    for (size_t v = 0; v < kV; ++v) acc[v] = hn::MulAdd(p, hn::LoadU(df, row + v * N), acc[v]);
  }
  for (size_t v = 0; v < kV; ++v) hn::StoreU(acc[v], df, out + v * N);
}

// scores[j] = scale·DotInline(q, keys[j], d) for j < n. On AVX-512 with d a multiple of 4 vectors,
// 16 keys at a time: the same four partial sums per key as DotInline, then the 16 lane sums together
// (SumsOf16, matmul-inl.h: Sum's tree, so the same bits) instead of one shuffle tree per key (Mimi's
// 64-wide heads: 4 shuffles and 4 adds a key on the FMA ports, against 4 FMAs).
HWY_INLINE void Scores(const float* HWY_RESTRICT q, const float* keys, size_t ld_k, size_t n, size_t d,
                       float scale, float* HWY_RESTRICT scores) {
  size_t j = 0;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  const DF df;
  const size_t N = hn::Lanes(df);
  if (d % (4 * N) == 0) {
    for (; j + 16 <= n; j += 16) {
      VF t[16];
      for (size_t u = 0; u < 16; ++u) {
        const float* HWY_RESTRICT k = keys + (j + u) * ld_k;
        PrefetchRow(k + kAttendAhead * ld_k, d);
        VF s0 = hn::Zero(df), s1 = hn::Zero(df), s2 = hn::Zero(df), s3 = hn::Zero(df);
        for (size_t i = 0; i < d; i += 4 * N) {
          s0 = hn::MulAdd(hn::LoadU(df, q + i), hn::LoadU(df, k + i), s0);
          s1 = hn::MulAdd(hn::LoadU(df, q + i + N), hn::LoadU(df, k + i + N), s1);
          s2 = hn::MulAdd(hn::LoadU(df, q + i + 2 * N), hn::LoadU(df, k + i + 2 * N), s2);
          s3 = hn::MulAdd(hn::LoadU(df, q + i + 3 * N), hn::LoadU(df, k + i + 3 * N), s3);
        }
        t[u] = hn::Add(hn::Add(s0, s1), hn::Add(s2, s3));
      }
      HWY_ALIGN float sums[16];
      SumsOf16(t, 16, sums);
      for (size_t u = 0; u < 16; ++u) scores[j + u] = scale * sums[u];
    }
  }
#endif
  for (; j < n; ++j) {
    PrefetchRow(keys + (j + kAttendAhead) * ld_k, d);
    scores[j] = scale * DotInline(q, keys + j * ld_k, d);
  }
}

void AttendOneImpl(const float* q, const float* keys, size_t ld_k, const float* values, size_t ld_v, size_t n,
                   size_t d, float scale, float* scores, float* out) {
  Scores(q, keys, ld_k, n, d, scale, scores);
  SoftmaxImpl(scores, n);
  const DF df;
  const size_t N = hn::Lanes(df);
  if (d % N == 0) {
    switch (d / N) {
      case 1:
        return WeightedSumInRegisters<1>(scores, values, ld_v, n, out);
      case 2:
        return WeightedSumInRegisters<2>(scores, values, ld_v, n, out);
      case 4:
        return WeightedSumInRegisters<4>(scores, values, ld_v, n, out);
      case 8:
        return WeightedSumInRegisters<8>(scores, values, ld_v, n, out);
      default:
        break;
    }
  }
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

// Exports name##Impl and defines ops::name (declared in ops.h) to call the
// chosen target's version: LFMVOX_FORWARD(name, (parameters), (arguments)).
#define LFMVOX_FORWARD(name, params, args)                           \
  HWY_EXPORT(name##Impl);                                            \
  auto name params->decltype(HWY_STATIC_DISPATCH(name##Impl) args) { \
    return HWY_DYNAMIC_DISPATCH(name##Impl) args;                    \
  }

LFMVOX_FORWARD(Dot, (const float* a, const float* b, size_t n), (a, b, n))
LFMVOX_FORWARD(RmsNorm, (const float* x, const float* w, size_t n, float eps, float* y), (x, w, n, eps, y))
LFMVOX_FORWARD(RopeSplitHalf, (float* x, size_t d, const float* cos, const float* sin), (x, d, cos, sin))
LFMVOX_FORWARD(RopeInterleaved, (float* x, size_t d, const float* cos, const float* sin), (x, d, cos, sin))
LFMVOX_FORWARD(Softmax, (float* x, size_t n), (x, n))
LFMVOX_FORWARD(SwiGlu, (const float* gate, const float* up, float* out, size_t n), (gate, up, out, n))
LFMVOX_FORWARD(Mul, (const float* a, const float* b, float* out, size_t n), (a, b, out, n))
LFMVOX_FORWARD(Add, (const float* a, const float* b, float* out, size_t n), (a, b, out, n))
LFMVOX_FORWARD(Scale, (const float* a, float s, float* out, size_t n), (a, s, out, n))
LFMVOX_FORWARD(CausalDepthwiseConv,
               (const float* x, size_t t, size_t ldx, size_t c, const float* w, size_t k, float* state,
                float* y, size_t ldy),
               (x, t, ldx, c, w, k, state, y, ldy))
LFMVOX_FORWARD(AttendOne,
               (const float* q, const float* keys, size_t ld_k, const float* values, size_t ld_v, size_t n,
                size_t d, float scale, float* scores, float* out),
               (q, keys, ld_k, values, ld_v, n, d, scale, scores, out))
LFMVOX_FORWARD(ArgMax, (const float* x, size_t n), (x, n))
HWY_EXPORT(TargetNameImpl);
const char* ChosenTarget() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

#undef LFMVOX_FORWARD

}  // namespace lfmvox::ops
#endif  // HWY_ONCE
