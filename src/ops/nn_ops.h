// Neural-network kernels beyond ops.h, first needed by the FastConformer
// audio encoder: LayerNorm with bias, the pointwise activations (GELU in its
// erf form, SiLU, ReLU, GLU), a per-channel affine map (BatchNorm in eval
// form), a "same"-padded depthwise conv1d over time and one output row of the
// 3×3 stride-2 2-D convolutions of the dw_striding subsampling.
//
// Same rules as ops.h: kernels know nothing about models; each has a plain
// scalar reference in ops::ref and a SIMD version chosen at run time
// (Highway dynamic dispatch), both in nn_ops.cc. Channels-last layout:
// a [t, c] activation holds time steps as rows of c channels.
#pragma once

#include <cstddef>

namespace lfmvox::ops {

// y = ((x − mean) · rstd) ⊙ gamma + beta over n entries, with mean and
// variance (biased, as torch's LayerNorm) accumulated in double, then
// mean and rstd = 1/sqrt(var + eps) rounded to f32. y may alias x.
void LayerNorm(const float* x, const float* gamma, const float* beta, size_t n, float eps, float* y);

// Exact GELU, y = 0.5·x·(1 + erf(x/√2)) (torch's approximate="none").
// The SIMD erf is a rational approximation within 4e-7 of erf (ATen's own
// vectorised erf is within 1.5e-7). y may alias x.
void Gelu(const float* x, float* y, size_t n);

// y = x·sigmoid(x). y may alias x.
void Silu(const float* x, float* y, size_t n);

// ELU with α = 1 (torch's nn.ELU()): y = x for x > 0, e^x − 1 otherwise (the SIMD e^x − 1 within
// 4 ulp of expm1, so small negative x keep their relative accuracy). y may alias x.
void Elu(const float* x, float* y, size_t n);

// y = max(x, 0). NaN inputs give an unspecified result. y may alias x.
void Relu(const float* x, float* y, size_t n);

// Gated linear unit: y = a ⊙ sigmoid(b) (torch's glu: a is the first half of
// the channels, b the second). y may alias a or b.
void Glu(const float* a, const float* b, float* y, size_t n);

// y = x ⊙ scale + shift, two roundings, no fused multiply-add: BatchNorm in
// eval form as torch computes it (scale = γ/sqrt(var + eps), shift = β −
// mean·scale, folded once). y may alias x.
void ScaleShift(const float* x, const float* scale, const float* shift, float* y, size_t n);

// Depthwise convolution over time with zero padding, output length t:
//   y[r, ch] = bias[ch] + Σ_{j<k} w[ch·k + j] · x[r − pad + j, ch]
// where x rows outside [0, t) are zero (pad = (k − 1)/2: PyTorch's
// Conv1d(c, c, k, padding=pad, groups=c)). x rows are ldx apart, y rows ldy
// apart; bias may be null; y must not alias x.
void DepthwiseConv1d(const float* x, size_t t, size_t ldx, size_t c, const float* w, size_t k, size_t pad,
                     const float* bias, float* y, size_t ldy);

// One output row of a 3×3 convolution with stride 2 and zero padding 1, one
// filter per output channel (PyTorch Conv2d(k=3, stride=2, padding=1) with
// groups = channels, or from a single input channel):
//   y[j, ch] = bias[ch] + Σ_{a<3} Σ_{b<3} w[ch·9 + 3a + b] · in_a(2j − 1 + b, ch)
// for j < ow = (width + 1)/2, y dense [ow, c]. in_a is input row 2i − 1 + a
// of `width` pixels: pixel p, channel ch at rows[a][p·pixel_stride +
// ch·channel_stride]; a null row, and pixels outside [0, width), are zero.
// channel_stride is 1 (channels last, depthwise) or 0 (one input channel
// shared by every filter: the first conv of the subsampling). bias may be null.
void Conv3x3Stride2Row(const float* const rows[3], size_t width, size_t pixel_stride, size_t channel_stride,
                       size_t c, const float* w, const float* bias, float* y);

namespace ref {
// The plain scalar versions, same contracts; sums and transcendental
// functions in double.
void LayerNorm(const float* x, const float* gamma, const float* beta, size_t n, float eps, float* y);
void Gelu(const float* x, float* y, size_t n);
void Silu(const float* x, float* y, size_t n);
void Elu(const float* x, float* y, size_t n);
void Relu(const float* x, float* y, size_t n);
void Glu(const float* a, const float* b, float* y, size_t n);
void ScaleShift(const float* x, const float* scale, const float* shift, float* y, size_t n);
void DepthwiseConv1d(const float* x, size_t t, size_t ldx, size_t c, const float* w, size_t k, size_t pad,
                     const float* bias, float* y, size_t ldy);
void Conv3x3Stride2Row(const float* const rows[3], size_t width, size_t pixel_stride, size_t channel_stride,
                       size_t c, const float* w, const float* bias, float* y);
}  // namespace ref

}  // namespace lfmvox::ops
