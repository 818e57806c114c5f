// The block formats against values worked out by hand from the layout
// formulas (tensor/quant.h), and the quantizers' round-trip error against
// bounds derived from their rounding rules.
#include "tensor/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/dtype.h"

namespace lfmvox {
namespace {

std::vector<uint8_t> Quantize(WeightFormat f, const std::vector<float>& x) {
  std::vector<uint8_t> q(FormatRowBytes(f, x.size()));
  QuantizeRow(f, x.data(), x.size(), q.data());
  return q;
}

std::vector<float> Dequantize(WeightFormat f, const std::vector<uint8_t>& q, size_t cols) {
  std::vector<float> y(cols);
  DequantizeRow(f, q.data(), cols, y.data());
  return y;
}

float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

TEST(Quant, RowBytesAndDTypes) {
  EXPECT_EQ(FormatRowBytes(WeightFormat::kQ8_0, 64), 68u);
  EXPECT_EQ(FormatRowBytes(WeightFormat::kQ4_0, 64), 36u);
  EXPECT_EQ(FormatRowBytes(WeightFormat::kQ6_K, 512), 420u);
  EXPECT_EQ(FormatRowBytes(WeightFormat::kQ8_0, 48), 0u);
  EXPECT_EQ(FormatRowBytes(WeightFormat::kQ6_K, 32), 0u);
  EXPECT_EQ(DTypeRowBytes(DType::kQ4_0, 2048), 2048u / 32 * 18);
  EXPECT_EQ(DTypeRowBytes(DType::kQ6_K, 100), 0u);
  EXPECT_EQ(DTypeRowBytes(DType::kBF16, 3), 6u);
  EXPECT_EQ(DTypeSize(DType::kQ8_0), 0u);
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ6_K}) {
    DType parsed;
    EXPECT_FALSE(ParseDType(DTypeName(t), &parsed)) << DTypeName(t);  // never a safetensors dtype
    WeightFormat f;
    ASSERT_TRUE(WeightFormatForDType(t, &f));
    EXPECT_STREQ(WeightFormatName(f), DTypeName(t));
  }
}

TEST(Quant, Q8_0HandBlock) {
  // d = 0.5 (f16 0x3800), qs[j] = 4j − 64: w[j] = (4j − 64)·0.5.
  uint8_t b[34];
  const uint16_t d = 0x3800;
  std::memcpy(b, &d, 2);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(4 * j - 64));
  float y[32];
  DequantizeRow(WeightFormat::kQ8_0, b, 32, y);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (4 * j - 64) * 0.5f) << j;
  // Quantizing x = j − 16: amax 16, d = 16/127, x·(127/16) rounded (ties away).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  const auto q = Quantize(WeightFormat::kQ8_0, x);
  EXPECT_EQ(HalfAt(q.data()), F16ToF32(F32ToF16(16.0f / 127.0f)));
  EXPECT_EQ(static_cast<int8_t>(q[2 + 0]), -127);  // −16
  EXPECT_EQ(static_cast<int8_t>(q[2 + 17]), 8);    // 1 · 7.9375
  EXPECT_EQ(static_cast<int8_t>(q[2 + 18]), 16);   // 15.875
  EXPECT_EQ(static_cast<int8_t>(q[2 + 31]), 119);  // 119.0625
  EXPECT_EQ(static_cast<int8_t>(q[2 + 16]), 0);
}

TEST(Quant, Q4_0HandBlock) {
  // d = 0.25 (0x3400), qs[j] = j | (15 − j) << 4: w[j] = (j − 8)/4, w[j+16] = (7 − j)/4.
  uint8_t b[18];
  const uint16_t d = 0x3400;
  std::memcpy(b, &d, 2);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  DequantizeRow(WeightFormat::kQ4_0, b, 32, y);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.25f) << j;
    EXPECT_EQ(y[j + 16], (7 - j) * 0.25f) << j;
  }
  // x = j − 16: the largest |x| is −16 (negative max), d = −16/−8 = 2, codes
  // trunc(x/2 + 8.5), 16 clamped to 15.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  auto q = Quantize(WeightFormat::kQ4_0, x);
  EXPECT_EQ(HalfAt(q.data()), 2.0f);
  EXPECT_EQ(q[2 + 0], 0x80);      // x = −16 → 0, x = 0 → 8
  EXPECT_EQ(q[2 + 1], 0x91);      // x = −15: −7.5 + 8.5 = 1; x = 1: 0.5 + 8.5 = 9
  EXPECT_EQ(q[2 + 15] >> 4, 15);  // x = 15: 7.5 + 8.5 = 16 → clamped to 15
  EXPECT_EQ(q[2 + 15] & 15, 8);   // x = −1: −0.5 + 8.5 = 8
  // Positive max: x = 16 − j, d = −2; the max itself maps to code 0 → (0 − 8)·(−2) = 16.
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(16 - j);
  q = Quantize(WeightFormat::kQ4_0, x);
  EXPECT_EQ(HalfAt(q.data()), -2.0f);
  EXPECT_EQ(Dequantize(WeightFormat::kQ4_0, q, 32)[0], 16.0f);
}

// Element e of a Q6_K block, straight from the layout: half h, group g of 32
// in the half, lane l in the group; its low 4 bits in ql byte 64h + 32(g & 1) + l
// (low nibble for g < 2), its high 2 bits at qh[32h + l] >> 2g, its sub-scale
// scales[8h + 2g + l/16].
struct Q6Pos {
  explicit Q6Pos(int e) : h(e / 128), g(e % 128 / 32), l(e % 32) {}
  int h, g, l;
  int ql() const { return 64 * h + 32 * (g & 1) + l; }
  int qh() const { return 128 + 32 * h + l; }
  int sc() const { return 192 + 8 * h + 2 * g + l / 16; }
};

TEST(Quant, Q6_KHandBlock) {
  // Codes q[e] = (7e + 3) mod 64, scales[s] = 9s − 70, d = 2^-6: w = d·sc·(q − 32).
  uint8_t b[210] = {};
  const uint16_t d = 0x2400;  // 2^-6
  std::memcpy(b + 208, &d, 2);
  for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(9 * s - 70));
  for (int e = 0; e < 256; ++e) {
    const Q6Pos p(e);
    const int q = (7 * e + 3) % 64;
    b[p.ql()] |= static_cast<uint8_t>((q & 15) << (p.g < 2 ? 0 : 4));
    b[p.qh()] |= static_cast<uint8_t>((q >> 4) << (2 * p.g));
  }
  float y[256];
  DequantizeRow(WeightFormat::kQ6_K, b, 256, y);
  for (int e = 0; e < 256; ++e) {
    const Q6Pos p(e);
    const int sc = static_cast<int8_t>(b[p.sc()]);
    EXPECT_EQ(y[e], 0.015625f * static_cast<float>(sc) * static_cast<float>((7 * e + 3) % 64 - 32)) << e;
  }
  // A constant block x = 1: each sub-block's fit is scale −1/32 (code 0 ↔ −32),
  // so d = (−1/32)/−128 = 2^-12, every sub-scale −128, every code 0.
  const auto q = Quantize(WeightFormat::kQ6_K, std::vector<float>(256, 1.0f));
  for (int i = 0; i < 192; ++i) ASSERT_EQ(q[i], 0) << i;
  for (int s = 0; s < 16; ++s) EXPECT_EQ(static_cast<int8_t>(q[192 + s]), -128);
  EXPECT_EQ(HalfAt(q.data() + 208), 0x1p-12f);
  for (float v : Dequantize(WeightFormat::kQ6_K, q, 256)) EXPECT_EQ(v, 1.0f);
}

TEST(Quant, AllZeroBlocksAreZeroBytes) {
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ6_K}) {
    const auto q = Quantize(f, std::vector<float>(256, 0.0f));
    for (uint8_t v : q) EXPECT_EQ(v, 0) << WeightFormatName(f);
    for (float v : Dequantize(f, q, 256)) EXPECT_EQ(v, 0.0f);
  }
  // Q4_0: d = 0, every code trunc(0 + 8.5) = 8.
  const auto q = Quantize(WeightFormat::kQ4_0, std::vector<float>(32, 0.0f));
  EXPECT_EQ(HalfAt(q.data()), 0.0f);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[2 + j], 0x88);
}

// Round trip on random rows (some blocks with one huge value). Derivations,
// per block, with d32 the f32 scale the quantizer divides by and d16 its
// stored half (|d32 − d16| ≤ max(2^-11·|d32|, 2^-25): round to nearest, and
// half an ulp of a subnormal half is 2^-25):
//  Q8_0: q = round(x/d32) so |x − q·d32| ≤ d32/2 (+ the f32 rounding of x·id,
//        ≤ 2^-23·127·d32); x̂ = q·d16 adds |q|·|d32 − d16| ≤ 127·2^-11·d32.
//  Q4_0: q − 8 = trunc(x/d32 + 8.5) − 8 rounds half up, so the same d32/2,
//        except the clamp 16 → 15 when x/d32 ≥ 7.5 (x of the opposite sign
//        to the max, near its size): then up to d32; plus 8·|d32 − d16|.
//  Q6_K: l = round(x/D), D = d16·sc the stored sub-block step, so
//        |x − l·D| ≤ |D|/2 for every x whose x/D lies in [−32.5, 31.5];
//        outside it the clamp picks the end level (−32 or 31), the nearest
//        one, and the error is the distance to it. Sub-blocks with D = 0
//        dequantize to 0.
TEST(Quant, RoundTripWithinDerivedBounds) {
  std::mt19937 g(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t cols = 1024;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<float> x(cols);
    for (float& v : x) v = nd(g) * (trial % 3 == 0 ? 1e-3f : 1.0f);
    if (trial % 4 == 1) x[trial * 7 % cols] = 1e4f;     // one huge value in a block
    if (trial % 4 == 2) x[trial * 11 % cols] = -300.f;  // a huge negative one
    for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ6_K}) {
      SCOPED_TRACE(WeightFormatName(f));
      const auto q = Quantize(f, x);
      const auto y = Dequantize(f, q, cols);
      if (f == WeightFormat::kQ6_K) {
        for (size_t e = 0; e < cols; ++e) {
          const uint8_t* blk = q.data() + e / 256 * kQ6_KBlockBytes;
          const Q6Pos p(static_cast<int>(e % 256));
          const double D = double{HalfAt(blk + 208)} * static_cast<int8_t>(blk[p.sc()]);
          const double err = std::abs(double{x[e]} - y[e]);
          if (D == 0.0) {
            ASSERT_EQ(y[e], 0.0f) << e;
            continue;
          }
          const double t = x[e] / D;
          if (t >= -32.5 && t <= 31.5) {
            ASSERT_LE(err, std::abs(D) * (0.5 + 1e-5)) << e << " x=" << x[e];
          } else {
            const double end = t < 0 ? -32.0 : 31.0;
            ASSERT_LE(err, std::abs(x[e] - end * D) * (1 + 1e-5) + 1e-30) << e;
          }
        }
        continue;
      }
      for (size_t b = 0; b < cols / 32; ++b) {
        float amax = 0.0f, max = 0.0f;
        for (size_t j = 0; j < 32; ++j) {
          if (amax < std::abs(x[32 * b + j])) {
            amax = std::abs(x[32 * b + j]);
            max = x[32 * b + j];
          }
        }
        const double d32 = f == WeightFormat::kQ8_0 ? amax / 127.0 : std::abs(max / -8.0);
        const double qmax = f == WeightFormat::kQ8_0 ? 127.0 : 8.0;
        for (size_t j = 0; j < 32; ++j) {
          const size_t e = 32 * b + j;
          const bool clamp_edge = f == WeightFormat::kQ4_0 && max != 0.0f && x[e] / (max / -8.0f) >= 7.5f;
          const double d_err = std::max(d32 * 0x1p-11, 0x1p-25);  // half an ulp of d16, subnormal or not
          const double bound = d32 * ((clamp_edge ? 1.0 : 0.5) + 127 * 0x1p-22) + qmax * d_err;
          ASSERT_LE(std::abs(double{x[e]} - y[e]), bound) << e << " x=" << x[e] << " y=" << y[e];
        }
      }
    }
  }
}

TEST(Quant, PlainFormatsAndMatrixHelpers) {
  const std::vector<float> x = {1.0f, -2.5f, 3.0e-5f, 65504.0f, 1.0f / 3.0f, 0.0f};
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16}) {
    const auto y = Dequantize(f, Quantize(f, x), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = f == WeightFormat::kF32    ? x[i]
                         : f == WeightFormat::kBF16 ? Bf16ToF32(F32ToBf16(x[i]))
                                                    : F16ToF32(F32ToF16(x[i]));
      EXPECT_EQ(y[i], want) << WeightFormatName(f) << " " << i;
    }
  }
  // QuantizeMatrix is QuantizeRow per row at the strides given; DequantizeMatrix inverts it.
  const size_t rows = 3, cols = 64, ld = 70, rb = FormatRowBytes(WeightFormat::kQ4_0, cols) + 6;
  std::vector<float> m(rows * ld);
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::sin(static_cast<float>(i));
  std::vector<uint8_t> q(rows * rb, 0xab);
  QuantizeMatrix(WeightFormat::kQ4_0, m.data(), rows, cols, ld, q.data(), rb);
  MatrixView w = MatrixView::Dense(WeightFormat::kQ4_0, q.data(), rows, cols, cols);
  w.row_bytes = rb;
  std::vector<float> back(rows * cols);
  DequantizeMatrix(w, back.data());
  for (size_t r = 0; r < rows; ++r) {
    std::vector<float> row(m.begin() + r * ld, m.begin() + r * ld + cols);
    const auto want = Dequantize(WeightFormat::kQ4_0, Quantize(WeightFormat::kQ4_0, row), cols);
    for (size_t c = 0; c < cols; ++c) ASSERT_EQ(back[r * cols + c], want[c]);
    EXPECT_EQ(q[r * rb + rb - 1], 0xab);  // padding untouched
  }
}

}  // namespace
}  // namespace lfmvox
