#include "dsp/resample.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <utility>

namespace lfmvox::dsp {

namespace {

// torchaudio's kernel tap k[j][i] in float32, op for op as `_get_sinc_resample_kernel` computes it for a
// float32 waveform (each Python float constant is rounded to float32 by torch's scalar promotion):
//   idx = arange(−W, W+O) / O;  t = arange(0, −N, −1) / N + idx;  t *= base;  t.clamp_(−6, 6)
//   window = cos(t·π / 6 / 2)²;  t *= π;  k = where(t == 0, 1, sin(t)/t);  k *= window·(base/O)
float KernelTap(size_t j, size_t i, size_t orig, size_t neww, size_t width, double base) {
  const float lw = static_cast<float>(kResampleLowpassFilterWidth);
  const float pi = static_cast<float>(std::numbers::pi);
  // arange(−W, W+O) holds exact integers in float32 (|i − W| < 2^24 for every accepted rate).
  const float idx = static_cast<float>(static_cast<ptrdiff_t>(i) - static_cast<ptrdiff_t>(width)) /
                    static_cast<float>(orig);
  float t = -static_cast<float>(j) / static_cast<float>(neww) + idx;
  t *= static_cast<float>(base);
  t = std::clamp(t, -lw, lw);
  const float tp = t * pi;
  const float c = std::cos(tp / lw / 2.0f);
  const float window = c * c;  // torch's pow(x, 2) is x·x
  const float sinc = tp == 0.0f ? 1.0f : std::sin(tp) / tp;
  return sinc * (window * static_cast<float>(base / static_cast<double>(orig)));
}

}  // namespace

Result<Resampler> Resampler::Create(int orig_rate, int new_rate) {
  if (orig_rate < 1 || new_rate < 1) {
    return InvalidArgument(
        StrFormat("cannot resample from %d Hz to %d Hz: rates must be positive", orig_rate, new_rate));
  }
  Resampler r;
  r.orig_rate_ = orig_rate;
  r.new_rate_ = new_rate;
  if (orig_rate == new_rate) return r;  // torchaudio returns the waveform itself

  const size_t g = std::gcd(static_cast<size_t>(orig_rate), static_cast<size_t>(new_rate));
  const size_t o = static_cast<size_t>(orig_rate) / g;
  const size_t n = static_cast<size_t>(new_rate) / g;
  // Python: base_freq = min(orig, new) * rolloff; width = ceil(lowpass_filter_width * orig / base_freq).
  const double base = static_cast<double>(std::min(o, n)) * kResampleRolloff;
  const double reach = kResampleLowpassFilterWidth * static_cast<double>(o) / base;  // taps with |t| < 6
  const size_t width = static_cast<size_t>(std::ceil(reach));
  const size_t torch_taps = 2 * width + o;

  // Phase j's unclamped support is i − W ∈ (O·j/N − reach, O·j/N + reach); one tap of margin on each
  // side covers float32 rounding of t near ±6 (a margin tap holds the clamped value, as in torch).
  // Checked before anything is allocated: at most 2·reach + 4 taps per phase.
  if (static_cast<double>(n) * (2.0 * reach + 4.0) > static_cast<double>(kMaxKernelFloats)) {
    return OutOfRange(
        StrFormat("resampling %d Hz -> %d Hz needs a kernel of %zu phases x %.0f taps, over the "
                  "%zu-float limit",
                  orig_rate, new_rate, n, 2.0 * reach + 4.0, kMaxKernelFloats));
  }
  std::vector<size_t> first(n), last(n);  // [n]: first and one-past-last stored tap of each phase
  size_t taps = 0;
  for (size_t j = 0; j < n; ++j) {
    const double center = static_cast<double>(width) + static_cast<double>(o * j) / static_cast<double>(n);
    const double lo = std::max(0.0, std::floor(center - reach) - 1.0);
    const double hi = std::min(static_cast<double>(torch_taps), std::ceil(center + reach) + 2.0);
    first[j] = static_cast<size_t>(lo);
    last[j] = static_cast<size_t>(hi);
    taps = std::max(taps, last[j] - first[j]);
  }
  r.orig_ = o;
  r.new_ = n;
  r.width_ = width;
  r.taps_ = taps;
  // Row j holds torch taps first[j] .. last[j]−1; the rest of the row stays 0 (dropped clamped taps, or
  // positions past torch's last tap 2W+O−1).
  r.kernel_.assign(n * taps, 0.0f);
  for (size_t j = 0; j < n; ++j) {
    for (size_t i = first[j]; i < last[j]; ++i)
      r.kernel_[j * taps + (i - first[j])] = KernelTap(j, i, o, n, width, base);
  }
  r.first_tap_ = std::move(first);
  return r;
}

size_t Resampler::OutputLength(size_t n) const {
  if (identity()) return n;
  // torchaudio: int(math.ceil(new_freq * length / orig_freq)); exact in integers here.
  return (new_ * n + orig_ - 1) / orig_;
}

Status Resampler::Process(std::span<const float> in, std::span<float> out) const {
  if (out.size() != OutputLength(in.size())) {
    return InvalidArgument(StrFormat("Resampler::Process: output has %zu samples, %zu expected", out.size(),
                                     OutputLength(in.size())));
  }
  if (identity()) {
    std::copy(in.begin(), in.end(), out.begin());
    return Status::Ok();
  }
  const ptrdiff_t n_in = static_cast<ptrdiff_t>(in.size());
  const ptrdiff_t taps = static_cast<ptrdiff_t>(taps_);
  for (size_t m = 0; m < out.size(); ++m) {
    const size_t q = m / new_, j = m % new_;
    const float* k = kernel_.data() + j * taps_;
    // Input index of the phase's first stored tap: q·O + first − W (may be negative near the start).
    const ptrdiff_t s0 = static_cast<ptrdiff_t>(q * orig_ + first_tap_[j]) - static_cast<ptrdiff_t>(width_);
    const ptrdiff_t lo = std::max<ptrdiff_t>(0, -s0), hi = std::min(taps, n_in - s0);
    double acc = 0.0;
    for (ptrdiff_t i = lo; i < hi; ++i) acc += static_cast<double>(k[i]) * in[static_cast<size_t>(s0 + i)];
    out[m] = static_cast<float>(acc);
  }
  return Status::Ok();
}

Result<std::vector<float>> Resample(std::span<const float> in, int orig_rate, int new_rate) {
  LFM_ASSIGN_OR_RETURN(const Resampler r, Resampler::Create(orig_rate, new_rate));
  std::vector<float> out(r.OutputLength(in.size()));  // [ceil(new·n/orig)]
  LFM_RETURN_IF_ERROR(r.Process(in, out));
  return out;
}

}  // namespace lfmvox::dsp
