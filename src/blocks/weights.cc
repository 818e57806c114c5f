#include "blocks/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "tensor/quant.h"

namespace lfmvox {

Status CheckWeightsFinite(const Checkpoint& ckpt) {
  for (const std::string& name : ckpt.Names()) {
    LFM_ASSIGN_OR_RETURN(TensorView t, ckpt.Get(name));
    const size_t n = static_cast<size_t>(t.elements());
    const size_t at = ops::FindNonFinite(t.dtype, t.data, n);
    if (at == n) continue;
    // The index in the tensor's own shape, and the value (a block's scale for the block types).
    std::string index;
    size_t rest = at;
    for (int i = t.shape.rank - 1; i >= 0; --i) {
      const size_t d = static_cast<size_t>(t.shape[i]);
      index = std::to_string(d ? rest % d : 0) + (index.empty() ? "" : ", ") + index;
      rest = d ? rest / d : 0;
    }
    std::vector<float> one(256);
    WeightFormat f;
    const bool block = DTypeSize(t.dtype) == 0;
    float v = 0;
    if (WeightFormatForDType(t.dtype, &f)) {
      const size_t elems = FormatBlockElements(f);
      const size_t b = at / elems;
      DequantizeRow(f, static_cast<const uint8_t*>(t.data) + b * FormatRowBytes(f, elems), elems, one.data());
      v = one[at % elems];
    } else {
      double d;
      std::memcpy(&d, static_cast<const uint8_t*>(t.data) + at * 8, 8);  // F64, the one other float type
      v = static_cast<float>(d);
    }
    return DataLoss(StrFormat(
        "%s: tensor %s holds %s at element %zu (index [%s])%s; the file is damaged, or was saved from a "
        "model whose training diverged: download or export it again (ModelOptions::check_weights / "
        "--no-weight-check skip this scan, for files known to be good)",
        ckpt.path().c_str(), name.c_str(), std::isnan(v) ? "NaN" : (v > 0 ? "+inf" : "-inf"), at,
        index.c_str(), block ? StrFormat(" (the scale of its %s block)", DTypeName(t.dtype)).c_str() : ""));
  }
  return Status::Ok();
}

Status CheckFiniteOutput(std::span<const float> x, const char* what) {
  const size_t at = ops::FindNonFinite(DType::kF32, x.data(), x.size());
  if (at == x.size()) return Status::Ok();
  return InvalidArgument(StrFormat(
      "%s holds %s at value %zu: the model's weights or its input produced non-finite values; load the "
      "model with the weight check on (the default) to find a damaged tensor",
      what, std::isnan(x[at]) ? "NaN" : (x[at] > 0 ? "+inf" : "-inf"), at));
}

Result<ops::Weight> LoadMatrix(const Checkpoint& ckpt, const std::string& name, int64_t rows, int64_t cols) {
  return LoadMatrix(ckpt, name, Shape{rows, cols}, rows, cols);
}

Result<ops::Weight> LoadMatrix(const Checkpoint& ckpt, const std::string& name, const Shape& stored,
                               int64_t rows, int64_t cols) {
  if (stored.elements() != rows * cols)
    return Internal("LoadMatrix: the stored shape must hold rows·cols values");
  LFM_ASSIGN_OR_RETURN(TensorView t, ckpt.Get(name, stored));
  WeightFormat format;
  if (!WeightFormatForDType(t.dtype, &format) || !ops::HasMatMulKernel(format)) {
    return Unimplemented("tensor " + name + " is stored as " + DTypeName(t.dtype) +
                         "; this build's matrix kernels take " + SupportedMatrixFormats() +
                         "; convert the checkpoint to one of them");
  }
  // A block format's row is whole blocks (FormatRowBytes says 0 otherwise).
  if (cols > 0 && FormatRowBytes(format, static_cast<size_t>(cols)) == 0) {
    return InvalidArgument("tensor " + name + " is " + DTypeName(t.dtype) + " with rows of " +
                           std::to_string(cols) + " values, not whole blocks of " +
                           std::to_string(FormatBlockElements(format)));
  }
  ops::Weight w = ops::Weight::Dense(format, t.data, static_cast<size_t>(rows), static_cast<size_t>(cols),
                                     static_cast<size_t>(cols));
  if (ops::PrefersSteps16Layout(format) && w.rows > 0 && w.cols > 0) {
    // Repacked once for this CPU's kernels (tensor/matrix.h, WeightLayout::kSteps16), rows 64-byte aligned;
    // the checkpoint keeps the copy and releases the file's pages of the original.
    const size_t rb = RoundUp(w.row_bytes, 64);
    const ops::Weight src = w;
    LFM_ASSIGN_OR_RETURN(
        const uint8_t* p,
        ckpt.Derived(
            StrFormat("%s|steps16|%zu|%zu", name.c_str(), w.rows, w.cols), w.rows * rb, [&](uint8_t* dst) {
              // The source's pages are released as the rows are done, ~1 MiB at a time, so that the peak
              // resident set is the file's plus ~1 MiB, not plus the largest matrix.
              const size_t chunk = std::max<size_t>(1, (size_t{1} << 20) / src.row_bytes);
              for (size_t r0 = 0; r0 < src.rows; r0 += chunk) {
                const size_t r1 = std::min(src.rows, r0 + chunk);
                for (size_t r = r0; r < r1; ++r) {
                  RepackRowSteps16(format, src.row(r), src.cols, dst + r * rb);
                  std::memset(dst + r * rb + src.row_bytes, 0, rb - src.row_bytes);
                }
                ckpt.ReleasePages(src.data, r1 * src.row_bytes);  // from the start: no page left at a seam
              }
            }));
    w.data = p;
    w.row_bytes = rb;
    w.layout = WeightLayout::kSteps16;
  }
  return w;
}

Result<ops::Weight> ConvertMatrix(const ops::Weight& w, WeightFormat f,
                                  std::vector<std::vector<uint8_t>>* arena) {
  if (!ops::HasMatMulKernel(f)) {
    return Unimplemented(std::string("this build has no matrix kernel for ") + WeightFormatName(f) +
                         "; it takes " + SupportedMatrixFormats());
  }
  const size_t rb = FormatRowBytes(f, w.cols);
  if (w.cols == 0 || rb == 0) {
    return InvalidArgument(
        StrFormat("a row of %zu values is not whole blocks of %s", w.cols, WeightFormatName(f)));
  }
  // In the layout this CPU's kernels read fastest, as LoadMatrix gives it; the rows packed (padding them
  // to 64 bytes, as LoadMatrix does, made no difference to the LFM3 codec's speed and costs up to 11 % at
  // 512 columns), the first 64-byte aligned.
  const bool steps16 = ops::PrefersSteps16Layout(f);
  std::vector<uint8_t>& bytes = arena->emplace_back(w.rows * rb + (steps16 ? 63 : 0));
  uint8_t* base = bytes.data();
  if (steps16) base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  std::vector<float> row(w.cols);
  std::vector<uint8_t> blocks(FormatRowBytes(w.format, w.cols)), file_row(steps16 ? rb : 0);
  for (size_t r = 0; r < w.rows; ++r) {
    DequantizeRow(w.format, RowAsBlocks(w, r, blocks.data()), w.cols, row.data());
    uint8_t* dst = base + r * rb;
    if (!steps16) {
      QuantizeRow(f, row.data(), w.cols, dst);
      continue;
    }
    QuantizeRow(f, row.data(), w.cols, file_row.data());
    RepackRowSteps16(f, file_row.data(), w.cols, dst);
  }
  ops::Weight out = ops::Weight::Dense(f, base, w.rows, w.cols, w.cols);
  if (steps16) out.layout = WeightLayout::kSteps16;
  return out;
}

Result<ops::Weight> ForManyRows(const Checkpoint& ckpt, const ops::Weight& w) {
  if (w.layout != WeightLayout::kBlocks || !ops::PrefersTilesLayout(w.format) || w.rows == 0 || w.cols == 0)
    return w;
  const ops::Weight src = w;
  LFM_ASSIGN_OR_RETURN(const uint8_t* p,
                       ckpt.Derived(StrFormat("%p|%zu|%zu|%zu|tiles", w.data, w.rows, w.cols, w.row_bytes),
                                    TilesLayoutBytes(w.rows, w.cols), [&](uint8_t* dst) {
                                      RepackTiles(src, dst);
                                      ckpt.ReleasePages(src.data, src.bytes());
                                    }));
  return TilesView(p, w.rows, w.cols);
}

std::string SupportedMatrixFormats() {
  std::string s;
  size_t left = 0;
  for (WeightFormat f : kAllWeightFormats) left += ops::HasMatMulKernel(f) ? 1 : 0;
  for (WeightFormat f : kAllWeightFormats) {
    if (!ops::HasMatMulKernel(f)) continue;
    s += WeightFormatName(f);
    --left;
    if (left > 1) s += ", ";
    if (left == 1) s += " and ";
  }
  return s;
}

Status LoadF32(const Checkpoint& ckpt, const std::string& name, const Shape& shape,
               AlignedBuffer<float>* out) {
  LFM_ASSIGN_OR_RETURN(TensorView t, ckpt.Get(name, shape));
  const size_t n = static_cast<size_t>(t.elements());
  out->Reset(n);
  float* dst = out->data();
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(dst, t.data, n * 4);
      break;
    case DType::kBF16: {
      const auto* s = static_cast<const uint8_t*>(t.data);
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, s + 2 * i, 2);
        dst[i] = Bf16ToF32(b);
      }
      break;
    }
    case DType::kF16: {
      const auto* s = static_cast<const uint8_t*>(t.data);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = F16ToF32(h);
      }
      break;
    }
    default: {
      // A GGUF block type: rows along the last dimension, each whole blocks.
      WeightFormat f;
      const int64_t row = t.shape.rank > 0 ? t.shape[t.shape.rank - 1] : 1;
      if (!WeightFormatForDType(t.dtype, &f) || !IsBlockFormat(f) || row <= 0 ||
          FormatRowBytes(f, static_cast<size_t>(row)) == 0) {
        return InvalidArgument("tensor " + name + " is " + DTypeName(t.dtype) +
                               "; a floating dtype (or whole blocks of a block type) is required");
      }
      const auto cols = static_cast<size_t>(row);
      const size_t rb = FormatRowBytes(f, cols);
      const auto* s = static_cast<const uint8_t*>(t.data);
      for (size_t r = 0; r < n / cols; ++r) DequantizeRow(f, s + r * rb, cols, dst + r * cols);
      break;
    }
  }
  return Status::Ok();
}

void AccumulateRow(const ops::Weight& table, size_t row, float* acc) { ops::AccumulateRow(table, row, acc); }

}  // namespace lfmvox
