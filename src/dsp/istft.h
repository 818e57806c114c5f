// Inverse STFT with "same" padding (Vocos' ISTFT, as the LFM2.5 detokenizer
// uses it), from log-magnitude and phase frames:
//   S_t    = exp(log_mag_t)·(cos φ_t + i·sin φ_t)            [n_fft/2 + 1] bins
//   f_t    = irfft(S_t, n_fft) · window                       [n_fft], 1/n_fft scaling
//   y[n]   = Σ_t f_t[n − hop·t],  env[n] = Σ_t window²[n − hop·t]
//   pcm    = (y / env)[pad : len − pad],  pad = (n_fft − hop)/2,
//   len    = (N − 1)·hop + n_fft,  so N frames give N·hop samples.
//
// Precision: everything is float32, like the torch reference. The FFT's
// error is O(ε·log n) relative (1.2e-7 RMS measured for n = 1280) and the
// polar conversion within 2e-7 of |S|; against the oracle traces the PCM is
// within 4e-7 of its peak (tolerance 1e-4), an SNR of about 134 dB.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "dsp/fft.h"

namespace lfmvox::dsp {

// The streaming form: state is one n_fft-sample overlap-add buffer and its
// envelope, plus counters. Sample n receives only frames t ≤ n/hop, so
// pushing frame t completes samples [hop·t, hop·(t+1)); of those,
// the first `pad` samples of the stream are dropped (the "same" trim), so the
// first frames emit fewer than hop samples. Flush emits the pad samples that
// the batch output keeps after the last frame. The concatenated output is
// bit for bit the batch output (IstftBatch): the same float operations run in
// the same order.
//
// The streaming contract of every stage: Step takes the next frame and writes
// what became final, Flush writes what is held back and leaves the stream
// fresh, Reset drops the stream. One object per stream (it owns its FFT
// scratch). Init allocates; Step, Flush and Reset do not.
class StreamingIstft {
 public:
  StreamingIstft() = default;
  StreamingIstft(StreamingIstft&&) = default;
  StreamingIstft& operator=(StreamingIstft&&) = default;

  // n_fft: supported by RealFft (even, n_fft/2 = 2^a·3^b·5^c); 1 ≤ hop ≤ n_fft
  // with n_fft − hop even; window: [n_fft] (the checkpoint's istft.window),
  // copied. Fails if the window envelope falls to 1e-11 or below anywhere in
  // the kept output (where the reference would divide by ~0); a failed Init
  // leaves the object as it was.
  Status Init(size_t n_fft, size_t hop, std::span<const float> window);

  size_t n_fft() const { return n_fft_; }
  size_t hop() const { return hop_; }
  size_t bins() const { return n_fft_ / 2 + 1; }
  // Samples trimmed at each end of the stream; also the most Flush emits.
  size_t pad() const { return (n_fft_ - hop_) / 2; }
  // The most samples one Step or Flush writes: max(hop, pad).
  size_t max_output() const { return hop_ > pad() ? hop_ : pad(); }
  size_t frames_pushed() const { return frames_; }

  // Takes one frame: log_mag and phase, [bins()] each. Writes the samples that
  // became final (between 0 and hop) to out, which must hold hop() floats, and
  // returns their count. Requires a successful Init.
  int Step(const float* log_mag, const float* phase, float* out);

  // Ends the stream: writes the last pad() samples to out, which must hold
  // pad() floats, returns their count, and resets the stream. Fewer come out
  // when the stream is so short that the initial trim reaches into them, and
  // none when no frame was pushed.
  int Flush(float* out);

  // Starts a new stream (zero buffers and counters).
  void Reset();

  // The windowed inverse FFT of one frame, irfft(S)·window, into frame:
  // [n_fft]. Uses the scratch but leaves the stream state alone.
  void SynthesizeFrame(const float* log_mag, const float* phase, float* frame);

 private:
  // Writes ola_[i] / env_[i] for buffer positions i < count to out, skipping what is
  // left of the initial trim; returns the number written.
  int Emit(size_t count, float* out);

  size_t n_fft_ = 0;
  size_t hop_ = 0;
  std::optional<RealFft> fft_;
  AlignedBuffer<float> window_;     // [n_fft]
  AlignedBuffer<float> window_sq_;  // [n_fft]: window²
  AlignedBuffer<float> spec_re_;    // [bins]: Re S of the current frame
  AlignedBuffer<float> spec_im_;    // [bins]: Im S
  AlignedBuffer<float> frame_;      // [n_fft]: windowed irfft of the current frame
  // Overlap-add state: position i holds stream sample hop·frames_ + i. After
  // each frame the hop finished samples leave and the rest shift down; a
  // shifted buffer (rather than a modular ring) keeps every add one
  // contiguous, vectorisable loop, and the shift costs about as much as one
  // such loop.
  AlignedBuffer<float> ola_;  // [n_fft]: Σ windowed frames
  AlignedBuffer<float> env_;  // [n_fft]: Σ window²
  size_t frames_ = 0;         // frames pushed since the last Reset/Flush
  size_t to_drop_ = 0;        // samples of the initial trim not yet dropped
};

// Everything the batch form computes, for parity tests against the traces.
struct IstftBatchOutput {
  std::vector<float> frames;    // [N, n_fft]: windowed irfft frames
  std::vector<float> ola;       // [(N−1)·hop + n_fft]: y before the trim
  std::vector<float> envelope;  // [(N−1)·hop + n_fft]: env before the trim
  std::vector<float> pcm;       // [N·hop]: (y / env)[pad : len − pad]
};

// The whole sequence at once: a plain reference that shares the per-frame
// code with StreamingIstft. Frame t's bins are log_mag[t·frame_stride + k] and
// phase[t·frame_stride + k] for k < n_fft/2 + 1 (frame_stride = 1282 with
// phase = log_mag + 641 reads the detokenizer head's rows directly).
Result<IstftBatchOutput> IstftBatch(const float* log_mag, const float* phase, size_t frame_stride,
                                    size_t n_frames, size_t n_fft, size_t hop, std::span<const float> window);

}  // namespace lfmvox::dsp
