// The kernels of nn_ops.h: the scalar references (namespace ref, compiled
// once, at the end) and the SIMD versions, compiled once per Highway target
// (the list is in CMakeLists.txt) by re-including this file through
// hwy/foreach_target.h and chosen at run time for the CPU.
//
// As in src/ops/simd-inl.h, remainders go through small zero-padded stack buffers
// rather than masked loads, so no kernel reads past its last element.
#include "ops/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/nn_ops.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Upper bound of Lanes(DF) on every x86 target, for the stack buffers below.
constexpr size_t kMaxLanes = 16;
static_assert(HWY_MAX_BYTES / sizeof(float) <= kMaxLanes);

// Lanes [0, count) from p, the rest zero; reads nothing beyond p + count.
HWY_INLINE VF LoadTail(DF df, const float* HWY_RESTRICT p, size_t count) {
  HWY_ALIGN float buf[kMaxLanes] = {};
  for (size_t i = 0; i < count; ++i) buf[i] = p[i];
  return hn::Load(df, buf);
}

// Writes lanes [0, count) of v to p and nothing else.
HWY_INLINE void StoreTail(VF v, DF df, float* HWY_RESTRICT p, size_t count) {
  HWY_ALIGN float buf[kMaxLanes];
  hn::Store(v, df, buf);
  std::memcpy(p, buf, count * sizeof(float));
}

// Lanes [0, count ≤ N) of p: a full load when count is the vector length.
HWY_INLINE VF LoadN(DF df, const float* HWY_RESTRICT p, size_t count) {
  return count == hn::Lanes(df) ? hn::LoadU(df, p) : LoadTail(df, p, count);
}

HWY_INLINE void StoreN(VF v, DF df, float* HWY_RESTRICT p, size_t count) {
  if (count == hn::Lanes(df)) return hn::StoreU(v, df, p);
  StoreTail(v, df, p, count);
}

// out[i] = f(in[i]) for a lane-wise f; out may alias in.
template <class F>
HWY_INLINE void Unary(const float* in, float* out, size_t n, F f) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(f(df, hn::LoadU(df, in + i)), df, out + i);
  if (i < n) StoreTail(f(df, LoadTail(df, in + i, n - i)), df, out + i, n - i);
}

// out[i] = f(a[i], b[i]) for a lane-wise f; out may alias a or b.
template <class F>
HWY_INLINE void Binary(const float* a, const float* b, float* out, size_t n, F f) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(f(df, hn::LoadU(df, a + i), hn::LoadU(df, b + i)), df, out + i);
  if (i < n) StoreTail(f(df, LoadTail(df, a + i, n - i), LoadTail(df, b + i, n - i)), df, out + i, n - i);
}

// sigmoid(b) = 1/(1 + e^-b) for b ≥ 0 and e^b/(1 + e^b) for b < 0: Exp's
// argument −|b| is never positive, so it cannot overflow.
HWY_INLINE VF Sigmoid(DF df, VF b) {
  const VF one = hn::Set(df, 1.0f);
  const VF e = hn::Exp(df, hn::Neg(hn::Abs(b)));
  return hn::Div(hn::IfThenElse(hn::Lt(b, hn::Zero(df)), e, one), hn::Add(one, e));
}

// erf(x) as the odd/even rational function p(x)/q(x) on [−4, 4] that Eigen
// and XLA use for f32 (beyond ±4, erf is ±1 in f32). Evaluated in f32 it is
// within 3.8e-7 of erf, absolute and relative (the worst near the clamp).
HWY_INLINE VF Erf(DF df, VF x) {
  x = hn::Min(hn::Max(x, hn::Set(df, -4.0f)), hn::Set(df, 4.0f));
  const VF x2 = hn::Mul(x, x);
  VF p = hn::MulAdd(x2, hn::Set(df, -2.72614225801306e-10f), hn::Set(df, 2.77068142495902e-08f));
  p = hn::MulAdd(x2, p, hn::Set(df, -2.10102402082508e-06f));
  p = hn::MulAdd(x2, p, hn::Set(df, -5.69250639462346e-05f));
  p = hn::MulAdd(x2, p, hn::Set(df, -7.34990630326855e-04f));
  p = hn::MulAdd(x2, p, hn::Set(df, -2.95459980854025e-03f));
  p = hn::MulAdd(x2, p, hn::Set(df, -1.60960333262415e-02f));
  p = hn::Mul(x, p);
  VF q = hn::MulAdd(x2, hn::Set(df, -1.45660718464996e-05f), hn::Set(df, -2.13374055278905e-04f));
  q = hn::MulAdd(x2, q, hn::Set(df, -1.68282697438203e-03f));
  q = hn::MulAdd(x2, q, hn::Set(df, -7.37332916720468e-03f));
  q = hn::MulAdd(x2, q, hn::Set(df, -1.42647390514189e-02f));
  return hn::Div(p, q);
}

// Depthwise kernels vectorise across channels with their taps repacked per
// block of N channels; longer filters go to the reference.
constexpr size_t kMaxTaps = 32;

}  // namespace

void LayerNormImpl(const float* x, const float* gamma, const float* beta, size_t n, float eps, float* y) {
  if (n == 0) return;
  // Two passes in double, as the reference; only the order of the sums differs.
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> dfh;  // as many floats as dd has doubles
  const size_t Nd = hn::Lanes(dd);
  auto s0 = hn::Zero(dd), s1 = hn::Zero(dd);
  size_t i = 0;
  for (; i + 2 * Nd <= n; i += 2 * Nd) {
    s0 = hn::Add(s0, hn::PromoteTo(dd, hn::LoadU(dfh, x + i)));
    s1 = hn::Add(s1, hn::PromoteTo(dd, hn::LoadU(dfh, x + i + Nd)));
  }
  double sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
  for (; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  const auto vmean = hn::Set(dd, mean);
  s0 = hn::Zero(dd);
  s1 = hn::Zero(dd);
  for (i = 0; i + 2 * Nd <= n; i += 2 * Nd) {
    const auto d0 = hn::Sub(hn::PromoteTo(dd, hn::LoadU(dfh, x + i)), vmean);
    const auto d1 = hn::Sub(hn::PromoteTo(dd, hn::LoadU(dfh, x + i + Nd)), vmean);
    s0 = hn::MulAdd(d0, d0, s0);
    s1 = hn::MulAdd(d1, d1, s1);
  }
  double ss = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
  for (; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
  const float m = static_cast<float>(mean);
  const float rs = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));

  // y = ((x − m)·rs)·γ + β, the reference's operations in its order.
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF vm = hn::Set(df, m), vrs = hn::Set(df, rs);
  auto norm = [&](VF v, VF g, VF b) HWY_ATTR { return hn::Add(hn::Mul(hn::Mul(hn::Sub(v, vm), vrs), g), b); };
  for (i = 0; i + N <= n; i += N) {
    hn::StoreU(norm(hn::LoadU(df, x + i), hn::LoadU(df, gamma + i), hn::LoadU(df, beta + i)), df, y + i);
  }
  if (i < n) {
    const size_t r = n - i;
    StoreTail(norm(LoadTail(df, x + i, r), LoadTail(df, gamma + i, r), LoadTail(df, beta + i, r)), df, y + i,
              r);
  }
}

void GeluImpl(const float* x, float* y, size_t n) {
  Unary(x, y, n, [](DF df, VF v) HWY_ATTR {
    const VF e = Erf(df, hn::Mul(v, hn::Set(df, 0.70710678118654752f)));
    return hn::Mul(hn::Mul(v, hn::Set(df, 0.5f)), hn::Add(hn::Set(df, 1.0f), e));
  });
}

void SiluImpl(const float* x, float* y, size_t n) {
  Unary(x, y, n, [](DF df, VF v) HWY_ATTR { return hn::Mul(v, Sigmoid(df, v)); });
}

// e^x − 1 for x ≤ 0, within 0.87 ulp (every 7th float in [−90, −1e−6]): x = n·ln2 + r (n the nearest integer
// to x/ln2, so |r| ≤ ln2/2; ln2 in two parts, n·ln2_hi exact), e^r − 1 by its Taylor series to r^7 (the rest
// < 2e-8 relative), then 2^n·(e^r − 1) + (2^n − 1) (exact 2^n − 1 for n ≥ −24). x ≤ −88 gives n = −127, 2^n =
// 0 and −1, as e^x − 1 rounds. Highway's Expm1 (both signs, both ranges blended) took 23 cycles a vector on
// this Xeon, 0.26 ms of a Mimi frame; this 0.41 → 0.29 ns a value hot (bench_mimi_kernels "elu").
HWY_INLINE VF Expm1NonPositive(DF df, VF x) {
  const hn::RebindToSigned<DF> di;
  const VF xc = hn::Max(x, hn::Set(df, -88.0f));
  const VF nf = hn::Round(hn::Mul(xc, hn::Set(df, 1.44269504088896341f)));
  VF r = hn::MulAdd(nf, hn::Set(df, -0.693145751953125f), xc);  // ln2_hi: 16 significant bits
  r = hn::MulAdd(nf, hn::Set(df, -1.42860676533018704e-06f), r);
  VF p = hn::Set(df, 1.0f / 5040);
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f / 720));
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f / 120));
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f / 24));
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f / 6));
  p = hn::MulAdd(p, r, hn::Set(df, 0.5f));
  const VF em1 = hn::MulAdd(hn::Mul(r, r), p, r);
  const VF two_n = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, nf), hn::Set(di, 127))));
  return hn::MulAdd(two_n, em1, hn::Sub(two_n, hn::Set(df, 1.0f)));
}

// ELU with α = 1 on the negative side (Expm1NonPositive), selected only where x < 0 so large positive
// inputs never reach it.
void EluImpl(const float* x, float* y, size_t n) {
  Unary(x, y, n, [](DF df, VF v) HWY_ATTR {
    const VF neg = hn::Min(v, hn::Zero(df));
    return hn::IfThenElse(hn::Gt(v, hn::Zero(df)), v, Expm1NonPositive(df, neg));
  });
}

void ReluImpl(const float* x, float* y, size_t n) {
  Unary(x, y, n, [](DF df, VF v) HWY_ATTR { return hn::Max(v, hn::Zero(df)); });
}

void GluImpl(const float* a, const float* b, float* y, size_t n) {
  Binary(a, b, y, n, [](DF df, VF u, VF v) HWY_ATTR { return hn::Mul(u, Sigmoid(df, v)); });
}

void ScaleShiftImpl(const float* x, const float* scale, const float* shift, float* y, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF v = hn::Mul(hn::LoadU(df, x + i), hn::LoadU(df, scale + i));
    hn::StoreU(hn::Add(v, hn::LoadU(df, shift + i)), df, y + i);
  }
  if (i < n) {
    const size_t r = n - i;
    const VF v = hn::Mul(LoadTail(df, x + i, r), LoadTail(df, scale + i, r));
    StoreTail(hn::Add(v, LoadTail(df, shift + i, r)), df, y + i, r);
  }
}

void DepthwiseConv1dImpl(const float* x, size_t t, size_t ldx, size_t c, const float* w, size_t k, size_t pad,
                         const float* bias, float* y, size_t ldy) {
  if (k == 0 || k > kMaxTaps) return ref::DepthwiseConv1d(x, t, ldx, c, w, k, pad, bias, y, ldy);
  const DF df;
  const size_t N = hn::Lanes(df);
  HWY_ALIGN float taps[kMaxTaps * kMaxLanes];  // [k, N]: taps[j·N + l] = w[(ch0 + l)·k + j]
  for (size_t ch0 = 0; ch0 < c; ch0 += N) {
    const size_t width = std::min(N, c - ch0);
    for (size_t j = 0; j < k; ++j) {
      for (size_t l = 0; l < N; ++l) taps[j * N + l] = l < width ? w[(ch0 + l) * k + j] : 0.0f;
    }
    const VF b = bias == nullptr ? hn::Zero(df) : LoadN(df, bias + ch0, width);
    for (size_t r = 0; r < t; ++r) {
      // Taps j with input row r − pad + j inside [0, t).
      const size_t j0 = r < pad ? pad - r : 0;
      const size_t j1 = std::min(k, t + pad - r);
      VF acc = hn::Zero(df);
      for (size_t j = j0; j < j1; ++j) {
        const float* u = x + (r + j - pad) * ldx + ch0;
        acc = hn::MulAdd(hn::Load(df, taps + j * N), LoadN(df, u, width), acc);
      }
      StoreN(hn::Add(acc, b), df, y + r * ldy + ch0, width);
    }
  }
}

void Conv3x3Stride2RowImpl(const float* const rows[3], size_t width, size_t pixel_stride,
                           size_t channel_stride, size_t c, const float* w, const float* bias, float* y) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t ow = (width + 1) / 2;
  HWY_ALIGN float taps[9 * kMaxLanes];  // [9, N]: taps[s·N + l] = w[(ch0 + l)·9 + s]
  for (size_t ch0 = 0; ch0 < c; ch0 += N) {
    const size_t lanes = std::min(N, c - ch0);
    for (size_t s = 0; s < 9; ++s) {
      for (size_t l = 0; l < N; ++l) taps[s * N + l] = l < lanes ? w[(ch0 + l) * 9 + s] : 0.0f;
    }
    const VF b = bias == nullptr ? hn::Zero(df) : LoadN(df, bias + ch0, lanes);
    for (size_t j = 0; j < ow; ++j) {
      VF acc = hn::Zero(df);
      for (size_t a = 0; a < 3; ++a) {
        if (rows[a] == nullptr) continue;
        for (size_t s = 0; s < 3; ++s) {
          const size_t p = 2 * j + s;  // input pixel p − 1
          if (p == 0 || p > width) continue;
          const float* u = rows[a] + (p - 1) * pixel_stride + ch0 * channel_stride;
          const VF uv = channel_stride == 0 ? hn::Set(df, *u) : LoadN(df, u, lanes);
          acc = hn::MulAdd(hn::Load(df, taps + (3 * a + s) * N), uv, acc);
        }
      }
      StoreN(hn::Add(acc, b), df, y + j * c + ch0, lanes);
    }
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lfmvox::ops {

HWY_EXPORT(LayerNormImpl);
HWY_EXPORT(GeluImpl);
HWY_EXPORT(SiluImpl);
HWY_EXPORT(EluImpl);
HWY_EXPORT(ReluImpl);
HWY_EXPORT(GluImpl);
HWY_EXPORT(ScaleShiftImpl);
HWY_EXPORT(DepthwiseConv1dImpl);
HWY_EXPORT(Conv3x3Stride2RowImpl);

void LayerNorm(const float* x, const float* gamma, const float* beta, size_t n, float eps, float* y) {
  HWY_DYNAMIC_DISPATCH(LayerNormImpl)(x, gamma, beta, n, eps, y);
}
void Gelu(const float* x, float* y, size_t n) { HWY_DYNAMIC_DISPATCH(GeluImpl)(x, y, n); }
void Silu(const float* x, float* y, size_t n) { HWY_DYNAMIC_DISPATCH(SiluImpl)(x, y, n); }
void Elu(const float* x, float* y, size_t n) { HWY_DYNAMIC_DISPATCH(EluImpl)(x, y, n); }
void Relu(const float* x, float* y, size_t n) { HWY_DYNAMIC_DISPATCH(ReluImpl)(x, y, n); }
void Glu(const float* a, const float* b, float* y, size_t n) { HWY_DYNAMIC_DISPATCH(GluImpl)(a, b, y, n); }
void ScaleShift(const float* x, const float* scale, const float* shift, float* y, size_t n) {
  HWY_DYNAMIC_DISPATCH(ScaleShiftImpl)(x, scale, shift, y, n);
}
void DepthwiseConv1d(const float* x, size_t t, size_t ldx, size_t c, const float* w, size_t k, size_t pad,
                     const float* bias, float* y, size_t ldy) {
  HWY_DYNAMIC_DISPATCH(DepthwiseConv1dImpl)(x, t, ldx, c, w, k, pad, bias, y, ldy);
}
void Conv3x3Stride2Row(const float* const rows[3], size_t width, size_t pixel_stride, size_t channel_stride,
                       size_t c, const float* w, const float* bias, float* y) {
  HWY_DYNAMIC_DISPATCH(Conv3x3Stride2RowImpl)(rows, width, pixel_stride, channel_stride, c, w, bias, y);
}

// ---------------------------------------------------------------------------
// Scalar references: the executable contracts. Sums and transcendental
// functions in double, so they sit closer to the exact result than the f32
// SIMD versions (the yardstick of nn_ops_test.cc).
namespace ref {

namespace {
double SigmoidD(double v) { return 1.0 / (1.0 + std::exp(-v)); }
}  // namespace

void LayerNorm(const float* x, const float* gamma, const float* beta, size_t n, float eps, float* y) {
  if (n == 0) return;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double ss = 0.0;
  for (size_t i = 0; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
  const float m = static_cast<float>(mean);
  const float rs = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (size_t i = 0; i < n; ++i) y[i] = ((x[i] - m) * rs) * gamma[i] + beta[i];
}

void Gelu(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)));
  }
}

void Silu(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i] * SigmoidD(x[i]));
}

void Elu(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : static_cast<float>(std::expm1(double{x[i]}));
}

void Relu(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void Glu(const float* a, const float* b, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = static_cast<float>(a[i] * SigmoidD(b[i]));
}

void ScaleShift(const float* x, const float* scale, const float* shift, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i] * scale[i];  // rounded here, as torch does
    y[i] = v + shift[i];
  }
}

void DepthwiseConv1d(const float* x, size_t t, size_t ldx, size_t c, const float* w, size_t k, size_t pad,
                     const float* bias, float* y, size_t ldy) {
  for (size_t r = 0; r < t; ++r) {
    for (size_t ch = 0; ch < c; ++ch) {
      double s = 0.0;
      for (size_t j = 0; j < k; ++j) {
        if (r + j < pad || r + j - pad >= t) continue;  // zero padding
        s += double{w[ch * k + j]} * x[(r + j - pad) * ldx + ch];
      }
      if (bias != nullptr) s += bias[ch];
      y[r * ldy + ch] = static_cast<float>(s);
    }
  }
}

void Conv3x3Stride2Row(const float* const rows[3], size_t width, size_t pixel_stride, size_t channel_stride,
                       size_t c, const float* w, const float* bias, float* y) {
  const size_t ow = (width + 1) / 2;
  for (size_t j = 0; j < ow; ++j) {
    for (size_t ch = 0; ch < c; ++ch) {
      double s = 0.0;
      for (size_t a = 0; a < 3; ++a) {
        if (rows[a] == nullptr) continue;
        for (size_t b = 0; b < 3; ++b) {
          const size_t p = 2 * j + b;  // input pixel p − 1
          if (p == 0 || p > width) continue;
          s += double{w[ch * 9 + 3 * a + b]} * rows[a][(p - 1) * pixel_stride + ch * channel_stride];
        }
      }
      if (bias != nullptr) s += bias[ch];
      y[j * c + ch] = static_cast<float>(s);
    }
  }
}

}  // namespace ref
}  // namespace lfmvox::ops
#endif  // HWY_ONCE
