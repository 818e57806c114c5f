// Real-input FFT of even length n = 2^a·3^b·5^c, in float32.
//
// The real transform of length n runs a complex FFT of length m = n/2 on the
// even/odd samples packed as z[j] = x[2j] + i·x[2j+1], plus the standard
// split step that separates the two half-length spectra. The complex FFT is a
// mixed-radix (4, 2, 3, 5) Stockham autosort on split re/im arrays: every
// stage reads one buffer and writes the other in natural order, so there is
// no bit-reversal pass, and each stage is vectorised over contiguous elements
// (Highway, dispatched at run time for the CPU).
//
// Twiddles are computed in double once, at plan creation, and rounded to
// float. Transforms allocate nothing: the plan owns its scratch, so one plan
// must not be used by two threads at once (give each thread its own plan).
#pragma once

#include <cstddef>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"

namespace lfmvox::dsp {

namespace fft_internal {

// One Stockham stage: radix-point butterflies over sub-transforms of length
// len, stored as stride = m/len interleaved sequences.
struct Stage {
  size_t radix;
  size_t len;
  size_t stride;
  size_t twiddle_offset;  // into Plan::tw_re/tw_im: [radix − 1, len/radix]
};

// What a transform reads, and its scratch; filled by RealFft::Create.
struct Plan {
  size_t n = 0;
  size_t m = 0;  // n / 2, the complex length
  std::vector<Stage> stages;
  AlignedBuffer<float> tw_re, tw_im;        // per-stage twiddles w^{q·k}, see Stage
  AlignedBuffer<float> split_re, split_im;  // [m]: e^{-2πi·k/n}, for the split step
  AlignedBuffer<float> buf;                 // [4, m]: re, im of buffer A, then of B
};

}  // namespace fft_internal

class RealFft {
 public:
  // A plan for n points. Fails unless n is even, n ≥ 2, and n/2 has no prime
  // factor other than 2, 3 and 5.
  static Result<RealFft> Create(size_t n);

  RealFft(RealFft&&) = default;
  RealFft& operator=(RealFft&&) = default;

  size_t size() const { return plan_.n; }
  size_t bins() const { return plan_.n / 2 + 1; }

  // Unnormalised forward transform, numpy.fft.rfft:
  //   X[k] = Σ_j x[j]·e^{-2πi·jk/n},  k = 0 … n/2.
  // in: [n]; re, im: [n/2 + 1] each. im[0] and im[n/2] are written as 0.
  void Forward(const float* in, float* re, float* im);

  // Inverse transform, numpy.fft.irfft(X, n) with norm="backward":
  //   x[j] = (1/n)·Σ_{k=0}^{n-1} X[k]·e^{2πi·jk/n},  X[n-k] = conj(X[k]),
  // so im[0] and im[n/2] are ignored (they cannot belong to a real signal).
  // re, im: [n/2 + 1] each; out: [n]. out must not alias re or im.
  void Inverse(const float* re, const float* im, float* out);

 private:
  RealFft() = default;
  fft_internal::Plan plan_;
};

}  // namespace lfmvox::dsp
