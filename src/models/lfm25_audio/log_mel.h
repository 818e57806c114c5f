// The audio front end of LFM2.5-Audio: waveform → normalised log-mel features (spec §2), NeMo's
// AudioToMelSpectrogramPreprocessor / FilterbankFeatures at inference, in float32 as the reference.
//
//   wave [N] (mono, config.sample_rate)
//   → pre-emphasis  y[0] = x[0], y[n] = x[n] − 0.97·x[n−1]
//   → STFT: center=True zero padding n_fft/2, hop, symmetric Hann(win_length) centred in n_fft
//     frames M = 1 + floor(N / hop)
//   → power |X|² computed as sqrt(re² + im²)², in that order (as NeMo; keeps the rounding)
//   → mel = FB · power, FB = librosa Slaney filterbank (htk=False, fmin 0, fmax sr/2, norm "slaney")
//   → log(mel + 2^-24)
//   → per mel bin, over the L = floor(N / hop) valid frames: (x − mean) / (unbiased std + 1e-5)
//   → frames t ≥ L set to pad_value (0): the last frame, always
//   mel [n_mels, M] row-major, and L (M mel frames, as in the docs/style.md legend).
//
// Differences from the reference are rounding only: the FFT is lfmvox's (dsp/fft.h), and the mel
// product and the normalisation statistics are accumulated in double.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "dsp/fft.h"
#include "io/audio_file.h"
#include "models/lfm25_audio/config.h"

namespace lfmvox {

// NeMo's pre-emphasis coefficient. Not a config key (liquid-audio's PreprocessorConfig has none), so the
// NeMo default applies [spec §1.2].
inline constexpr float kMelPreemphasis = 0.97f;
// log_zero_guard_type "add", log_zero_guard_value 2^-24 (NeMo defaults).
inline constexpr float kMelLogGuard = 5.960464477539063e-08f;
// Added to each mel bin's standard deviation before dividing (NeMo's CONSTANT).
inline constexpr float kMelStdEpsilon = 1e-5f;
// Largest |sample| Compute accepts. Audio is in [-1, 1] (a float file written without normalisation
// peaks near 32768); far beyond that the float32 power spectrum overflows to Inf and the normalised
// features become NaN, so such input is refused instead. At 1e6 every intermediate stays below 1e30
// for any window and FFT length up to 2^20.
inline constexpr float kMelMaxAbsSample = 1e6f;

struct MelFeatures {
  std::vector<float> mel;   // [n_mels, frames], row-major
  size_t frames = 0;        // M = 1 + floor(N / hop): what the encoder consumes (zeroed last frame included)
  size_t valid_frames = 0;  // L = floor(N / hop) = M − 1: the preprocessor's returned length
};

// Filterbank and window (immutable, built in Create) plus the FFT plan and per-frame scratch, so one
// front end serves one thread at a time.
// A filterbank ([n_mels, bins]) and window ([win_length]) a model file stores; empty spans: none.
struct StoredMelTables {
  std::span<const float> filterbank;
  std::span<const float> window;
};

class LogMelFrontEnd {
 public:
  // Fails if n_fft is not a length dsp::RealFft supports (even, n/2 = 2^a·3^b·5^c) or win_length > n_fft.
  // A stored table is used in place of the computed one after a check that it is the same table
  // (within 1e-3 of the window's peak, 1e-2 of the filterbank's: F16 storage passes, another window
  // shape or mel scale fails); InvalidArgument names the largest difference otherwise.
  static Result<LogMelFrontEnd> Create(const LogMelConfig& config, const StoredMelTables& stored = {});

  LogMelFrontEnd(LogMelFrontEnd&&) = default;
  LogMelFrontEnd& operator=(LogMelFrontEnd&&) = default;

  const LogMelConfig& config() const { return config_; }
  size_t bins() const { return static_cast<size_t>(config_.n_fft / 2 + 1); }
  // torch.hann_window(win_length, periodic=False) in float32, [win_length].
  std::span<const float> window() const { return window_.span(); }
  // librosa.filters.mel(..., norm="slaney") as float32, [n_mels, bins].
  std::span<const float> filterbank() const { return filterbank_.span(); }

  size_t NumFrames(size_t samples) const { return 1 + samples / static_cast<size_t>(config_.hop_length); }
  size_t ValidFrames(size_t samples) const { return samples / static_cast<size_t>(config_.hop_length); }

  // Features of a mono waveform at config().sample_rate. Errors (InvalidArgument): fewer than
  // 2·hop_length samples (L < 2: the unbiased std needs two frames; the reference raises for L = 1
  // and returns all pad_value for L = 0), or a sample that is NaN, Inf or beyond ±kMelMaxAbsSample.
  // Allocates only when out->mel must grow (to n_mels·F floats); the per-frame work runs in the
  // scratch made by Create.
  Status Compute(std::span<const float> wave, MelFeatures* out);

  // A decoded file end to end: MixToMono, then dsp::Resampler to config().sample_rate when the rates
  // differ, then Compute. Allocates per clip: the mono copy, the resampled signal and the resampling
  // kernel (this is once per clip, not per frame).
  Status ComputeFromAudio(const AudioBuffer& audio, MelFeatures* out);

 private:
  LogMelFrontEnd() = default;

  LogMelConfig config_;
  AlignedBuffer<float> window_;            // [win_length]
  AlignedBuffer<float> filterbank_;        // [n_mels, bins]
  std::vector<size_t> fb_begin_, fb_end_;  // [n_mels]: each row's nonzero bins are [begin, end)
  std::optional<dsp::RealFft> fft_;        // n_fft points (optional only because RealFft has no empty state)
  AlignedBuffer<float> frame_;             // [n_fft]: one windowed frame
  AlignedBuffer<float> re_;                // [bins]
  AlignedBuffer<float> im_;                // [bins]
  AlignedBuffer<float> power_;             // [bins]
};

// Positions an audio clip takes in the LLM: T' = ceil(M / subsampling_factor) for M mel frames
// (liquid-audio's mel2emb_len(l) = −(l // −8), with the encoder's subsampling_factor 8; its docstring
// says floor, the formula is ceil). A factor of 0 (an invalid config) gives 0.
size_t Mel2EmbLen(size_t mel_frames, size_t subsampling_factor);

}  // namespace lfmvox
