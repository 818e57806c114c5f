// Plain scalar reference kernels: the executable definition of every contract
// in ops.h. They favour obviousness over speed; sums are kept in double so that
// they sit closer to the exact result than any f32 SIMD version can, which
// makes them a fair yardstick for the error bounds in ops_test.cc.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "tensor/quant.h"

namespace lfmvox::ops::ref {

namespace {

// W row `row` widened to f32: tensor/quant.h's scalar decoding, written
// independently of the SIMD decoders (and exact: for a block format, its
// dequantized values).
std::vector<float> WeightRow(const Weight& w, size_t row) {
  std::vector<float> out(w.cols);
  std::vector<uint8_t> buf(FormatRowBytes(w.format, w.cols));
  DequantizeRow(w.format, RowAsBlocks(w, row, buf.data()), w.cols, out.data());
  return out;
}

}  // namespace

void MatMul(const float* x, size_t m, size_t ldx, const Weight& w, const float* bias, float* y, size_t ldy) {
  for (size_t j = 0; j < w.rows; ++j) {
    const std::vector<float> wr = WeightRow(w, j);
    for (size_t i = 0; i < m; ++i) {
      double s = 0.0;
      for (size_t c = 0; c < w.cols; ++c) s += double{x[i * ldx + c]} * wr[c];
      if (bias != nullptr) s += bias[j];
      y[i * ldy + j] = static_cast<float>(s);
    }
  }
}

void PackedMatMul(const float* x, size_t m, size_t ldx, const PackedWeight& w, const float* bias, float* y,
                  size_t ldy) {
  const size_t k = w.cols;
  for (size_t j = 0; j < w.rows; ++j) {
    const size_t at = j / kPackedPanel * k * kPackedPanel + j % kPackedPanel;
    for (size_t i = 0; i < m; ++i) {
      float s = bias != nullptr ? bias[j] : 0.0f;
      for (size_t q = 0; q < k; ++q) {
        const size_t e = at + q * kPackedPanel;
        const float wq = w.format == WeightFormat::kBF16
                             ? Bf16ToF32(reinterpret_cast<const uint16_t*>(w.data.data())[e])
                             : reinterpret_cast<const float*>(w.data.data())[e];
        s = std::fma(x[i * ldx + q], wq, s);
      }
      y[i * ldy + j] = s;
    }
  }
}

void QuantizeActivations(const float* x, size_t k, int8_t* q, float* d) {
  for (size_t b = 0; b < k / 32; ++b) {
    float amax = 0.0f;
    bool finite = true;
    for (size_t j = 0; j < 32; ++j) {
      amax = std::max(amax, std::fabs(x[32 * b + j]));
      finite = finite && std::isfinite(x[32 * b + j]);
    }
    if (!finite) {  // NaN scale: the group's products are NaN, as in f32 arithmetic
      d[b] = std::numeric_limits<float>::quiet_NaN();
      std::fill(q + 32 * b, q + 32 * b + 32, int8_t{0});
      continue;
    }
    d[b] = amax / 127.0f;
    const float id = d[b] != 0.0f ? 1.0f / d[b] : 0.0f;
    for (size_t j = 0; j < 32; ++j) q[32 * b + j] = static_cast<int8_t>(std::nearbyint(x[32 * b + j] * id));
  }
}

namespace {

// Group g (32 values) of W row `row` as the integers the integer path
// multiplies: Q8_0 qs, Q4_0 nibble − 8, Q6_K (code − 32)·sub-scale; the f32
// factor d_w left out (returned).
float WeightGroupInts(const Weight& w, size_t row, size_t g, int32_t* out) {
  // The group's block as the file has it (either layout).
  uint8_t block[kQ6_KBlockBytes];
  const size_t b0 = g / (FormatBlockElements(w.format) / 32);
  if (w.format == WeightFormat::kQ8_0 || w.format == WeightFormat::kQ4_0 || w.format == WeightFormat::kQ6_K)
    CopyBlocksOfRow(w, row, b0, 1, block);
  const uint8_t* b = block;
  auto half = [](const uint8_t* h) {
    uint16_t v;
    std::memcpy(&v, h, 2);
    return F16ToF32(v);
  };
  switch (w.format) {
    case WeightFormat::kQ8_0: {
      for (size_t j = 0; j < 32; ++j) out[j] = static_cast<int8_t>(b[2 + j]);
      return half(b);
    }
    case WeightFormat::kQ4_0: {
      for (size_t j = 0; j < 16; ++j) {
        out[j] = (b[2 + j] & 15) - 8;
        out[j + 16] = (b[2 + j] >> 4) - 8;
      }
      return half(b);
    }
    case WeightFormat::kQ6_K: {
      // Element e of the block, from the layout in tensor/quant.h.
      for (size_t j = 0; j < 32; ++j) {
        const size_t e = g % 8 * 32 + j, h = e / 128, t = e % 128 / 32, l = e % 32;
        const uint8_t lq = b[64 * h + 32 * (t & 1) + l];
        const int lo = t < 2 ? lq & 15 : lq >> 4;
        const int code = lo | ((b[kQ6_KQh + 32 * h + l] >> (2 * t) & 3) << 4);
        out[j] = (code - 32) * static_cast<int8_t>(b[kQ6_KScales + 8 * h + 2 * t + l / 16]);
      }
      return half(b + kQ6_KD);
    }
    default:
      return std::numeric_limits<float>::quiet_NaN();
  }
}

}  // namespace

void MatMulQuantized(const float* x, size_t m, size_t ldx, const Weight& w, const float* bias, float* y,
                     size_t ldy, double* mag) {
  const size_t k = w.cols, groups = k / 32;
  std::vector<int8_t> xq(k);
  std::vector<float> xd(groups);
  int32_t wi[32];
  for (size_t i = 0; i < m; ++i) {
    QuantizeActivations(x + i * ldx, k, xq.data(), xd.data());
    for (size_t j = 0; j < w.rows; ++j) {
      double s = 0.0, a = 0.0;
      for (size_t g = 0; g < groups; ++g) {
        const float dw = WeightGroupInts(w, j, g, wi);
        int64_t isum = 0, iabs = 0;
        for (size_t q = 0; q < 32; ++q) {
          isum += int64_t{xq[32 * g + q]} * wi[q];
          iabs += std::abs(int64_t{xq[32 * g + q]} * wi[q]);
        }
        const float scale = dw * xd[g];  // rounded to f32, as the kernel does
        s += double{scale} * static_cast<double>(isum);
        a += std::abs(double{scale}) * static_cast<double>(iabs);
      }
      if (bias != nullptr) s += bias[j];
      y[i * ldy + j] = static_cast<float>(s);
      if (mag != nullptr) mag[i * ldy + j] = a + (bias != nullptr ? std::abs(double{bias[j]}) : 0.0);
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
  const std::vector<float> wr = WeightRow(table, row);
  for (size_t c = 0; c < table.cols; ++c) acc[c] += wr[c];
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

// Widened to float and tested with std::isfinite, element by element (the
// SIMD version tests exponent bits instead).
size_t FindNonFinite(DType t, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  auto u16 = [&](size_t byte) {
    uint16_t v;
    std::memcpy(&v, p + byte, 2);
    return v;
  };
  auto blocks = [&](size_t elems, size_t bytes, size_t d_at) {
    for (size_t b = 0; b < n / elems; ++b) {
      if (!std::isfinite(F16ToF32(u16(b * bytes + d_at)))) return b * elems;
    }
    return n;
  };
  for (size_t i = 0; i < n; ++i) {
    double v = 0;
    switch (t) {
      case DType::kF32: {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        v = f;
        break;
      }
      case DType::kBF16:
        v = Bf16ToF32(u16(2 * i));
        break;
      case DType::kF16:
        v = F16ToF32(u16(2 * i));
        break;
      case DType::kF64:
        std::memcpy(&v, p + 8 * i, 8);
        break;
      case DType::kQ8_0:
        return blocks(32, kQ8_0BlockBytes, 0);
      case DType::kQ4_0:
        return blocks(32, kQ4_0BlockBytes, 0);
      case DType::kQ6_K:
        return blocks(256, kQ6_KBlockBytes, kQ6_KD);
      default:
        return n;
    }
    if (!std::isfinite(v)) return i;
  }
  return n;
}

size_t FindNanOrPosInf(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i]) || x[i] == std::numeric_limits<float>::infinity()) return i;
  }
  return n;
}

}  // namespace lfmvox::ops::ref
