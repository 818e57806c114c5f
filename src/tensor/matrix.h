// A weight matrix as the kernels see it: its storage format, its shape and
// where its rows are, with a row stride in bytes (an element of a 4-bit block
// format has no whole-byte stride of its own).
//
// Extension point: a new storage format (the GGUF block layouts Q8_0, Q4_0,
// Q6_K are next) is one more WeightFormat, its row size in FormatRowBytes and
// its name, and one kernel translation unit in src/ops (matmul_<format>.cc).
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
  // Next: block formats (a row is cols / block whole blocks, scales inline).
};
inline constexpr size_t kWeightFormatCount = 3;
inline constexpr WeightFormat kAllWeightFormats[kWeightFormatCount] = {
    WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16};

const char* WeightFormatName(WeightFormat f);  // "F32", "BF16", "F16", as the checkpoint dtype
// The format of a checkpoint tensor stored as dtype t; false if no format holds it.
bool WeightFormatForDType(DType t, WeightFormat* out);
// Bytes of one row of `cols` elements; 0 when `cols` is not a whole number of
// the format's blocks.
size_t FormatRowBytes(WeightFormat f, size_t cols);

// A non-owning view of W[rows, cols], row r at data + r·row_bytes. Rows may be
// longer than cols elements (a view of some columns of a wider matrix).
struct MatrixView {
  WeightFormat format = WeightFormat::kF32;
  const void* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  size_t row_bytes = 0;          // stride between rows, in bytes
  const void* scales = nullptr;  // separate scales of a block format; null for the plain ones
  size_t group = 0;              // elements per scale; 0 for the plain formats

  // User-declared so that the struct is no aggregate: a brace list in the old
  // element-stride order cannot compile into a wrong view.
  MatrixView() = default;

  // A plain-format matrix whose rows are `ld` elements apart.
  static MatrixView Dense(WeightFormat f, const void* data, size_t rows, size_t cols, size_t ld) {
    MatrixView v;
    v.format = f;
    v.data = data;
    v.rows = rows;
    v.cols = cols;
    v.row_bytes = FormatRowBytes(f, ld);
    return v;
  }

  // The bytes the rows span at their stride (0 for an empty view). Separate
  // scales are not counted; no format has them yet.
  size_t bytes() const { return rows * row_bytes; }
  const uint8_t* row(size_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes; }
};

}  // namespace lfmvox
