// Highway dynamic dispatch: this file is compiled once per SIMD target
// through foreach_target.h, and PolarToRect picks the best one at run time.
#include "dsp/polar.h"

#include <cmath>
#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "dsp/polar.cc"
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace lfmvox::dsp::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Valid input ranges of hwy's Sin/Cos (documented) and of Exp without
// overflow (exp(88.72) is FLT_MAX).
constexpr float kMaxAbsPhase = 39000.0f;
constexpr float kMaxLogMag = 88.0f;

// Returns false, having written garbage, if any input is outside the valid
// ranges above or NaN; the caller then recomputes with the scalar reference.
bool PolarToRectSimd(const float* HWY_RESTRICT log_mag, const float* HWY_RESTRICT phase, size_t n,
                     float* HWY_RESTRICT re, float* HWY_RESTRICT im) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto max_abs_phase = hn::Set(d, kMaxAbsPhase);
  const auto max_log_mag = hn::Set(d, kMaxLogMag);
  // Lanes stay true while every input seen was in range; NaN compares false.
  auto in_range = hn::Eq(hn::Zero(d), hn::Zero(d));
  auto convert = [&](const float* lm, const float* ph, float* r, float* i) HWY_ATTR {
    const auto l = hn::LoadU(d, lm);
    const auto p = hn::LoadU(d, ph);
    in_range = hn::And(in_range, hn::And(hn::Le(hn::Abs(p), max_abs_phase), hn::Le(l, max_log_mag)));
    const auto mag = hn::Exp(d, l);
    hn::StoreU(hn::Mul(mag, hn::Cos(d, p)), d, r);
    hn::StoreU(hn::Mul(mag, hn::Sin(d, p)), d, i);
  };
  size_t k = 0;
  for (; k + lanes <= n; k += lanes) convert(log_mag + k, phase + k, re + k, im + k);
  if (k < n) {
    // The last partial vector goes through zero-padded copies, so the tail
    // uses the same arithmetic as the rest (no per-element libm calls).
    constexpr size_t kMax = hn::MaxLanes(d);
    HWY_ALIGN float lm[kMax] = {}, ph[kMax] = {}, r[kMax], i[kMax];
    const size_t rest = n - k;
    std::memcpy(lm, log_mag + k, rest * sizeof(float));
    std::memcpy(ph, phase + k, rest * sizeof(float));
    convert(lm, ph, r, i);
    std::memcpy(re + k, r, rest * sizeof(float));
    std::memcpy(im + k, i, rest * sizeof(float));
  }
  return hn::AllTrue(d, in_range);
}

}  // namespace lfmvox::dsp::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lfmvox::dsp {

HWY_EXPORT(PolarToRectSimd);

void PolarToRect(const float* log_mag, const float* phase, size_t n, float* re, float* im) {
  if (!HWY_DYNAMIC_DISPATCH(PolarToRectSimd)(log_mag, phase, n, re, im)) {
    PolarToRectRef(log_mag, phase, n, re, im);
  }
}

void PolarToRectRef(const float* log_mag, const float* phase, size_t n, float* re, float* im) {
  for (size_t k = 0; k < n; ++k) {
    const float mag = std::exp(log_mag[k]);
    re[k] = mag * std::cos(phase[k]);
    im[k] = mag * std::sin(phase[k]);
  }
}

}  // namespace lfmvox::dsp
#endif  // HWY_ONCE
