#include "dsp/istft.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "dsp/polar.h"

namespace lfmvox::dsp {
namespace {

// LA's detokenizer asserts env > 1e-11 on the kept region before dividing.
constexpr float kMinEnvelope = 1e-11f;

}  // namespace

Status StreamingIstft::Init(size_t n_fft, size_t hop, std::span<const float> window) {
  if (hop == 0 || hop > n_fft || (n_fft - hop) % 2 != 0) {
    return InvalidArgument(StrFormat(
        "iSTFT: hop = %zu must be in [1, n_fft = %zu] with n_fft - hop even (the trim is (n_fft - hop)/2 "
        "samples at each end)",
        hop, n_fft));
  }
  if (window.size() != n_fft) {
    return InvalidArgument(StrFormat("iSTFT: the window has %zu values but n_fft is %zu; they must match",
                                     window.size(), n_fft));
  }
  for (size_t i = 0; i < n_fft; ++i) {
    if (!std::isfinite(window[i])) {
      return InvalidArgument(StrFormat("iSTFT: window[%zu] is not finite", i));
    }
  }
  Result<RealFft> fft = RealFft::Create(n_fft);
  if (!fft.ok()) return fft.status().WithContext("iSTFT");

  // Where the envelope is smallest: stream sample n is part of the output of
  // an N-frame stream iff N ≥ ⌊(n − pad)/hop⌋ + 1, and more frames only add
  // w² ≥ 0, so the shortest such stream is the worst case. From n = n_fft on, the first
  // frame no longer reaches n and the pattern repeats with period hop.
  const size_t pad = (n_fft - hop) / 2;
  for (size_t n = pad; n < n_fft + hop; ++n) {
    const size_t frames = (n - pad) / hop + 1;
    float env = 0.0f;
    for (size_t t = 0; t < frames && t * hop <= n; ++t) {
      const size_t i = n - t * hop;
      if (i < n_fft) env += window[i] * window[i];
    }
    if (!(env > kMinEnvelope)) {
      return InvalidArgument(StrFormat(
          "iSTFT: the window's overlap-add envelope at output sample %zu is %g (must exceed 1e-11); with hop "
          "%zu this window does not cover the signal",
          n - pad, static_cast<double>(env), hop));
    }
  }

  n_fft_ = n_fft;
  hop_ = hop;
  fft_ = std::move(fft).value();
  window_.Reset(n_fft);
  window_sq_.Reset(n_fft);
  for (size_t i = 0; i < n_fft; ++i) {
    window_[i] = window[i];
    window_sq_[i] = window[i] * window[i];
  }
  spec_re_.Reset(bins());
  spec_im_.Reset(bins());
  frame_.Reset(n_fft);
  ola_.Reset(n_fft);
  env_.Reset(n_fft);
  Reset();
  return Status::Ok();
}

void StreamingIstft::Reset() {
  ola_.Zero();
  env_.Zero();
  frames_ = 0;
  to_drop_ = pad();
}

void StreamingIstft::SynthesizeFrame(const float* log_mag, const float* phase, float* frame) {
  PolarToRect(log_mag, phase, bins(), spec_re_.data(), spec_im_.data());
  fft_->Inverse(spec_re_.data(), spec_im_.data(), frame);
  const float* w = window_.data();
  for (size_t i = 0; i < n_fft_; ++i) frame[i] *= w[i];
}

int StreamingIstft::Emit(size_t count, float* out) {
  const size_t skip = to_drop_ < count ? to_drop_ : count;
  to_drop_ -= skip;
  const float* y = ola_.data();
  const float* env = env_.data();
  for (size_t i = skip; i < count; ++i) out[i - skip] = y[i] / env[i];
  return static_cast<int>(count - skip);
}

int StreamingIstft::Step(const float* log_mag, const float* phase, float* out) {
  SynthesizeFrame(log_mag, phase, frame_.data());
  float* y = ola_.data();
  float* env = env_.data();
  const float* f = frame_.data();
  const float* w2 = window_sq_.data();
  for (size_t i = 0; i < n_fft_; ++i) {
    y[i] += f[i];
    env[i] += w2[i];
  }
  // Buffer positions [0, hop) get no later frame: they are final.
  const int emitted = Emit(hop_, out);
  const size_t keep = n_fft_ - hop_;
  std::memmove(y, y + hop_, keep * sizeof(float));
  std::memmove(env, env + hop_, keep * sizeof(float));
  std::memset(y + keep, 0, hop_ * sizeof(float));
  std::memset(env + keep, 0, hop_ * sizeof(float));
  ++frames_;
  return emitted;
}

int StreamingIstft::Flush(float* out) {
  // The batch output ends pad samples before the last frame's end, i.e.
  // n_fft − hop − pad = pad samples into the buffer.
  const int emitted = frames_ == 0 ? 0 : Emit(n_fft_ - hop_ - pad(), out);
  Reset();
  return emitted;
}

Result<IstftBatchOutput> IstftBatch(const float* log_mag, const float* phase, size_t frame_stride,
                                    size_t n_frames, size_t n_fft, size_t hop,
                                    std::span<const float> window) {
  if (n_frames == 0) return InvalidArgument("IstftBatch: needs at least one frame");
  StreamingIstft istft;
  LFM_RETURN_IF_ERROR(istft.Init(n_fft, hop, window));
  if (frame_stride < istft.bins()) {
    return InvalidArgument(StrFormat("IstftBatch: frame_stride %zu is shorter than a frame (%zu bins)",
                                     frame_stride, istft.bins()));
  }
  const size_t len = (n_frames - 1) * hop + n_fft;
  IstftBatchOutput r;
  r.frames.resize(n_frames * n_fft);
  r.ola.assign(len, 0.0f);
  r.envelope.assign(len, 0.0f);
  // Same operations, in the same order, as Step: frames are added in
  // time order onto zero, so every sum matches the streaming one bit for bit.
  for (size_t t = 0; t < n_frames; ++t) {
    float* f = r.frames.data() + t * n_fft;
    istft.SynthesizeFrame(log_mag + t * frame_stride, phase + t * frame_stride, f);
    float* y = r.ola.data() + t * hop;
    float* env = r.envelope.data() + t * hop;
    for (size_t i = 0; i < n_fft; ++i) {
      y[i] += f[i];
      env[i] += window[i] * window[i];
    }
  }
  const size_t pad = istft.pad();
  r.pcm.resize(n_frames * hop);
  for (size_t n = 0; n < r.pcm.size(); ++n) r.pcm[n] = r.ola[pad + n] / r.envelope[pad + n];
  return r;
}

}  // namespace lfmvox::dsp
