// The GGUF block formats (WeightFormat kQ8_0, kQ4_0, kQ6_K): their byte
// layouts, exact dequantization and ggml's reference quantizers, bit for bit,
// in plain scalar code. These are the definitions the SIMD kernels
// (src/ops/matmul_q*.cc) and their tests are held to.
//
// Layouts (all little-endian, d an IEEE half):
//   Q8_0, 32 weights in 34 bytes: f16 d; i8 qs[32];     w[j] = qs[j]·d
//   Q4_0, 32 weights in 18 bytes: f16 d; u8 qs[16];     w[j] = ((qs[j] & 15) − 8)·d,
//                                                       w[j + 16] = ((qs[j] >> 4) − 8)·d
//   Q6_K, 256 weights in 210 bytes: u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d;
//     per half h (128 weights; ql += 64, qh += 32, scales += 8), l < 32:
//       w[l]      = d·sc[l/16]     ·((ql[l] & 15)      | ((qh[l] >> 0 & 3) << 4)) − 32)
//       w[l + 32] = d·sc[l/16 + 2] ·((ql[l + 32] & 15) | ((qh[l] >> 2 & 3) << 4)) − 32)
//       w[l + 64] = d·sc[l/16 + 4] ·((ql[l] >> 4)      | ((qh[l] >> 4 & 3) << 4)) − 32)
//       w[l + 96] = d·sc[l/16 + 6] ·((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) − 32)
//     so each run of 16 weights shares one int8 sub-scale.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/matrix.h"

namespace lfmvox {

inline constexpr size_t kQ8_0BlockBytes = 34;
inline constexpr size_t kQ4_0BlockBytes = 18;
inline constexpr size_t kQ6_KBlockBytes = 210;
// Byte offsets inside a Q6_K block.
inline constexpr size_t kQ6_KQh = 128, kQ6_KScales = 192, kQ6_KD = 208;

// out[c] = W[c] for c < cols, exactly as ggml's dequantize_row_* (and for
// F32/BF16/F16 the exact widening). cols must be whole blocks of f.
void DequantizeRow(WeightFormat f, const void* row, size_t cols, float* out);

// The row of `cols` values in format f, bit-identical to ggml's reference
// quantizers (quantize_row_q8_0_ref, _q4_0_ref, _q6_K_ref; F16 and BF16 round
// to nearest even). cols must be whole blocks of f; out holds
// FormatRowBytes(f, cols) bytes.
void QuantizeRow(WeightFormat f, const float* in, size_t cols, void* out);

// in[rows, cols] (rows ld_in floats apart) → out, rows out_row_bytes apart
// (≥ FormatRowBytes(f, cols); any padding is left as it is).
void QuantizeMatrix(WeightFormat f, const float* in, size_t rows, size_t cols, size_t ld_in, void* out,
                    size_t out_row_bytes);
// The dense case: rows cols apart in, FormatRowBytes(f, cols) apart out.
inline void QuantizeMatrix(WeightFormat f, const float* in, size_t rows, size_t cols, void* out) {
  QuantizeMatrix(f, in, rows, cols, cols, out, FormatRowBytes(f, cols));
}
// W[rows, cols] → out[rows, cols] (dense f32), in either layout.
void DequantizeMatrix(const MatrixView& w, float* out);

// The kSteps16 layout (tensor/matrix.h) of Q8_0, Q4_0 and Q6_K rows.
inline bool HasSteps16Layout(WeightFormat f) {
  return f == WeightFormat::kQ8_0 || f == WeightFormat::kQ4_0 || f == WeightFormat::kQ6_K;
}
// Where step p (of s in a row) has its codes and its scales in kSteps16, for
// C code bytes a step (tensor/matrix.h), and the tail's scales, for t tail
// blocks of q code bytes each (the tail itself starts at s·(C + 32)).
inline constexpr size_t Steps16CodesAt(size_t p, [[maybe_unused]] size_t s, size_t C) {
  return p / 2 * (2 * C + 64) + p % 2 * C;
}
inline constexpr size_t Steps16ScalesAt(size_t p, size_t s, size_t C) {
  const size_t g = p / 2, steps = s - 2 * g < 2 ? s - 2 * g : 2;  // the steps of p's group
  return g * (2 * C + 64) + steps * C + p % 2 * 32;
}
inline constexpr size_t Steps16TailScalesAt(size_t s, size_t C, size_t t, size_t q) {
  return s * (C + 32) + t * q;
}
// A row of `cols` values (whole blocks of f, HasSteps16Layout(f)) from the
// file's blocks at src into kSteps16 at dst, and back; FormatRowBytes(f, cols)
// bytes each, src and dst not overlapping.
void RepackRowSteps16(WeightFormat f, const uint8_t* src, size_t cols, uint8_t* dst);
void UnpackRowSteps16(WeightFormat f, const uint8_t* src, size_t cols, uint8_t* dst);
// Blocks [b0, b0 + n) of row r of w, in either layout, as the file has them
// (n·FormatRowBytes(w.format, block) bytes at out).
void CopyBlocksOfRow(const MatrixView& w, size_t r, size_t b0, size_t n, uint8_t* out);
// Row r of w as the file's blocks: w.row(r) itself in kBlocks, else unpacked
// into buf (FormatRowBytes(w.format, w.cols) bytes) and buf.
const uint8_t* RowAsBlocks(const MatrixView& w, size_t r, uint8_t* buf);
// WeightLayout::kTiles (tensor/matrix.h): its geometry (rows and columns of a
// tile, tiles of a group), shared with the kernel that reads it (ops/matmul_tiles.cc).
inline constexpr size_t kTilesTileRows = 16, kTilesTileCols = 32, kTilesGroupTiles = 4;
// The bytes a [rows, cols] BF16 matrix
// takes in it; the view of such a matrix at data (64-byte aligned); and a copy
// of a kBlocks BF16 matrix `w` in it at dst (TilesLayoutBytes, 64-byte
// aligned, padding zeroed), returned as its view.
size_t TilesLayoutBytes(size_t rows, size_t cols);
MatrixView TilesView(const uint8_t* data, size_t rows, size_t cols);
MatrixView RepackTiles(const MatrixView& w, uint8_t* dst);

}  // namespace lfmvox
