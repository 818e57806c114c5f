// Numerical kernels. They know nothing about models: only arrays, sizes and
// strides. Every function has a plain scalar reference in namespace ops::ref
// (ops_ref.cc) and a SIMD version chosen at run time for the CPU (Highway
// dynamic dispatch). The SIMD code: the MatMul engine (matmul-inl.h) compiled
// once per weight format with that format's row decoder (matmul_f32.cc,
// matmul_bf16.cc, matmul_f16.cc), the integer engine for the GGUF block
// formats (matmul_quant-inl.h: matmul_q8_0.cc, matmul_q4_0.cc,
// matmul_q6_k.cc; matmul.cc picks one per call), the AMX kernels for BF16
// weights in WeightLayout::kTiles (matmul_tiles.cc: CPUID, not Highway) and for
// Q8_0 / Q4_0 against many X rows (matmul_quant_amx.cc: the bits of the VNNI steps),
// the panel kernel for packed weights (packed_matmul.cc), and the element-wise kernels
// (elementwise.cc). Model code calls only what is
// declared here.
//
// Conventions: matrices are row-major; a weight matrix is PyTorch's Linear
// layout [out, in]; "ld" is a row stride in elements of f32 activations (a
// weight's stride is MatrixView::row_bytes, in bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/aligned.h"
#include "tensor/dtype.h"
#include "tensor/matrix.h"

namespace lfmvox {
class ThreadTeam;
}

namespace lfmvox::ops {

// A weight matrix W[rows = out features, cols = in features] in any
// WeightFormat (tensor/matrix.h). Plain formats: every element is widened
// exactly to f32. Block formats (Q8_0, Q4_0, Q6_K; cols whole blocks): MatMul
// takes llama.cpp's integer path, X quantized to int8 per 32 values (see
// MatMul); AccumulateRow adds the exact dequantized values.
using Weight = MatrixView;

// Whether this build has MatMul and AccumulateRow kernels for format f.
// Every WeightFormat has them today (a static_assert in matmul.cc keeps it
// so); LoadMatrix (blocks/weights.h) asks before it hands out a view.
bool HasMatMulKernel(WeightFormat f);

// Y[m, n] = X[m, k] · W[n, k]ᵀ (+ bias[n] when bias != nullptr), all in f32
// arithmetic. Rows of W are split across the team. The kernel is chosen once
// per call from w.format.
// For a block format W, each X row is first quantized per 32 values
// (d = amax/127, q = x/d rounded to nearest even), each group's product with
// W is exact in integers, and Y = Σ_g (d_w·d_x,g)·isum_g in f32 (+ bias): the
// error against X·Wᵀ with dequantized W is that of X's quantization,
// |Σ_g Σ w·(x − x̂)| ≤ Σ_g (d_x,g/2)·Σ|w|, plus f32 rounding
// (ref::MatMulQuantized is the exact-integer yardstick).
// Determinism contract: each Y element's value depends only on its X row, its
// W row and the bias, never on m, on the team size or on alignment, so a
// sequence decoded in pieces equals the same sequence decoded at once, bit
// for bit. (On AMX-INT8, Q8_0 / Q4_0 in kSteps16 with m ≥ 32 take the unit and
// still give these bits: the integer sums are exact wherever formed.)
void MatMul(const float* x, size_t m, size_t ldx, const Weight& w, const float* bias, float* y, size_t ldy,
            ThreadTeam& team);

// One of several products of the same X (MatMulShared).
struct MatMulOut {
  const Weight* w = nullptr;
  const float* bias = nullptr;  // or nullptr
  float* y = nullptr;
  size_t ldy = 0;
};
// Y_i = X · W_iᵀ (+ bias_i) for every output, each the bits MatMul gives it; X prepared once and
// every W's rows split across the team in one pass where the kernel allows (kTiles W on AMX), else
// one MatMul each. Every W has the same cols.
void MatMulShared(const float* x, size_t m, size_t ldx, std::span<const MatMulOut> outs, ThreadTeam& team);

// Whether MatMul on this CPU's chosen target reads format f's
// WeightLayout::kSteps16 (tensor/matrix.h) directly (AVX2, AVX3, AVX3_DL: Q8_0,
// Q4_0 and Q6_K), so that repacking a matrix into it at load time
// (RepackRowSteps16) pays: its steps then load whole registers instead of
// gathering blocks (Q8_0 and Q4_0 on AVX3_DL) or repacking a tile of rows per
// call (the others).
// MatMul and AccumulateRow take either layout on every target, with the
// same results for both.
bool PrefersSteps16Layout(WeightFormat f);

// Whether this CPU multiplies format f faster from WeightLayout::kTiles
// (tensor/matrix.h; tensor/quant.h RepackTiles) when X has many rows: BF16
// where the CPU has AMX-BF16 and the OS grants it (asked once per process).
// MatMul on a kTiles W is another arithmetic contract than on the stored
// layout: X is split exactly into three bf16 parts (hi + mid + lo = x for
// |x| ≥ 2^-102; below, the unit flushes what is subnormal) whose products with W are exact,
// summed in f32 by the unit in its own order: |y − exact| ≤ γ_h·Σ|x·w| with
// h = 3·32·⌈k/32⌉ + 1, the same for every m, team size and split (a Y element
// depends only on its X row, W row and bias), but not the bits MatMul gives
// on the stored layout (a non-finite x gives NaN, where the stored layout
// may give ±inf). Without AMX (or switched off for a test) a kTiles W
// is unpacked and gives those bits. For weights that always meet many X
// rows (a bidirectional depth decoder's passes), not for decode, which reads
// W once per token at the memory's rate either way.
bool PrefersTilesLayout(WeightFormat f);

// A weight matrix W [rows = n, cols = k] repacked once (at load) for
// PackedMatMul: column panels of kPackedPanel W rows, each panel k steps of
// kPackedPanel values (W[16p + c, q] at q·16 + c), the last panel zero padded.
// BF16 weights stay BF16 (same bytes as stored); every other format is
// widened to F32 (its exact dequantized values).
inline constexpr size_t kPackedPanel = 16;
struct PackedWeight {
  WeightFormat format = WeightFormat::kF32;  // kF32 or kBF16: the panels' elements
  size_t rows = 0, cols = 0;
  AlignedBuffer<uint8_t> data;
  size_t panels() const { return (rows + kPackedPanel - 1) / kPackedPanel; }
  size_t bytes() const { return data.size(); }
};
PackedWeight PackWeight(const Weight& w);

// Y[m, n] = X[m, k] · W[n, k]ᵀ (+ bias[n]) for a PackedWeight: the kernel for
// products with many X rows (convolutions over time), which reads W once per
// block of up to 768 (AVX-512) or 192 X rows, with no horizontal sums. Each Y element is
// acc = bias (or 0), then acc = fma(x[q], w[q], acc) for q = 0, 1, … k − 1 in
// order (mul then add on a target without FMA): it depends only on its X row,
// its W row and the bias, never on m, the team size, the split of n or
// alignment, so a sequence multiplied in pieces equals it multiplied at once,
// bit for bit. Panels are split across the team. y must not alias x.
void PackedMatMul(const float* x, size_t m, size_t ldx, const PackedWeight& w, const float* bias, float* y,
                  size_t ldy, ThreadTeam& team);

// Dot product of two f32 vectors.
float Dot(const float* a, const float* b, size_t n);

// y = w ⊙ (x / sqrt(mean(x²) + eps)); the mean is accumulated in double.
// y may alias x.
void RmsNorm(const float* x, const float* w, size_t n, float eps, float* y);

// Split-half (NeoX) rotary embedding of one head in place: for i < d/2,
//   (x[i], x[i + d/2]) ← (x[i]·c[i] − x[i+d/2]·s[i], x[i+d/2]·c[i] + x[i]·s[i]).
// cos/sin hold d/2 values for this position.
void RopeSplitHalf(float* x, size_t d, const float* cos, const float* sin);

// Interleaved-pair (GPT-J) rotary embedding of one head in place: for m < d/2,
//   (x[2m], x[2m+1]) ← (x[2m]·c[m] − x[2m+1]·s[m], x[2m+1]·c[m] + x[2m]·s[m]).
void RopeInterleaved(float* x, size_t d, const float* cos, const float* sin);

// x ← softmax(x) over n entries (max-subtracted; exact zeros for -inf). All
// entries -inf gives NaN (0/0, as torch); NaN inputs give unspecified values.
void Softmax(float* x, size_t n);

// out = silu(gate) ⊙ up, silu(g) = g / (1 + e^-g). out may alias gate or up.
void SwiGlu(const float* gate, const float* up, float* out, size_t n);

// out = a ⊙ b; out may alias a or b.
void Mul(const float* a, const float* b, float* out, size_t n);

// out = a + b; out may alias a or b.
void Add(const float* a, const float* b, float* out, size_t n);

// out = a · s
void Scale(const float* a, float s, float* out, size_t n);

// acc[c] += table[row, c] widened to f32, for c < table.cols (an embedding
// lookup that is summed). Same formats as MatMul.
void AccumulateRow(const Weight& table, size_t row, float* acc);

// Causal depthwise convolution over time for `t` rows of `c` channels:
//   y[r, ch] = Σ_{j<k} w[ch·k + j] · u[r − (k−1) + j, ch]
// where u[r] = x row r for r ≥ 0 and u[r < 0] comes from `state`, which holds
// the previous k−1 input rows (oldest first, row stride c). On return `state`
// holds the last k−1 rows of u, so the next call continues the sequence.
// x rows are ldx apart, y rows ldy apart; y must not alias x.
void CausalDepthwiseConv(const float* x, size_t t, size_t ldx, size_t c, const float* w, size_t k,
                         float* state, float* y, size_t ldy);

// One query against n keys: out[d] = Σ_j softmax_j(scale · q·K[j]) · V[j].
// K and V rows are ld_k / ld_v apart. scores is scratch of at least n floats.
void AttendOne(const float* q, const float* keys, size_t ld_k, const float* values, size_t ld_v, size_t n,
               size_t d, float scale, float* scores, float* out);

// Index of the first maximal element (ties go to the lowest index). NaNs
// never win; all-NaN input or n == 0 gives 0.
size_t ArgMax(const float* x, size_t n);

// Finiteness scans (finite.cc). FindNonFinite: the index of the first NaN or
// ±inf among the n elements of type t at data, or n when there is none. For
// a block type (Q8_0, Q4_0, Q6_K; n whole blocks of weights) the blocks' f16
// scales are what can be non-finite: the index is the bad block's first
// weight. Integer and boolean types are always finite.
size_t FindNonFinite(DType t, const void* data, size_t n);
// The index of the first NaN or +inf in x[n], or n; -inf (a masked logit) is
// allowed.
size_t FindNanOrPosInf(const float* x, size_t n);

// Names of the SIMD targets compiled into this build and the one chosen for
// this CPU, for benchmarks and diagnostics ("AVX3", "AVX2", ...).
const char* ChosenTarget();

namespace ref {
// The plain scalar versions, same contracts (MatMul runs on one thread).
void MatMul(const float* x, size_t m, size_t ldx, const Weight& w, const float* bias, float* y, size_t ldy);
// X quantized as the block formats' MatMul does it: per 32 values (k a
// multiple of 32), d = amax/127, q = nearbyint(x·(1/d)), 0 when d = 0; a group holding NaN or ±inf gets
// d = NaN and q = 0 (its products are NaN, as in f32 arithmetic).
void QuantizeActivations(const float* x, size_t k, int8_t* q, float* d);
// The block formats' integer MatMul in scalar code: X quantized as above, each
// 32-value group's integer dot product exact, then Σ_g (d_w·d_x,g)·isum_g
// (the scale product rounded to f32, as the SIMD kernels have it) summed in
// double, + bias. mag (nullable, laid out like y) receives
// Σ_g |d_w·d_x,g|·Σ|x_q·w_q| (+ |bias|), the scale of the f32 rounding error
// a SIMD summation adds.
void MatMulQuantized(const float* x, size_t m, size_t ldx, const Weight& w, const float* bias, float* y,
                     size_t ldy, double* mag);
// Sequential std::fma over k, as the SIMD kernel on an FMA target.
void PackedMatMul(const float* x, size_t m, size_t ldx, const PackedWeight& w, const float* bias, float* y,
                  size_t ldy);
float Dot(const float* a, const float* b, size_t n);
void RmsNorm(const float* x, const float* w, size_t n, float eps, float* y);
void RopeSplitHalf(float* x, size_t d, const float* cos, const float* sin);
void RopeInterleaved(float* x, size_t d, const float* cos, const float* sin);
void Softmax(float* x, size_t n);
void SwiGlu(const float* gate, const float* up, float* out, size_t n);
void Mul(const float* a, const float* b, float* out, size_t n);
void Add(const float* a, const float* b, float* out, size_t n);
void Scale(const float* a, float s, float* out, size_t n);
void AccumulateRow(const Weight& table, size_t row, float* acc);
void CausalDepthwiseConv(const float* x, size_t t, size_t ldx, size_t c, const float* w, size_t k,
                         float* state, float* y, size_t ldy);
void AttendOne(const float* q, const float* keys, size_t ld_k, const float* values, size_t ld_v, size_t n,
               size_t d, float scale, float* scores, float* out);
size_t ArgMax(const float* x, size_t n);
size_t FindNonFinite(DType t, const void* data, size_t n);
size_t FindNanOrPosInf(const float* x, size_t n);
}  // namespace ref

}  // namespace lfmvox::ops
