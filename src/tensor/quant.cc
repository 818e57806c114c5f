// Scalar definitions of the GGUF block formats. The quantizers follow ggml's
// reference ones (ggml-quants.c: quantize_row_q8_0_ref, _q4_0_ref, _q6_K_ref
// with make_qx_quants) operation for operation, in f32, so that a matrix
// quantized here has the bytes llama-quantize would write. This file is built
// with -ffp-contract=off: a fused multiply-add would change those bytes.
#include "tensor/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/dtype.h"

namespace lfmvox {

namespace {

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// ggml's nearest_int: round to nearest, ties to even, by adding 1.5·2^23 and
// reading the low mantissa bits (valid for |v| ≤ 2^22 − 1, as there).
int NearestInt(float v) {
  const float biased = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &biased, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// ---- Q8_0

void DequantizeQ8_0(const uint8_t* row, size_t cols, float* out) {
  for (size_t b = 0; b < cols / 32; ++b, row += kQ8_0BlockBytes, out += 32) {
    const float d = F16ToF32(LoadU16(row));
    for (size_t j = 0; j < 32; ++j) out[j] = static_cast<float>(static_cast<int8_t>(row[2 + j])) * d;
  }
}

void QuantizeQ8_0(const float* x, size_t cols, uint8_t* out) {
  for (size_t b = 0; b < cols / 32; ++b, x += 32, out += kQ8_0BlockBytes) {
    float amax = 0.0f;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreU16(out, F32ToF16(d));
    for (size_t j = 0; j < 32; ++j) {
      out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
    }
  }
}

// ---- Q4_0

void DequantizeQ4_0(const uint8_t* row, size_t cols, float* out) {
  for (size_t b = 0; b < cols / 32; ++b, row += kQ4_0BlockBytes, out += 32) {
    const float d = F16ToF32(LoadU16(row));
    for (size_t j = 0; j < 16; ++j) {
      out[j] = static_cast<float>((row[2 + j] & 0x0f) - 8) * d;
      out[j + 16] = static_cast<float>((row[2 + j] >> 4) - 8) * d;
    }
  }
}

void QuantizeQ4_0(const float* x, size_t cols, uint8_t* out) {
  for (size_t b = 0; b < cols / 32; ++b, x += 32, out += kQ4_0BlockBytes) {
    // The signed value of largest magnitude (the first one on ties) maps to −8.
    float amax = 0.0f, max = 0.0f;
    for (size_t j = 0; j < 32; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreU16(out, F32ToF16(d));
    for (size_t j = 0; j < 16; ++j) {
      // Truncation of x·id + 8.5 (≥ 0.5 here) is rounding half up; 16 clamps to 15.
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      out[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// ---- Q6_K

constexpr float kGroupMaxEps = 1e-15f;

// ggml's make_qx_quants with rmse_type 1 (weights x², no importance
// matrix): the scale of n values on levels [−nmax, nmax), codes l + nmax in
// L, chosen by a search over 19 candidate inverse scales for the best
// weighted least-squares fit.
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  auto level = [&](float iscale, int i) { return std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1); };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale, i);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale, i);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + level(iscale, i));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void DequantizeQ6_K(const uint8_t* row, size_t cols, float* out) {
  for (size_t b = 0; b < cols / 256; ++b, row += kQ6_KBlockBytes) {
    const float d = F16ToF32(LoadU16(row + kQ6_KD));
    const uint8_t* ql = row;
    const uint8_t* qh = row + kQ6_KQh;
    const auto* sc = reinterpret_cast<const int8_t*>(row + kQ6_KScales);
    for (size_t h = 0; h < 2; ++h, ql += 64, qh += 32, sc += 8, out += 128) {
      for (size_t l = 0; l < 32; ++l) {
        const size_t is = l / 16;
        const int q1 = ((ql[l] & 0xf) | ((qh[l] >> 0 & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xf) | ((qh[l] >> 2 & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
        out[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

void QuantizeQ6_K(const float* x, size_t cols, uint8_t* out) {
  for (size_t b = 0; b < cols / 256; ++b, x += 256, out += kQ6_KBlockBytes) {
    int8_t L[256];
    float scales[16];
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(out, 0, kQ6_KBlockBytes);  // d = +0 as well
      continue;
    }
    const float iscale = -128.0f / max_scale;
    const uint16_t d16 = F32ToF16(1.0f / iscale);
    StoreU16(out + kQ6_KD, d16);
    auto* sc = reinterpret_cast<int8_t*>(out + kQ6_KScales);
    for (int ib = 0; ib < 16; ++ib)
      sc[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = F16ToF32(d16) * static_cast<float>(sc[j]);
      if (d == 0.0f) continue;  // keeps make_qx_quants' codes, as ggml does
      for (int i = 0; i < 16; ++i) {
        const int l = std::clamp(NearestInt(x[16 * j + i] / d), -32, 31);
        L[16 * j + i] = static_cast<int8_t>(l + 32);
      }
    }
    uint8_t* ql = out;
    uint8_t* qh = out + kQ6_KQh;
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xf) | ((q3 & 0xf) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xf) | ((q4 & 0xf) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

}  // namespace

void DequantizeRow(WeightFormat f, const void* row, size_t cols, float* out) {
  const auto* p = static_cast<const uint8_t*>(row);
  switch (f) {
    case WeightFormat::kF32:
      if (cols != 0) std::memcpy(out, p, cols * 4);  // an empty row may have no storage at all
      return;
    case WeightFormat::kBF16:
      for (size_t c = 0; c < cols; ++c) out[c] = Bf16ToF32(LoadU16(p + 2 * c));
      return;
    case WeightFormat::kF16:
      for (size_t c = 0; c < cols; ++c) out[c] = F16ToF32(LoadU16(p + 2 * c));
      return;
    case WeightFormat::kQ8_0:
      return DequantizeQ8_0(p, cols, out);
    case WeightFormat::kQ4_0:
      return DequantizeQ4_0(p, cols, out);
    case WeightFormat::kQ6_K:
      return DequantizeQ6_K(p, cols, out);
  }
}

void QuantizeRow(WeightFormat f, const float* in, size_t cols, void* out) {
  auto* p = static_cast<uint8_t*>(out);
  switch (f) {
    case WeightFormat::kF32:
      if (cols != 0) std::memcpy(p, in, cols * 4);
      return;
    case WeightFormat::kBF16:
      for (size_t c = 0; c < cols; ++c) StoreU16(p + 2 * c, F32ToBf16(in[c]));
      return;
    case WeightFormat::kF16:
      for (size_t c = 0; c < cols; ++c) StoreU16(p + 2 * c, F32ToF16(in[c]));
      return;
    case WeightFormat::kQ8_0:
      return QuantizeQ8_0(in, cols, p);
    case WeightFormat::kQ4_0:
      return QuantizeQ4_0(in, cols, p);
    case WeightFormat::kQ6_K:
      return QuantizeQ6_K(in, cols, p);
  }
}

void QuantizeMatrix(WeightFormat f, const float* in, size_t rows, size_t cols, size_t ld_in, void* out,
                    size_t out_row_bytes) {
  auto* p = static_cast<uint8_t*>(out);
  for (size_t r = 0; r < rows; ++r) QuantizeRow(f, in + r * ld_in, cols, p + r * out_row_bytes);
}

void DequantizeMatrix(const MatrixView& w, float* out) {
  std::vector<uint8_t> buf(w.layout == WeightLayout::kBlocks ? 0 : FormatRowBytes(w.format, w.cols));
  for (size_t r = 0; r < w.rows; ++r)
    DequantizeRow(w.format, RowAsBlocks(w, r, buf.data()), w.cols, out + r * w.cols);
}

namespace {

// Code bytes of one block of a kSteps16 format.
size_t Steps16Codes(WeightFormat f) { return f == WeightFormat::kQ8_0 ? 32 : 16; }

// Where block b's d and code bytes [4j, 4j + 4) are in a kSteps16 row of nb blocks (tensor/matrix.h).
struct Steps16Place {
  size_t d, codes;  // codes: of j = 0; j's at codes + 64·j in a step, + 4·t·j in the tail
  size_t stride;    // between the code groups j: 64 in a step, 4·t in the tail
};
Steps16Place Steps16Locate(size_t q, size_t nb, size_t b) {
  const size_t s = nb / 16, C = 16 * q, p = b / 16, l = b % 16;
  if (p < s) return {Steps16ScalesAt(p, s, C) + 2 * l, Steps16CodesAt(p, s, C) + 4 * l, 64};
  const size_t t = nb % 16;
  return {Steps16TailScalesAt(s, C, t, q) + 2 * l, s * (C + 32) + 4 * l, 4 * t};
}

// Q6_K element e's code in a block: its low 4 bits at byte `lo`, shifted by lo_shift, its high 2 bits at
// byte `hi`, shifted by hi_shift; in the file's order (GGUF) or in kSteps16's (tensor/matrix.h).
struct Q6Place {
  size_t lo, lo_shift, hi, hi_shift;
};
Q6Place Q6FilePlace(size_t e) {
  const size_t h = e / 128, t = e % 128 / 32, l = e % 32;
  return {64 * h + 32 * (t & 1) + l, t < 2 ? size_t{0} : size_t{4}, kQ6_KQh + 32 * h + l, 2 * t};
}
Q6Place Q6StepsPlace(size_t e) {
  const size_t g = e / 32, j = e % 32 / 4, k = 4 * g + e % 4;
  return {32 * (j % 4) + k, 4 * (j / 4), kQ6_KQh + 32 * (j / 4) + k, 2 * (j % 4)};
}
// One Q6_K block from the file's order to kSteps16's (kRepack) or back; in and out do not overlap.
void Q6PermuteBlock(bool repack, const uint8_t* in, uint8_t* out) {
  std::memset(out, 0, kQ6_KScales);
  std::memcpy(out + kQ6_KScales, in + kQ6_KScales, kQ6_KBlockBytes - kQ6_KScales);
  for (size_t e = 0; e < 256; ++e) {
    const Q6Place from = repack ? Q6FilePlace(e) : Q6StepsPlace(e),
                  to = repack ? Q6StepsPlace(e) : Q6FilePlace(e);
    const unsigned lo = in[from.lo] >> from.lo_shift & 15u, hi = in[from.hi] >> from.hi_shift & 3u;
    out[to.lo] = static_cast<uint8_t>(out[to.lo] | lo << to.lo_shift);
    out[to.hi] = static_cast<uint8_t>(out[to.hi] | hi << to.hi_shift);
  }
}
void Q6PermuteRow(bool repack, const uint8_t* in, size_t cols, uint8_t* out) {
  for (size_t b = 0; b < cols / 256; ++b)
    Q6PermuteBlock(repack, in + b * kQ6_KBlockBytes, out + b * kQ6_KBlockBytes);
}

// One row between kBlocks (`blocks`) and kSteps16 (`steps`), either way:
// kRepack reads blocks and writes steps, else the reverse.
template <bool kRepack, class In, class Out>
void Steps16Row(WeightFormat f, In* blocks, Out* steps, size_t cols) {
  const size_t bb = FormatRowBytes(f, 32), q = Steps16Codes(f), nb = cols / 32;
  auto copy = [](auto* to, auto* from, size_t n) {
    if constexpr (kRepack) {
      std::memcpy(to, from, n);
    } else {
      std::memcpy(from, to, n);
    }
  };
  for (size_t b = 0; b < nb; ++b) {
    auto* block = blocks + b * bb;
    const Steps16Place at = Steps16Locate(q, nb, b);
    copy(steps + at.d, block, 2);  // d
    for (size_t j = 0; j < q / 4; ++j) copy(steps + at.codes + at.stride * j, block + 2 + 4 * j, 4);
  }
}

}  // namespace

void RepackRowSteps16(WeightFormat f, const uint8_t* src, size_t cols, uint8_t* dst) {
  if (f == WeightFormat::kQ6_K) return Q6PermuteRow(true, src, cols, dst);
  Steps16Row<true>(f, src, dst, cols);
}
void UnpackRowSteps16(WeightFormat f, const uint8_t* src, size_t cols, uint8_t* dst) {
  if (f == WeightFormat::kQ6_K) return Q6PermuteRow(false, src, cols, dst);
  Steps16Row<false>(f, dst, src, cols);
}

void CopyBlocksOfRow(const MatrixView& w, size_t r, size_t b0, size_t n, uint8_t* out) {
  const size_t bb = FormatRowBytes(w.format, FormatBlockElements(w.format));
  const uint8_t* row = w.row(r);
  if (w.layout == WeightLayout::kBlocks) {
    std::memcpy(out, row + b0 * bb, n * bb);
    return;
  }
  if (w.format == WeightFormat::kQ6_K) {
    for (size_t b = b0; b < b0 + n; ++b, out += bb) Q6PermuteBlock(false, row + b * bb, out);
    return;
  }
  const size_t q = Steps16Codes(w.format), nb = w.cols / 32;
  for (size_t b = b0; b < b0 + n; ++b, out += bb) {
    const Steps16Place at = Steps16Locate(q, nb, b);
    std::memcpy(out, row + at.d, 2);
    for (size_t j = 0; j < q / 4; ++j) std::memcpy(out + 2 + 4 * j, row + at.codes + at.stride * j, 4);
  }
}

namespace {

constexpr size_t kTileRows = kTilesTileRows, kTileCols = kTilesTileCols, kGroupTiles = kTilesGroupTiles;
constexpr size_t kTileElems = kTileRows * kTileCols;

// Where W[r, c] is in a kTiles matrix of `rows` rows and kc column chunks, in bf16 elements.
size_t TileElement(size_t rows, size_t kc, size_t r, size_t c) {
  const size_t g = r / (kGroupTiles * kTileRows), t = r / kTileRows % kGroupTiles;
  const size_t tiles = (rows + kTileRows - 1) / kTileRows;
  const size_t tg = std::min(kGroupTiles, tiles - kGroupTiles * g);
  const size_t tile = kGroupTiles * kc * g + tg * (c / kTileCols) + t;
  return tile * kTileElems + (c % kTileCols) / 2 * 2 * kTileRows + r % kTileRows * 2 + c % 2;
}

}  // namespace

const uint8_t* RowAsBlocks(const MatrixView& w, size_t r, uint8_t* buf) {
  if (w.layout == WeightLayout::kBlocks) return w.row(r);
  if (w.layout == WeightLayout::kTiles) {
    const auto* t = static_cast<const uint16_t*>(w.data);
    const size_t kc = (w.cols + kTileCols - 1) / kTileCols;
    for (size_t c = 0; c < w.cols; ++c) std::memcpy(buf + 2 * c, t + TileElement(w.rows, kc, r, c), 2);
    return buf;
  }
  UnpackRowSteps16(w.format, w.row(r), w.cols, buf);
  return buf;
}

size_t TilesLayoutBytes(size_t rows, size_t cols) {
  const size_t tiles = (rows + kTileRows - 1) / kTileRows, kc = (cols + kTileCols - 1) / kTileCols;
  return tiles * kc * kTileElems * sizeof(uint16_t);
}

MatrixView RepackTiles(const MatrixView& w, uint8_t* dst) {
  std::memset(dst, 0, TilesLayoutBytes(w.rows, w.cols));
  auto* t = reinterpret_cast<uint16_t*>(dst);
  const size_t kc = (w.cols + kTileCols - 1) / kTileCols;
  for (size_t r = 0; r < w.rows; ++r) {
    const uint8_t* row = w.row(r);
    for (size_t q = 0; q < kc; ++q) {
      uint16_t* at = t + TileElement(w.rows, kc, r, kTileCols * q);
      const size_t n = std::min(kTileCols, w.cols - kTileCols * q);
      for (size_t c = 0; c < n; ++c)
        std::memcpy(at + c / 2 * 2 * kTileRows + c % 2, row + 2 * (kTileCols * q + c), 2);
    }
  }
  return TilesView(dst, w.rows, w.cols);
}

MatrixView TilesView(const uint8_t* data, size_t rows, size_t cols) {
  MatrixView v = MatrixView::Dense(WeightFormat::kBF16, data, rows, cols, cols);
  v.row_bytes = (cols + kTileCols - 1) / kTileCols * kTileCols * sizeof(uint16_t);
  v.layout = WeightLayout::kTiles;
  return v;
}

}  // namespace lfmvox
