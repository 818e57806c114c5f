// Polar to rectangular conversion of a spectrum given as log-magnitude and
// phase: S = exp(log_mag)·(cos φ + i·sin φ), torch.polar(exp(logA), φ).
#pragma once

#include <cstddef>

namespace lfmvox::dsp {

// re[k], im[k] for k < n. SIMD (Highway's Exp, Sin and Cos, dispatched at
// run time for the CPU). Those are accurate to 1 ULP (Exp) and 3 ULP (Sin,
// Cos) for |φ| ≤ 39000 and log_mag ≤ 88, so S is within about 5 float
// roundings of the exact value, relative to |S|. A call with any input
// outside those ranges is computed by PolarToRectRef instead, which
// overflows to inf exactly as torch does for log_mag > 88.72. NaN in gives
// NaN out. Outputs must not alias inputs.
void PolarToRect(const float* log_mag, const float* phase, size_t n, float* re, float* im);

// Plain scalar version with the float libm functions: the reference for the
// SIMD tests and the fallback for out-of-range inputs.
void PolarToRectRef(const float* log_mag, const float* phase, size_t n, float* re, float* im);

}  // namespace lfmvox::dsp
