// Causal 1-D convolutions over time as matrix products, for the SEANet-style codecs (Mimi's decoder):
//   CausalConv1d            PyTorch Conv1d(in, out, k), stride 1, dilation 1, left-padded k − 1;
//   CausalConvTranspose1d   PyTorch ConvTranspose1d(in, out, k = m·s, stride s) with its last k − s
//                           outputs trimmed (moshi's causal trim "on the right").
// Both read a window of time-major input rows [k_in − 1 + n, in]: the k_in − 1 rows before the call
// (history: zeros at a stream's start) then the call's n rows, contiguous. Output row t is then one
// product of W with the window's rows t .. t + k_in − 1, read in place as one row of k_in·in values
// (ops::PackedMatMul with the X row stride `in`), so each output row depends only on its own inputs: a
// sequence convolved in pieces equals the sequence convolved at once, bit for bit.
// Weights are reordered once at load so that a row of W matches such a window (tap-major), and packed
// for ops::PackedMatMul (which reads them once per call, not once per row). The history
// is the caller's (a stream's state): History(window, n) is where the rows to keep for the next call start.
// Shapes: rows of `in` or `out` channels; k the kernel, s the stride, m = k / s input taps.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "io/safetensors.h"
#include "ops/ops.h"

namespace lfmvox {

class ThreadTeam;

// y[t, o] = b[o] + Σ_{j<k} Σ_i w[o, i, j] · u[t − (k − 1) + j, i], u the history then the input.
// A narrow layer (out ≤ kNarrowOut, as Mimi's last conv 64 → 1) keeps its reordered rows dense for
// ops::MatMul instead: a panel of 16 outputs would spend 15 of every 16 multiply-adds on zero padding
// (Mimi's last conv, 1920 rows of k 192 a frame: its stage, ELU included, 0.17-0.19 → 0.08 ms on one core
// of this Xeon). Its outputs are MatMul's dot products, so they too depend only on their own rows.
struct CausalConv1d {
  static constexpr size_t kNarrowOut = 4;
  ops::PackedWeight w;          // [out, k·in]: column j·in + i holds the checkpoint's w[o, i, j]
  AlignedBuffer<uint8_t> rows;  // narrow layers: the same [out, k·in] dense, w empty
  ops::Weight dense;            // the view of `rows`
  AlignedBuffer<float> bias;    // [out], empty when the layer has none
  size_t in = 0, out = 0, k = 0;

  size_t history_rows() const { return k - 1; }
  // window [k − 1 + n, in] (history first); y [n, out], rows ldy apart.
  void Forward(const float* window, size_t n, float* y, size_t ldy, ThreadTeam& team) const;
  size_t weight_bytes() const { return w.bytes() + rows.size(); }
  size_t macs_per_row() const { return out * k * in; }
};

// y[n·s + r, o] = b[o] + Σ_{q<m} Σ_i x[n − q, i] · w[i, o, q·s + r], for r < s: every input row makes s
// output rows, the last m − 1 input rows are the history (the "partial" outputs moshi keeps, in input form).
struct CausalConvTranspose1d {
  ops::PackedWeight w;  // [s·out, m·in]: row r·out + o, column (m − 1 − q)·in + i = w[i, o, q·s + r]
  AlignedBuffer<float> bias;  // [s·out]: the checkpoint's [out] bias once per output phase r
  size_t in = 0, out = 0, k = 0, stride = 0;

  size_t taps() const { return k / stride; }
  size_t history_rows() const { return taps() - 1; }
  // window [m − 1 + n, in] (history first); y [n·s, out], dense (out per row).
  void Forward(const float* window, size_t n, float* y, ThreadTeam& team) const;
  size_t weight_bytes() const { return w.bytes(); }
  size_t macs_per_input_row() const { return stride * out * taps() * in; }
};

// Loads `<name>.weight` [out, in, k] (and `<name>.bias` [out] when with_bias) stored as F32, BF16 or F16,
// reordered and packed (BF16 stays BF16, F16 is widened to F32).
Status LoadCausalConv1d(const Checkpoint& ckpt, const std::string& name, int64_t in, int64_t out, int64_t k,
                        bool with_bias, CausalConv1d* conv);
// Loads `<name>.weight` [in, out, k] (and `<name>.bias` [out]); k must be a multiple of the stride.
Status LoadCausalConvTranspose1d(const Checkpoint& ckpt, const std::string& name, int64_t in, int64_t out,
                                 int64_t k, int64_t stride, bool with_bias, CausalConvTranspose1d* conv);

// Moves the last `rows` rows of a window of `total` rows (`width` floats each) to its front: the history
// the next call's window starts with.
void KeepHistory(float* window, size_t total, size_t rows, size_t width);

}  // namespace lfmvox
