// Fuzzes audio input: ReadAudioMemory (libsndfile over virtual I/O: WAV, FLAC, Ogg, MP3, ...; FFmpeg over
// its AVIOContext for the rest: M4A, WebM, ADTS, ...), FFmpeg's decoder on every input directly (so its
// WAV/FLAC/Ogg demuxers are reached too, which ReadAudioMemory leaves to libsndfile), MixToMono, and for
// short clips the resampler and the log-mel front end. Any result must satisfy the invariants
// the encoder relies on; errors are fine.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <vector>

#include "io/audio_file.h"
#include "io/ffmpeg_audio.h"
#include "models/lfm25_audio/log_mel.h"

namespace {

lfmvox::LogMelFrontEnd& FrontEnd() {
  // The LFM2.5-Audio preprocessor (spec §1.2), built once.
  static lfmvox::LogMelFrontEnd* m = [] {
    lfmvox::LogMelConfig c;
    c.sample_rate = 16000;
    c.win_length = 400;
    c.hop_length = 160;
    c.n_fft = 512;
    c.n_mels = 128;
    auto r = lfmvox::LogMelFrontEnd::Create(c);
    if (!r.ok()) __builtin_trap();
    return new lfmvox::LogMelFrontEnd(std::move(r).value());
  }();
  return *m;
}

}  // namespace

// libvorbis (through libsndfile 1.2.0's Ogg reader) leaks its vorbis_info when a crafted Ogg stream
// fails to open (xiph/vorbis#125, libsndfile/libsndfile#922): a system library's bug, not lfmvox's.
// Only allocations made inside libvorbis are ignored; a SNDFILE that lfmvox failed to close would
// still be reported through libsndfile's own allocations.
extern "C" const char* __lsan_default_suppressions() { return "leak:libvorbis.so\n"; }

// FFmpeg's decoder read to the end (or past the sample cap): every block it gives must be within what was
// asked for, and the stream's format what it declared.
void DecodeWithFfmpeg(std::string_view bytes, int64_t max_samples) {
  auto d = lfmvox::OpenFfmpegDecoder(nullptr, bytes, "fuzz");
  if (!d.ok()) return;
  lfmvox::AudioDecoder& dec = **d;
  if (dec.sample_rate <= 0 || dec.channels <= 0) __builtin_trap();
  if (dec.channels > lfmvox::kMaxAudioChannels) return;
  constexpr int64_t kBlock = 4096;
  std::vector<float> buf(static_cast<size_t>(kBlock * dec.channels));
  for (int64_t total = 0; total * dec.channels <= max_samples;) {
    auto got = dec.Read(buf.data(), kBlock);
    if (!got.ok() || *got == 0) return;
    if (*got < 0 || *got > kBlock) __builtin_trap();
    total += *got;
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Limits small enough that one input cannot exhaust the fuzzer's memory (compressed formats expand a
  // few KB into millions of samples).
  lfmvox::AudioLimits limits;
  limits.max_seconds = 600;
  limits.max_samples = int64_t{1} << 20;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  DecodeWithFfmpeg(bytes, limits.max_samples);
  auto r = lfmvox::ReadAudioMemory(bytes, limits);
  if (!r.ok()) return 0;
  const lfmvox::AudioBuffer& a = *r;
  if (a.sample_rate < 1 || a.sample_rate > lfmvox::kMaxAudioSampleRate || a.channels < 1 ||
      a.channels > lfmvox::kMaxAudioChannels || a.samples.empty() ||
      a.samples.size() % static_cast<size_t>(a.channels) != 0 ||
      static_cast<int64_t>(a.samples.size()) > limits.max_samples) {
    __builtin_trap();
  }
  for (float x : a.samples) {
    if (!std::isfinite(x)) __builtin_trap();
  }
  const std::vector<float> mono = lfmvox::MixToMono(a);
  if (mono.size() != a.frames()) __builtin_trap();
  // The front end only on clips of at most 4 s at 16 kHz, after resampling (an 8 Hz file grows 2000x),
  // which keeps executions fast. Resample only when the kernel is small (reduced input rate ≤ 2000),
  // else take the samples as 16 kHz: building a kernel for a rate like 999983 Hz takes longer than a
  // fuzz iteration should.
  constexpr size_t kMaxSamples16k = 16000 * 4;
  const size_t rate = static_cast<size_t>(a.sample_rate);
  const bool resample = rate / std::gcd(rate, size_t{16000}) <= 2000;
  const size_t n16 = resample ? (mono.size() * 16000 + rate - 1) / rate : mono.size();
  if (n16 > kMaxSamples16k) return 0;
  lfmvox::MelFeatures mel;
  const lfmvox::Status s = resample ? FrontEnd().ComputeFromAudio(a, &mel) : FrontEnd().Compute(mono, &mel);
  if (!s.ok()) return 0;
  if (mel.valid_frames < 2 || mel.frames != mel.valid_frames + 1 || mel.mel.size() != 128 * mel.frames) {
    __builtin_trap();
  }
  for (size_t b = 0; b < 128; ++b) {
    for (size_t t = 0; t < mel.frames; ++t) {
      const float v = mel.mel[b * mel.frames + t];
      if (!std::isfinite(v) || (t >= mel.valid_frames && v != 0.0f)) __builtin_trap();
    }
  }
  return 0;
}
