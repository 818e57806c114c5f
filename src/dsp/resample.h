// Band-limited resampling, exactly torchaudio.functional.resample(x, orig, new) with its defaults
// (resampling_method "sinc_interp_hann", lowpass_filter_width 6, rolloff 0.99), the resampler the
// reference front end uses (LFM2.5-Audio spec §2.1).
//
// torchaudio's algorithm, for rates reduced by their gcd to O (in) and N (out):
//   base = min(O, N)·0.99, W = ceil(6·O/base);
//   phase j ∈ [0, N), tap i ∈ [0, 2W+O):
//     t = clamp((−j/N + (i−W)/O)·base, −6, 6),
//     k[j][i] = sinc(π t) · cos(π t / 12)² · base/O      (sinc(0) = 1);
//   y[q·N + j] = Σ_i k[j][i] · x[q·O + i − W]   (x is 0 outside [0, n)),
//   output length ceil(N·n / O).
// torchaudio evaluates the kernel in the waveform's dtype (`resample` passes waveform.dtype down to
// `_get_sinc_resample_kernel`), so for float32 audio every step above is float32 arithmetic, each Python
// float constant rounded to float32 first. The kernel here is built the same way, op for op. Only the
// convolution's summation order differs from torch's conv1d (it is accumulated in double here). Checked
// against the trace audio/wave_24k_resampled_16k: max abs error 8.9e-8 (2.2e-7 of the peak), 3028 of
// 8000 samples bit-exact; a kernel built in double and rounded, as spec §2.1 guessed, gives 1.2e-7 and
// 1951 exact samples. torch's float32 `t` carries an absolute error of about 2^-24·base, which is why its
// kernel (and so this one) strays from the ideal filter by up to ~1e-4 for large reduced rates such
// as 16001 -> 16000, and by ~1e-7 for 24000 -> 16000; being faithful means keeping that.
//
// Taps where |t| reaches the clamp are not stored: there torch's kernel is the constant
// sinc(6π)·cos(π/2)²·base/O, which in float32 is below 1e-20 (cos(π/2) rounds to −4.4e-8), so it adds
// nothing to any sum of finite audio. Storing only the |t| < 6 support keeps the kernel at about
// N·(12·O/base + 4) floats, small for any rate pair up to 1 MHz, where torch's kernel is N·(2W+O).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "base/status.h"

namespace lfmvox::dsp {

inline constexpr int kResampleLowpassFilterWidth = 6;  // torchaudio default: zero crossings per side
inline constexpr double kResampleRolloff = 0.99;       // torchaudio default: cutoff, fraction of Nyquist

class Resampler {
 public:
  // A resampler from orig_rate to new_rate (Hz, both ≥ 1). Equal rates give the identity. Fails with
  // OutOfRange when the kernel would exceed kMaxKernelFloats (not reachable for rates ≤ 1 MHz).
  static Result<Resampler> Create(int orig_rate, int new_rate);

  static constexpr size_t kMaxKernelFloats = size_t{1} << 26;  // 256 MiB

  int orig_rate() const { return orig_rate_; }
  int new_rate() const { return new_rate_; }
  bool identity() const { return taps_ == 0; }
  // Stored kernel size in floats ([phases, taps]); 0 for the identity.
  size_t kernel_floats() const { return kernel_.size(); }

  // ceil(new·n / orig) in reduced rates, torchaudio's output length (n for the identity).
  size_t OutputLength(size_t n) const;

  // out[OutputLength(in.size())] = resample(in). Allocates nothing. Returns InvalidArgument when out has
  // the wrong size.
  Status Process(std::span<const float> in, std::span<float> out) const;

 private:
  Resampler() = default;

  int orig_rate_ = 0, new_rate_ = 0;
  size_t orig_ = 1, new_ = 1;      // rates divided by their gcd
  size_t width_ = 0;               // W above
  size_t taps_ = 0;                // stored taps per phase
  std::vector<size_t> first_tap_;  // [new_]: torch tap index i of each phase's first stored tap
  std::vector<float> kernel_;      // [new_, taps_]: k[j][first_tap_[j] + q]
};

// One-shot convenience: builds a Resampler and returns the resampled signal, [ceil(new·n/orig)].
Result<std::vector<float>> Resample(std::span<const float> in, int orig_rate, int new_rate);

}  // namespace lfmvox::dsp
