// Loading helpers shared by every model: checkpoint tensors become kernel
// weight views (zero-copy into the mmap, or a load-time repack the
// checkpoint owns) or small owned f32 vectors.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "io/safetensors.h"
#include "ops/ops.h"

namespace lfmvox {

// Every tensor of `ckpt` scanned for NaN and ±inf (ops::FindNonFinite: each
// float element, each block scale of Q8_0/Q4_0/Q6_K). A bad value is a
// DataLoss error naming the file, the tensor, the first bad element's index
// and its value. It reads every byte of the weights once (the cost is in
// bench_lfm25 --load); ModelOptions::check_weights = false skips it.
Status CheckWeightsFinite(const Checkpoint& ckpt);

// InvalidArgument when x holds NaN or ±inf ("<what> holds NaN at 12: the
// weights or the input produced non-finite values ..."): the run-time guard
// on a model's outputs (PCM), so a damaged file never becomes a silent WAV.
Status CheckFiniteOutput(std::span<const float> x, const char* what);

// A [rows, cols] matrix used in place, in the format of its dtype. A dtype no
// matrix kernel of this build takes (see SupportedMatrixFormats) is an
// Unimplemented error naming the tensor. The checkpoint must outlive the
// returned view. Where this CPU's MatMul reads a format faster in another
// layout (ops::PrefersSteps16Layout: Q8_0, Q4_0 and Q6_K on AVX2 and AVX-512), the view
// is instead a copy in that layout (WeightLayout::kSteps16, rows 64-byte
// aligned), made once per tensor and kept by the checkpoint
// (Checkpoint::Derived), whose file pages of the original are then released:
// the same results, the same resident bytes, at a load-time cost of one pass
// over the matrix (docs/benchmarks.md).
Result<ops::Weight> LoadMatrix(const Checkpoint& ckpt, const std::string& name, int64_t rows, int64_t cols);
// The same for a tensor stored with another shape of rows·cols elements
// (a 1×1 convolution's [out, in, 1, 1] used as the matrix [out, in]).
Result<ops::Weight> LoadMatrix(const Checkpoint& ckpt, const std::string& name, const Shape& stored,
                               int64_t rows, int64_t cols);

// The formats LoadMatrix accepts, for messages: "F32, BF16 and F16".
std::string SupportedMatrixFormats();

// A tensor of the given shape widened to f32 into an owned buffer (norm
// weights, biases, conv taps, windows: small and read often).
Status LoadF32(const Checkpoint& ckpt, const std::string& name, const Shape& shape,
               AlignedBuffer<float>* out);

// Load-time conversion: a copy of `w` in format `f` (F16, BF16, Q8_0, Q4_0, ...), exactly as
// tensor/quant.h's QuantizeRow makes it from the exactly widened rows, in the layout LoadMatrix would give
// it on this CPU (kSteps16 where ops::PrefersSteps16Layout; the same results); its bytes are a new entry of
// `arena`, which must outlive the returned view (entries never move: each is its own heap block).
// Unimplemented when this build's kernels lack `f`; InvalidArgument when a row is not whole blocks of `f`
// (the caller keeps such a matrix as stored).
Result<ops::Weight> ConvertMatrix(const ops::Weight& w, WeightFormat f,
                                  std::vector<std::vector<uint8_t>>* arena);

// `w` in the layout this CPU's MatMul multiplies fastest when every call has
// many X rows (WeightLayout::kTiles for BF16 where ops::PrefersTilesLayout:
// AMX; ops.h states its arithmetic, f32-accurate but not the stored layout's
// bits), made once and kept by `ckpt` (Checkpoint::Derived; the file's pages
// of the original released), or `w` itself where no such layout pays. For
// weights no decode step reads one row at a time.
Result<ops::Weight> ForManyRows(const Checkpoint& ckpt, const ops::Weight& w);

// acc[cols] += row `row` of a table loaded by LoadMatrix (embedding lookups
// that are summed: audio frames, fused codebooks); ops::AccumulateRow.
void AccumulateRow(const ops::Weight& table, size_t row, float* acc);

}  // namespace lfmvox
