// Plain scalar reference kernels: the executable definition of every contract
// in ops.h. They favour obviousness over speed; sums are kept in double so that
// they sit closer to the exact result than any f32 SIMD version can, which
// makes them a fair yardstick for the error bounds in ops_test.cc.
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/ops.h"
#include "ops/ops_internal.h"

namespace lfmvox::ops::ref {

namespace {

// W[row, col] widened to f32, decoded independently of the SIMD decoders.
float WeightAt(const Weight& w, size_t row, size_t col) {
  const uint8_t* p = w.row(row);
  switch (w.format) {
    case WeightFormat::kF32: {
      float f;
      std::memcpy(&f, p + 4 * col, 4);
      return f;
    }
    case WeightFormat::kBF16:
    case WeightFormat::kF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * col, 2);
      return w.format == WeightFormat::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
    }
  }
  return std::numeric_limits<float>::quiet_NaN();  // not a WeightFormat: no view holds one
}

}  // namespace

void MatMul(const float* x, size_t m, size_t ldx, const Weight& w, const float* bias, float* y, size_t ldy) {
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < w.rows; ++j) {
      double s = 0.0;
      for (size_t c = 0; c < w.cols; ++c) s += double{x[i * ldx + c]} * WeightAt(w, j, c);
      if (bias != nullptr) s += bias[j];
      y[i * ldy + j] = static_cast<float>(s);
    }
  }
}

float Dot(const float* a, const float* b, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += double{a[i]} * b[i];
  return static_cast<float>(s);
}

void RmsNorm(const float* x, const float* w, size_t n, float eps, float* y) {
  double ss = 0.0;
  for (size_t i = 0; i < n; ++i) ss += double{x[i]} * x[i];
  const double mean = n > 0 ? ss / static_cast<double>(n) : 0.0;
  const float inv = static_cast<float>(1.0 / std::sqrt(mean + eps));
  for (size_t i = 0; i < n; ++i) y[i] = w[i] * (x[i] * inv);
}

void RopeSplitHalf(float* x, size_t d, const float* cos, const float* sin) {
  const size_t h = d / 2;
  for (size_t i = 0; i < h; ++i) {
    const float a = x[i], b = x[i + h];
    x[i] = a * cos[i] - b * sin[i];
    x[i + h] = b * cos[i] + a * sin[i];
  }
}

void RopeInterleaved(float* x, size_t d, const float* cos, const float* sin) {
  for (size_t p = 0; p < d / 2; ++p) {
    const float a = x[2 * p], b = x[2 * p + 1];
    x[2 * p] = a * cos[p] - b * sin[p];
    x[2 * p + 1] = b * cos[p] + a * sin[p];
  }
}

void Softmax(float* x, size_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    // exp(-inf) is exactly 0; an all -inf row gives -inf - -inf = NaN, as torch does.
    const double e = std::exp(double{x[i]} - mx);
    x[i] = static_cast<float>(e);
    sum += e;
  }
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] / sum);
}

void SwiGlu(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void Mul(const float* a, const float* b, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

void Add(const float* a, const float* b, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Scale(const float* a, float s, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] * s;
}

void AccumulateRow(const Weight& table, size_t row, float* acc) {
  for (size_t c = 0; c < table.cols; ++c) acc[c] += WeightAt(table, row, c);
}

void CausalDepthwiseConv(const float* x, size_t t, size_t ldx, size_t c, const float* w, size_t k,
                         float* state, float* y, size_t ldy) {
  if (k == 0) {
    for (size_t r = 0; r < t; ++r) std::memset(y + r * ldy, 0, c * sizeof(float));
    return;
  }
  const size_t hist = k - 1;  // rows of history held in state
  // u[q] for q in [-(k-1), t): state rows first, then x rows.
  auto u = [&](ptrdiff_t q, size_t ch) -> float {
    if (q < 0) return state[(static_cast<ptrdiff_t>(hist) + q) * static_cast<ptrdiff_t>(c) + ch];
    return x[static_cast<size_t>(q) * ldx + ch];
  };
  for (size_t r = 0; r < t; ++r) {
    for (size_t ch = 0; ch < c; ++ch) {
      double s = 0.0;
      for (size_t j = 0; j < k; ++j) {
        s += double{w[ch * k + j]} * u(static_cast<ptrdiff_t>(r + j) - static_cast<ptrdiff_t>(hist), ch);
      }
      y[r * ldy + ch] = static_cast<float>(s);
    }
  }
  internal::AdvanceConvState(x, t, ldx, c, hist, state);
}

void AttendOne(const float* q, const float* keys, size_t ld_k, const float* values, size_t ld_v, size_t n,
               size_t d, float scale, float* scores, float* out) {
  for (size_t j = 0; j < n; ++j) scores[j] = scale * Dot(q, keys + j * ld_k, d);
  Softmax(scores, n);
  for (size_t e = 0; e < d; ++e) {
    double s = 0.0;
    for (size_t j = 0; j < n; ++j) s += double{scores[j]} * values[j * ld_v + e];
    out[e] = static_cast<float>(s);
  }
}

size_t ArgMax(const float* x, size_t n) {
  // NaNs never win; if every entry is NaN (or n == 0) the answer is 0.
  size_t best = 0;
  bool found = false;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    if (!found || x[i] > x[best]) {
      best = i;
      found = true;
    }
  }
  return best;
}

}  // namespace lfmvox::ops::ref
