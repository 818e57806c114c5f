#include "models/lfm25_audio/log_mel.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include "dsp/resample.h"

namespace lfmvox {

namespace {

// ---- Filterbank and window, as the reference builds them ----

// librosa's Slaney mel scale (htk=False): linear below 1 kHz, logarithmic above.
constexpr double kMelFsp = 200.0 / 3;
constexpr double kMelMinLogHz = 1000.0;
constexpr double kMelMinLogMel = kMelMinLogHz / kMelFsp;
double MelLogStep() { return std::log(6.4) / 27.0; }

double HzToMel(double hz) {
  return hz >= kMelMinLogHz ? kMelMinLogMel + std::log(hz / kMelMinLogHz) / MelLogStep() : hz / kMelFsp;
}

double MelToHz(double mel) {
  return mel >= kMelMinLogMel ? kMelMinLogHz * std::exp(MelLogStep() * (mel - kMelMinLogMel)) : kMelFsp * mel;
}

// librosa.filters.mel(sr, n_fft, n_mels, fmin=0, fmax=sr/2, htk=False, norm="slaney", dtype=float32),
// step for step: the triangles in double, stored to float32, then scaled in double by the Slaney area
// normalisation 2 / (f[i+2] − f[i]) and stored to float32 again (numpy's `weights *= enorm` on a float32
// array). [n_mels, bins]
void BuildFilterbank(int sample_rate, int n_fft, int n_mels, float* fb) {
  const size_t bins = static_cast<size_t>(n_fft / 2 + 1);
  const size_t n_pts = static_cast<size_t>(n_mels) + 2;
  // np.fft.rfftfreq(n_fft, 1/sr): k · (1 / (n_fft · (1/sr))).
  const double df = 1.0 / (n_fft * (1.0 / sample_rate));
  // mel_frequencies: np.linspace(hz_to_mel(0), hz_to_mel(sr/2), n_mels + 2) (i·step + start, the last
  // point set to stop), then mel_to_hz.
  const double mel_lo = HzToMel(0.0), mel_hi = HzToMel(sample_rate / 2.0);
  const double step = (mel_hi - mel_lo) / static_cast<double>(n_pts - 1);
  std::vector<double> f(n_pts);  // [n_mels + 2] Hz
  for (size_t i = 0; i < n_pts; ++i)
    f[i] = MelToHz(i + 1 == n_pts ? mel_hi : static_cast<double>(i) * step + mel_lo);
  for (size_t i = 0; i < static_cast<size_t>(n_mels); ++i) {
    const double enorm = 2.0 / (f[i + 2] - f[i]);
    for (size_t k = 0; k < bins; ++k) {
      const double fk = static_cast<double>(k) * df;
      const double lower = -(f[i] - fk) / (f[i + 1] - f[i]);
      const double upper = (f[i + 2] - fk) / (f[i + 2] - f[i + 1]);
      const float w = static_cast<float>(std::max(0.0, std::min(lower, upper)));
      fb[i * bins + k] = static_cast<float>(static_cast<double>(w) * enorm);
    }
  }
}

// torch.hann_window(n, periodic=False) in float32, op for op:
//   arange(n).mul_(2π / (n − 1)).cos_().mul_(−0.5).add_(0.5), each double scalar rounded to float32.
void BuildWindow(int n, float* w) {
  const float c = static_cast<float>(2.0 * std::numbers::pi / static_cast<double>(n - 1));
  for (int i = 0; i < n; ++i) w[i] = std::cos(static_cast<float>(i) * c) * -0.5f + 0.5f;
  if (n == 1) w[0] = 1.0f;  // torch returns [1] for a single point
}

}  // namespace

namespace {

// Replaces `computed` by `stored` when that is the same table within tol · max|computed|.
Status UseStored(std::span<const float> stored, std::span<float> computed, double tol, const char* what,
                 const char* shape) {
  if (stored.empty()) return Status::Ok();
  if (stored.size() != computed.size()) {
    return InvalidArgument(
        StrFormat("the model file's %s has %zu values, but the config's front end needs %zu (%s)", what,
                  stored.size(), computed.size(), shape));
  }
  double peak = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < stored.size(); ++i) {
    peak = std::max(peak, std::fabs(static_cast<double>(computed[i])));
    const double d = std::fabs(static_cast<double>(stored[i]) - computed[i]);
    if (!(d <= worst)) {  // NaN counts as the worst
      worst = d;
      at = i;
    }
  }
  if (!(worst <= tol * peak)) {
    return InvalidArgument(
        StrFormat("the model file's %s differs from the one config.json's preprocessor implies by %g at "
                  "element %zu (of peak %g): the file was made for another front end",
                  what, worst, at, peak));
  }
  std::copy(stored.begin(), stored.end(), computed.begin());
  return Status::Ok();
}

}  // namespace

Result<LogMelFrontEnd> LogMelFrontEnd::Create(const LogMelConfig& config, const StoredMelTables& stored) {
  if (config.sample_rate < 1 || config.hop_length < 1 || config.win_length < 1 || config.n_mels < 1 ||
      config.win_length > config.n_fft) {
    return InvalidArgument(
        StrFormat("log-mel config: need sample_rate, hop, window, n_mels >= 1 and window <= "
                  "n_fft; got %d Hz, hop %d, window %d, n_fft %d, %d mels",
                  config.sample_rate, config.hop_length, config.win_length, config.n_fft, config.n_mels));
  }
  Result<dsp::RealFft> fft = dsp::RealFft::Create(static_cast<size_t>(config.n_fft));
  if (!fft.ok()) return fft.status().WithContext("log-mel n_fft");

  LogMelFrontEnd m;
  m.config_ = config;
  m.fft_.emplace(std::move(fft).value());
  const size_t bins = m.bins(), n_mels = static_cast<size_t>(config.n_mels);
  m.window_.Reset(static_cast<size_t>(config.win_length));
  BuildWindow(config.win_length, m.window_.data());
  m.filterbank_.Reset(n_mels * bins);
  BuildFilterbank(config.sample_rate, config.n_fft, config.n_mels, m.filterbank_.data());
  LFM_RETURN_IF_ERROR(
      UseStored(stored.window, {m.window_.data(), m.window_.size()}, 1e-3, "window", "[win_length]"));
  LFM_RETURN_IF_ERROR(UseStored(stored.filterbank, {m.filterbank_.data(), m.filterbank_.size()}, 1e-2,
                                "mel filterbank", "[n_mels, n_fft/2 + 1]"));
  // Each triangle is nonzero on one run of bins; the product skips the zeros (an empty row gives 0).
  m.fb_begin_.assign(n_mels, 0);
  m.fb_end_.assign(n_mels, 0);
  for (size_t i = 0; i < n_mels; ++i) {
    const float* row = m.filterbank_.data() + i * bins;
    size_t b = 0, e = bins;
    while (b < bins && row[b] == 0.0f) ++b;
    while (e > b && row[e - 1] == 0.0f) --e;
    m.fb_begin_[i] = b;
    m.fb_end_[i] = e;
  }
  m.frame_.Reset(static_cast<size_t>(config.n_fft));
  m.re_.Reset(bins);
  m.im_.Reset(bins);
  m.power_.Reset(bins);
  return m;
}

Status LogMelFrontEnd::Compute(std::span<const float> wave, MelFeatures* out) {
  const size_t n = wave.size();
  const size_t hop = static_cast<size_t>(config_.hop_length);
  const size_t n_fft = static_cast<size_t>(config_.n_fft);
  const size_t win = static_cast<size_t>(config_.win_length);
  const size_t bins = this->bins(), n_mels = static_cast<size_t>(config_.n_mels);
  const size_t frames = NumFrames(n), valid = ValidFrames(n);
  if (valid < 2) {
    return InvalidArgument(
        StrFormat("audio too short for the log-mel front end: %zu samples give %zu valid "
                  "frame(s), at least 2 are needed (%zu samples, %.0f ms at %d Hz)",
                  n, valid, 2 * hop, 2000.0 * hop / config_.sample_rate, config_.sample_rate));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!(std::fabs(wave[i]) <= kMelMaxAbsSample)) {  // also catches NaN
      return InvalidArgument(
          StrFormat("audio sample %zu is %g; samples must be finite and within +-%g (audio "
                    "is normally in [-1, 1])",
                    i, wave[i], kMelMaxAbsSample));
    }
  }
  out->frames = frames;
  out->valid_frames = valid;
  out->mel.resize(n_mels * frames);
  float* mel = out->mel.data();  // [n_mels, frames]

  // Pre-emphasised sample s (torch: x[1:] − 0.97·x[:−1], the constant rounded to float32); computed where
  // a frame needs it rather than stored, so Compute needs no [N] buffer. Identical values either way.
  const auto emph = [&](size_t s) { return s == 0 ? wave[0] : wave[s] - kMelPreemphasis * wave[s - 1]; };
  // torch.stft(center=True, pad_mode="constant"): frame f covers padded samples [f·hop, f·hop + n_fft)
  // of (n_fft/2 zeros, y, n_fft/2 zeros); the window sits at offset (n_fft − win)/2 of the frame.
  const ptrdiff_t win_start = static_cast<ptrdiff_t>((n_fft - win) / 2) - static_cast<ptrdiff_t>(n_fft / 2);
  float* frame = frame_.data();
  for (size_t f = 0; f < frames; ++f) {
    const ptrdiff_t s0 = static_cast<ptrdiff_t>(f * hop) + win_start;  // signal index of window tap 0
    std::fill(frame, frame + n_fft, 0.0f);
    for (size_t j = 0; j < win; ++j) {
      const ptrdiff_t s = s0 + static_cast<ptrdiff_t>(j);
      if (s >= 0 && s < static_cast<ptrdiff_t>(n))
        frame[(n_fft - win) / 2 + j] = emph(static_cast<size_t>(s)) * window_[j];
    }
    fft_->Forward(frame, re_.data(), im_.data());
    for (size_t k = 0; k < bins; ++k) {
      const float mag = std::sqrt(re_[k] * re_[k] + im_[k] * im_[k]);  // NeMo: sqrt(re² + im²), then ^2
      power_[k] = mag * mag;
    }
    for (size_t i = 0; i < n_mels; ++i) {
      const float* fb = filterbank_.data() + i * bins;
      double acc = 0.0;
      for (size_t k = fb_begin_[i]; k < fb_end_[i]; ++k) acc += static_cast<double>(fb[k]) * power_[k];
      mel[i * frames + f] = std::log(static_cast<float>(acc) + kMelLogGuard);
    }
  }

  // normalize_batch(per_feature): statistics over the L valid frames; the unbiased std plus epsilon
  // (a NaN std, possible only for L = 1, which is refused above, would become 0).
  for (size_t i = 0; i < n_mels; ++i) {
    float* row = mel + i * frames;
    double sum = 0.0;
    for (size_t t = 0; t < valid; ++t) sum += row[t];
    const float mean = static_cast<float>(sum) / static_cast<float>(valid);
    double sq = 0.0;
    for (size_t t = 0; t < valid; ++t) {
      const float d = row[t] - mean;
      sq += static_cast<double>(d) * d;
    }
    float std_dev = std::sqrt(static_cast<float>(sq) / (static_cast<float>(valid) - 1.0f));
    if (std::isnan(std_dev)) std_dev = 0.0f;
    std_dev += kMelStdEpsilon;
    for (size_t t = 0; t < valid; ++t) row[t] = (row[t] - mean) / std_dev;
    for (size_t t = valid; t < frames; ++t) row[t] = config_.pad_value;
  }
  return Status::Ok();
}

Status LogMelFrontEnd::ComputeFromAudio(const AudioBuffer& audio, MelFeatures* out) {
  std::vector<float> mono = MixToMono(audio);  // [frames]
  if (audio.sample_rate == config_.sample_rate) return Compute(mono, out);
  LFM_ASSIGN_OR_RETURN(std::vector<float> resampled,
                       dsp::Resample(mono, audio.sample_rate, config_.sample_rate));
  return Compute(resampled, out);
}

size_t Mel2EmbLen(size_t mel_frames, size_t subsampling_factor) {
  if (subsampling_factor == 0) return 0;
  return (mel_frames + subsampling_factor - 1) / subsampling_factor;
}

}  // namespace lfmvox
