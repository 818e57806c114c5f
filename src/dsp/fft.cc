// Highway dynamic dispatch: the kernels below are compiled once per SIMD
// target through foreach_target.h; RealFft::Forward/Inverse pick the best
// one for the CPU at run time (one dispatch per transform).
#include "dsp/fft.h"

#include <cmath>
#include <numbers>
#include <utility>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "dsp/fft.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace lfmvox::dsp::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using fft_internal::Plan;
using fft_internal::Stage;

// Calls body(d, i) for chunks covering [begin, end): full vectors, then
// 4-lane, then 1-lane ones, so every length runs the same vector arithmetic
// without a separate scalar copy.
template <class Body>
HWY_INLINE void ForChunks(size_t begin, size_t end, const Body& body) {
  const hn::ScalableTag<float> df;
  const hn::CappedTag<float, 4> d4;
  const hn::CappedTag<float, 1> d1;
  size_t i = begin;
  for (; i + hn::Lanes(df) <= end; i += hn::Lanes(df)) body(df, i);
  for (; i + hn::Lanes(d4) <= end; i += hn::Lanes(d4)) body(d4, i);
  for (; i < end; ++i) body(d1, i);
}

// (cr, ci) = (ar + i·ai)·(br + i·bi)
template <class V>
HWY_INLINE void CMul(V ar, V ai, V br, V bi, V& cr, V& ci) {
  cr = hn::MulSub(ar, br, hn::Mul(ai, bi));
  ci = hn::MulAdd(ar, bi, hn::Mul(ai, br));
}

// Stockham stage, radix P, one vector of lanes. Reads element j < P at
// x + j·dist; multiplies output k by twiddle w_k (at tw + (k−1)·tw_dist, one
// per lane when kInterleaved, else broadcast); writes output k to y + k·ostride,
// or, when kInterleaved, lane-interleaved: y[P·lane + k].
//   kInterleaved = false: lanes run over r (stride ≥ lanes), one q.
//   kInterleaved = true:  lanes run over q (stride 1, the first stage).
template <size_t P, bool kInterleaved, class D>
HWY_INLINE void Butterfly(D d, const float* HWY_RESTRICT xr, const float* HWY_RESTRICT xi, size_t dist,
                          const float* twr, const float* twi, size_t tw_dist, float* HWY_RESTRICT yr,
                          float* HWY_RESTRICT yi, size_t ostride) {
  using V = hn::Vec<D>;
  const auto tw = [&](const float* t, size_t k) HWY_ATTR {
    if constexpr (kInterleaved) {
      return hn::LoadU(d, t + (k - 1) * tw_dist);
    } else {
      return hn::Set(d, t[(k - 1) * tw_dist]);
    }
  };
  const auto load = [&](const float* x, size_t j) HWY_ATTR { return hn::LoadU(d, x + j * dist); };
  // Output k as b_k·w_k (k ≥ 1).
  const auto twiddled = [&](V br, V bi, size_t k, V& outr, V& outi)
                            HWY_ATTR { CMul(br, bi, tw(twr, k), tw(twi, k), outr, outi); };
  const auto store = [&](V br, V bi, size_t k) HWY_ATTR {
    hn::StoreU(br, d, yr + k * ostride);
    hn::StoreU(bi, d, yi + k * ostride);
  };

  if constexpr (P == 2) {
    const V a0r = load(xr, 0), a0i = load(xi, 0), a1r = load(xr, 1), a1i = load(xi, 1);
    const V b0r = hn::Add(a0r, a1r), b0i = hn::Add(a0i, a1i);
    V b1r, b1i;
    twiddled(hn::Sub(a0r, a1r), hn::Sub(a0i, a1i), 1, b1r, b1i);
    if constexpr (kInterleaved) {
      hn::StoreInterleaved2(b0r, b1r, d, yr);
      hn::StoreInterleaved2(b0i, b1i, d, yi);
    } else {
      store(b0r, b0i, 0);
      store(b1r, b1i, 1);
    }
  } else if constexpr (P == 3) {
    // ω_3 = −1/2 − i·h, h = √3/2: b_{1,2} = a0 − (a1 + a2)/2 ∓ i·h·(a1 − a2).
    const V h = hn::Set(d, static_cast<float>(std::sqrt(3.0) / 2.0));
    const V half = hn::Set(d, 0.5f);
    const V a0r = load(xr, 0), a0i = load(xi, 0), a1r = load(xr, 1), a1i = load(xi, 1);
    const V a2r = load(xr, 2), a2i = load(xi, 2);
    const V tr = hn::Add(a1r, a2r), ti = hn::Add(a1i, a2i);
    const V mr = hn::NegMulAdd(half, tr, a0r), mi = hn::NegMulAdd(half, ti, a0i);
    const V nr = hn::Mul(h, hn::Sub(a1i, a2i)), ni = hn::Mul(h, hn::Sub(a2r, a1r));  // −i·h·(a1 − a2)
    const V b0r = hn::Add(a0r, tr), b0i = hn::Add(a0i, ti);
    V b1r, b1i, b2r, b2i;
    twiddled(hn::Add(mr, nr), hn::Add(mi, ni), 1, b1r, b1i);
    twiddled(hn::Sub(mr, nr), hn::Sub(mi, ni), 2, b2r, b2i);
    if constexpr (kInterleaved) {
      hn::StoreInterleaved3(b0r, b1r, b2r, d, yr);
      hn::StoreInterleaved3(b0i, b1i, b2i, d, yi);
    } else {
      store(b0r, b0i, 0);
      store(b1r, b1i, 1);
      store(b2r, b2i, 2);
    }
  } else if constexpr (P == 4) {
    const V a0r = load(xr, 0), a0i = load(xi, 0), a1r = load(xr, 1), a1i = load(xi, 1);
    const V a2r = load(xr, 2), a2i = load(xi, 2), a3r = load(xr, 3), a3i = load(xi, 3);
    const V t0r = hn::Add(a0r, a2r), t0i = hn::Add(a0i, a2i);
    const V t1r = hn::Sub(a0r, a2r), t1i = hn::Sub(a0i, a2i);
    const V t2r = hn::Add(a1r, a3r), t2i = hn::Add(a1i, a3i);
    const V t3r = hn::Sub(a1i, a3i), t3i = hn::Sub(a3r, a1r);  // −i·(a1 − a3)
    const V b0r = hn::Add(t0r, t2r), b0i = hn::Add(t0i, t2i);
    V b1r, b1i, b2r, b2i, b3r, b3i;
    twiddled(hn::Add(t1r, t3r), hn::Add(t1i, t3i), 1, b1r, b1i);
    twiddled(hn::Sub(t0r, t2r), hn::Sub(t0i, t2i), 2, b2r, b2i);
    twiddled(hn::Sub(t1r, t3r), hn::Sub(t1i, t3i), 3, b3r, b3i);
    if constexpr (kInterleaved) {
      hn::StoreInterleaved4(b0r, b1r, b2r, b3r, d, yr);
      hn::StoreInterleaved4(b0i, b1i, b2i, b3i, d, yi);
    } else {
      store(b0r, b0i, 0);
      store(b1r, b1i, 1);
      store(b2r, b2i, 2);
      store(b3r, b3i, 3);
    }
  } else {
    static_assert(P == 5 && !kInterleaved, "radix 5 has no interleaved store");
    // ω_5 = c1 − i·s1, ω_5² = c2 − i·s2. With t1 = a1 + a4, t2 = a2 + a3,
    // t3 = a1 − a4, t4 = a2 − a3:
    //   b_{1,4} = a0 + c1·t1 + c2·t2 ∓ i·(s1·t3 + s2·t4)
    //   b_{2,3} = a0 + c2·t1 + c1·t2 ∓ i·(s2·t3 − s1·t4)
    const V c1 = hn::Set(d, static_cast<float>(std::cos(2.0 * std::numbers::pi / 5.0)));
    const V c2 = hn::Set(d, static_cast<float>(std::cos(4.0 * std::numbers::pi / 5.0)));
    const V s1 = hn::Set(d, static_cast<float>(std::sin(2.0 * std::numbers::pi / 5.0)));
    const V s2 = hn::Set(d, static_cast<float>(std::sin(4.0 * std::numbers::pi / 5.0)));
    const V a0r = load(xr, 0), a0i = load(xi, 0), a1r = load(xr, 1), a1i = load(xi, 1);
    const V a2r = load(xr, 2), a2i = load(xi, 2), a3r = load(xr, 3), a3i = load(xi, 3);
    const V a4r = load(xr, 4), a4i = load(xi, 4);
    const V t1r = hn::Add(a1r, a4r), t1i = hn::Add(a1i, a4i);
    const V t2r = hn::Add(a2r, a3r), t2i = hn::Add(a2i, a3i);
    const V t3r = hn::Sub(a1r, a4r), t3i = hn::Sub(a1i, a4i);
    const V t4r = hn::Sub(a2r, a3r), t4i = hn::Sub(a2i, a3i);
    const V m1r = hn::MulAdd(c2, t2r, hn::MulAdd(c1, t1r, a0r));
    const V m1i = hn::MulAdd(c2, t2i, hn::MulAdd(c1, t1i, a0i));
    const V m2r = hn::MulAdd(c1, t2r, hn::MulAdd(c2, t1r, a0r));
    const V m2i = hn::MulAdd(c1, t2i, hn::MulAdd(c2, t1i, a0i));
    const V u1r = hn::MulAdd(s2, t4r, hn::Mul(s1, t3r)), u1i = hn::MulAdd(s2, t4i, hn::Mul(s1, t3i));
    const V u2r = hn::NegMulAdd(s1, t4r, hn::Mul(s2, t3r)), u2i = hn::NegMulAdd(s1, t4i, hn::Mul(s2, t3i));
    // −i·u = u.i − i·u.r
    const V b0r = hn::Add(hn::Add(a0r, t1r), t2r), b0i = hn::Add(hn::Add(a0i, t1i), t2i);
    V b1r, b1i, b2r, b2i, b3r, b3i, b4r, b4i;
    twiddled(hn::Add(m1r, u1i), hn::Sub(m1i, u1r), 1, b1r, b1i);
    twiddled(hn::Add(m2r, u2i), hn::Sub(m2i, u2r), 2, b2r, b2i);
    twiddled(hn::Sub(m2r, u2i), hn::Add(m2i, u2r), 3, b3r, b3i);
    twiddled(hn::Sub(m1r, u1i), hn::Add(m1i, u1r), 4, b4r, b4i);
    store(b0r, b0i, 0);
    store(b1r, b1i, 1);
    store(b2r, b2i, 2);
    store(b3r, b3i, 3);
    store(b4r, b4i, 4);
  }
}

// One Stockham stage, x → y:
//   y[r + s·(P·q + k)] = w^{qk} · Σ_j x[r + s·(q + (len/P)·j)] · ω_P^{jk},
// w = e^{-2πi/len}, ω_P = e^{-2πi/P}, s = stride, q < len/P, r < s.
template <size_t P>
void RunStage(const Stage& st, const float* tw_re, const float* tw_im, const float* xr, const float* xi,
              float* yr, float* yi) {
  const size_t s = st.stride, lp = st.len / P, dist = s * lp;
  const float* twr = tw_re + st.twiddle_offset;
  const float* twi = tw_im + st.twiddle_offset;
  if constexpr (P != 5) {
    if (s == 1) {  // vectorise over q; the outputs of one q are adjacent
      ForChunks(0, lp, [&](auto d, size_t q) HWY_ATTR {
        Butterfly<P, true>(d, xr + q, xi + q, dist, twr + q, twi + q, lp, yr + P * q, yi + P * q, 0);
      });
      return;
    }
  }
  for (size_t q = 0; q < lp; ++q) {
    ForChunks(0, s, [&](auto d, size_t r) HWY_ATTR {
      Butterfly<P, false>(d, xr + s * q + r, xi + s * q + r, dist, twr + q, twi + q, lp, yr + s * P * q + r,
                          yi + s * P * q + r, s);
    });
  }
}

// Forward complex FFT of plan.m points from buf[0, 2m) (re, im); returns
// the half of buf that holds the result, as (re, im).
std::pair<float*, float*> ComplexForward(Plan& plan) {
  const size_t m = plan.m;
  float* xr = plan.buf.data();
  float* xi = xr + m;
  float* yr = xr + 2 * m;
  float* yi = xr + 3 * m;
  for (const Stage& st : plan.stages) {
    const float* twr = plan.tw_re.data();
    const float* twi = plan.tw_im.data();
    switch (st.radix) {
      case 2:
        RunStage<2>(st, twr, twi, xr, xi, yr, yi);
        break;
      case 3:
        RunStage<3>(st, twr, twi, xr, xi, yr, yi);
        break;
      case 4:
        RunStage<4>(st, twr, twi, xr, xi, yr, yi);
        break;
      default:
        RunStage<5>(st, twr, twi, xr, xi, yr, yi);
        break;
    }
    std::swap(xr, yr);
    std::swap(xi, yi);
  }
  return {xr, xi};
}

// Loads v[m − k − lanes + 1 … m − k] reversed, i.e. lane l holds v[m − k − l].
template <class D>
HWY_INLINE hn::Vec<D> LoadMirrored(D d, const float* v, size_t m, size_t k) {
  return hn::Reverse(d, hn::LoadU(d, v + m - k - hn::Lanes(d) + 1));
}

void ForwardImpl(Plan& plan, const float* HWY_RESTRICT in, float* HWY_RESTRICT re, float* HWY_RESTRICT im) {
  const size_t m = plan.m;
  float* xr = plan.buf.data();  // [m]: x[2j]
  float* xi = xr + m;           // [m]: x[2j+1]
  ForChunks(0, m, [&](auto d, size_t j) HWY_ATTR {
    hn::Vec<decltype(d)> even, odd;
    hn::LoadInterleaved2(d, in + 2 * j, even, odd);
    hn::StoreU(even, d, xr + j);
    hn::StoreU(odd, d, xi + j);
  });
  // Named pointers, not a structured binding: clang 14 cannot capture those in lambdas.
  const auto z = ComplexForward(plan);
  float* const zr = z.first;
  float* const zi = z.second;
  // Z = FFT_m(z) mixes the spectra of the even (E) and odd (O) samples:
  //   E[k] = (Z[k] + conj Z[m−k]) / 2,  O[k] = (Z[k] − conj Z[m−k]) / 2i,
  //   X[k] = E[k] + e^{-2πi·k/n}·O[k].
  re[0] = zr[0] + zi[0];
  im[0] = 0.0f;
  re[m] = zr[0] - zi[0];
  im[m] = 0.0f;
  ForChunks(1, m, [&](auto d, size_t k) HWY_ATTR {
    using V = hn::Vec<decltype(d)>;
    const V half = hn::Set(d, 0.5f);
    const V ar = hn::LoadU(d, zr + k), ai = hn::LoadU(d, zi + k);
    const V br = LoadMirrored(d, zr, m, k), bi = LoadMirrored(d, zi, m, k);
    const V er = hn::Mul(half, hn::Add(ar, br)), ei = hn::Mul(half, hn::Sub(ai, bi));
    const V orr = hn::Mul(half, hn::Add(ai, bi)), oi = hn::Mul(half, hn::Sub(br, ar));
    V wr, wi;
    CMul(orr, oi, hn::LoadU(d, plan.split_re.data() + k), hn::LoadU(d, plan.split_im.data() + k), wr, wi);
    hn::StoreU(hn::Add(er, wr), d, re + k);
    hn::StoreU(hn::Add(ei, wi), d, im + k);
  });
}

void InverseImpl(Plan& plan, const float* HWY_RESTRICT re, const float* HWY_RESTRICT im,
                 float* HWY_RESTRICT out) {
  const size_t m = plan.m;
  const float scale = 1.0f / static_cast<float>(plan.n);
  // The inverse complex FFT runs as the forward one on swapped parts:
  // swap(FFT(swap(Z))) = IFFT(Z), where swap(a + ib) = b + ia. So Re Z goes
  // to the imaginary input buffer and Im Z to the real one.
  float* zi = plan.buf.data();  // [m]: Im Z
  float* zr = zi + m;           // [m]: Re Z
  // Undo the split: with Xc = conj X[m−k],
  //   2E = X[k] + Xc,  2O = (X[k] − Xc)·e^{+2πi·k/n},  Z[k] = E[k] + i·O[k];
  // the factor 1/2 and the inverse FFT's 1/m make the 1/n applied here.
  zr[0] = scale * (re[0] + re[m]);
  zi[0] = scale * (re[0] - re[m]);
  ForChunks(1, m, [&](auto d, size_t k) HWY_ATTR {
    using V = hn::Vec<decltype(d)>;
    const V vscale = hn::Set(d, scale);
    const V ar = hn::LoadU(d, re + k), ai = hn::LoadU(d, im + k);
    const V br = LoadMirrored(d, re, m, k), bi = LoadMirrored(d, im, m, k);
    const V er = hn::Add(ar, br), ei = hn::Sub(ai, bi);
    const V dr = hn::Sub(ar, br), di = hn::Add(ai, bi);
    // (dr + i·di)·conj(w)
    const V wr = hn::LoadU(d, plan.split_re.data() + k), wi = hn::LoadU(d, plan.split_im.data() + k);
    const V orr = hn::MulAdd(dr, wr, hn::Mul(di, wi));
    const V oi = hn::MulSub(di, wr, hn::Mul(dr, wi));
    hn::StoreU(hn::Mul(vscale, hn::Sub(er, oi)), d, zr + k);
    hn::StoreU(hn::Mul(vscale, hn::Add(ei, orr)), d, zi + k);
  });
  const auto res = ComplexForward(plan);
  float* const res_re = res.first;
  float* const res_im = res.second;
  // Swapped back: z = res_im + i·res_re = x[2j] + i·x[2j+1].
  ForChunks(0, m, [&](auto d, size_t j) HWY_ATTR {
    hn::StoreInterleaved2(hn::LoadU(d, res_im + j), hn::LoadU(d, res_re + j), d, out + 2 * j);
  });
}

}  // namespace lfmvox::dsp::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lfmvox::dsp {
namespace {

// e^{-2πi·num/den}, evaluated in double with the argument reduced exactly.
void Twiddle(size_t num, size_t den, float& re, float& im) {
  const double angle = -2.0 * std::numbers::pi * static_cast<double>(num % den) / static_cast<double>(den);
  re = static_cast<float>(std::cos(angle));
  im = static_cast<float>(std::sin(angle));
}

}  // namespace

HWY_EXPORT(ForwardImpl);
HWY_EXPORT(InverseImpl);

Result<RealFft> RealFft::Create(size_t n) {
  if (n < 2 || n % 2 != 0) {
    return InvalidArgument(StrFormat("RealFft: n = %zu must be even and at least 2", n));
  }
  // Radices in execution order. The first stage (stride 1) is vectorised over
  // q with interleaved stores, which radix 5 lacks, so 4s and 2s go first.
  std::vector<size_t> radices;
  size_t rest = n / 2;
  for (size_t radix : {4, 2, 3, 5}) {  // after the 4s, at most one 2 is left
    while (rest % radix == 0) {
      radices.push_back(radix);
      rest /= radix;
    }
  }
  if (rest != 1) {
    return InvalidArgument(
        StrFormat("RealFft: n = %zu is not supported: n/2 may only have the prime factors 2, 3 and 5", n));
  }

  RealFft fft;
  fft_internal::Plan& p = fft.plan_;
  p.n = n;
  p.m = n / 2;
  size_t twiddles = 0;
  size_t len = p.m, stride = 1;
  for (size_t radix : radices) {
    p.stages.push_back({radix, len, stride, twiddles});
    twiddles += (len / radix) * (radix - 1);
    len /= radix;
    stride *= radix;
  }
  p.tw_re.Reset(twiddles);
  p.tw_im.Reset(twiddles);
  for (const fft_internal::Stage& st : p.stages) {
    const size_t lp = st.len / st.radix;
    for (size_t k = 1; k < st.radix; ++k) {
      for (size_t q = 0; q < lp; ++q) {
        const size_t i = st.twiddle_offset + (k - 1) * lp + q;
        Twiddle(q * k, st.len, p.tw_re[i], p.tw_im[i]);
      }
    }
  }
  p.split_re.Reset(p.m);
  p.split_im.Reset(p.m);
  for (size_t k = 0; k < p.m; ++k) Twiddle(k, n, p.split_re[k], p.split_im[k]);
  p.buf.Reset(4 * p.m);
  return fft;
}

void RealFft::Forward(const float* in, float* re, float* im) {
  HWY_DYNAMIC_DISPATCH(ForwardImpl)(plan_, in, re, im);
}

void RealFft::Inverse(const float* re, const float* im, float* out) {
  HWY_DYNAMIC_DISPATCH(InverseImpl)(plan_, re, im, out);
}

}  // namespace lfmvox::dsp
#endif  // HWY_ONCE
