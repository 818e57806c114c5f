// A weight matrix as the kernels see it: its storage format, its shape and
// where its rows are, with a row stride in bytes (an element of a 4-bit block
// format has no whole-byte stride of its own).
//
// Extension point: a new storage format is one more WeightFormat, its row
// size in FormatRowBytes and its name, and one kernel translation unit in
// src/ops (matmul_<format>.cc). The GGUF block formats Q8_0, Q4_0 and Q6_K
// keep their scales inline in the blocks, as the file has them
// (tensor/quant.h: layouts, exact dequantization, ggml's quantizers).
// Model code only ever holds MatrixViews and asks for bytes(), so it does not
// change.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace lfmvox {

enum class WeightFormat : uint8_t {
  kF32,   // IEEE float32
  kBF16,  // bfloat16, widened exactly to f32
  kF16,   // IEEE half, widened exactly to f32
  // GGUF block formats: a row is cols / block whole blocks, scales inline.
  kQ8_0,  // 32 weights in 34 bytes: f16 d; i8 qs[32]; w = qs·d
  kQ4_0,  // 32 weights in 18 bytes: f16 d; u8 qs[16]; w = (nibble − 8)·d
  kQ6_K,  // 256 weights in 210 bytes: u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d
};
inline constexpr size_t kWeightFormatCount = 6;
inline constexpr WeightFormat kAllWeightFormats[kWeightFormatCount] = {
    WeightFormat::kF32,  WeightFormat::kBF16, WeightFormat::kF16,
    WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ6_K};

// "F32", "BF16", "F16", "Q8_0", "Q4_0", "Q6_K", as the checkpoint dtype
const char* WeightFormatName(WeightFormat f);
// Weights per block: 1 for the plain formats, 32 or 256 for the block ones.
size_t FormatBlockElements(WeightFormat f);
// Whether f is a block format (its values are not exact f32 numbers one by one).
inline bool IsBlockFormat(WeightFormat f) { return FormatBlockElements(f) > 1; }
// The format of a checkpoint tensor stored as dtype t; false if no format holds it.
bool WeightFormatForDType(DType t, WeightFormat* out);
// Bytes of one row of `cols` elements; 0 when `cols` is not a whole number of
// the format's blocks (32 for Q8_0 and Q4_0, 256 for Q6_K).
size_t FormatRowBytes(WeightFormat f, size_t cols);

// How a row of a block format holds its blocks.
//   kBlocks: as GGUF stores them, whole blocks in order (the only layout of
//     a file, of Q6_K and of the plain formats).
//   kSteps16 (Q8_0, Q4_0, Q6_K; made at load time by RepackRowSteps16 in
//     tensor/quant.h for the kernels that read it): a row of nb blocks is
//     s = nb / 16 steps of 16 blocks, then t = nb % 16 tail blocks. With q
//     code bytes a block (Q8_0 32, Q4_0 16), a step's codes are C = 16·q
//     bytes: byte 64·j + 4·l + e is code byte 4·j + e of block 16p + l
//     (l < 16, e < 4, j < q / 4), so each 64 bytes are one vector register
//     of the 512-bit step kernels, 32-bit lane l holding block l's bytes;
//     its d are 32 bytes, the 16 f16 in block order. The steps go in groups
//     of 2 (the last one alone if s is odd): a group of G steps is their G·C
//     code bytes, then their G·32 scale bytes (Steps16CodesAt, Steps16ScalesAt
//     in tensor/quant.h), so that a row is read front to back, the scales of
//     2 steps one cache line. Then the t tail blocks the same way with t
//     lanes: byte 4t·j + 4·l + e is code byte 4·j + e of block 16s + l, then
//     their t f16 d (Steps16TailScalesAt). A row is as many bytes as in
//     kBlocks (C + 32 = 16 blocks); the stride may be padded, so that rows
//     start aligned.
//     Q6_K keeps its blocks in order, each 210 bytes with its scales and d
//     where the file has them; only the 6-bit codes move, so that register j
//     (j < 8) of the 8-group step kernels has in byte 4·g + i the code of
//     element 32·g + 4·j + i (g < 8, i < 4): its low 4 bits in byte
//     32·(j % 4) + 4·g + i (the low nibble for j < 4, the high one else),
//     its high 2 bits in byte 128 + 32·(j / 4) + 4·g + i at bits 2·(j % 4).
//   kTiles (BF16 only; made at load time by RepackTiles in tensor/quant.h for
//     the AMX kernel, ops::PrefersTilesLayout): the matrix as 1 KiB tiles of
//     16 rows × 32 columns in the order AMX's TDPBF16PS reads its second
//     operand. Rows go in groups of 64 (the last group has the ⌈rows'/16⌉
//     tiles its rows need), columns in KC = ⌈cols/32⌉ chunks; group g starts
//     at tile 4·KC·g, and its chunk q, tile t is tile 4·KC·g + tg·q + t (tg:
//     the group's tiles), whose bf16 element 32·p + 2·j + e is
//     W[64g + 16t + j, 32q + 2p + e] (p, j < 16, e < 2), zero past the
//     matrix. So a group streams front to back, one chunk of all its tiles
//     at a time. row_bytes is KC·64 (a row's share of its tiles); row(r) has
//     no meaning: RowAsBlocks gathers a row.
enum class WeightLayout : uint8_t { kBlocks, kSteps16, kTiles };

// A non-owning view of W[rows, cols], row r at data + r·row_bytes. Rows may be
// longer than cols elements (a view of some columns of a wider matrix); for a
// block format cols is whole blocks, and a block's scales are in the block.
struct MatrixView {
  WeightFormat format = WeightFormat::kF32;
  const void* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  size_t row_bytes = 0;  // stride between rows, in bytes
  WeightLayout layout = WeightLayout::kBlocks;

  // User-declared so that the struct is no aggregate: a brace list in the old
  // element-stride order cannot compile into a wrong view.
  MatrixView() = default;

  // A matrix whose rows are `ld` elements apart (ld whole blocks for a block format).
  static MatrixView Dense(WeightFormat f, const void* data, size_t rows, size_t cols, size_t ld) {
    MatrixView v;
    v.format = f;
    v.data = data;
    v.rows = rows;
    v.cols = cols;
    v.row_bytes = FormatRowBytes(f, ld);
    return v;
  }

  // The bytes the rows span at their stride (0 for an empty view); inline
  // scales included.
  size_t bytes() const { return rows * row_bytes; }
  const uint8_t* row(size_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes; }
};

}  // namespace lfmvox
