// Audio files. Writing: WAV through libsndfile (streamed, frames appended as they are decoded) and raw
// little-endian PCM for `-o -`.
//
// Reading (decode any libsndfile format, downmix, resample to the encoder's 16 kHz) is not here yet: it
// belongs in this file as `Result<AudioBuffer> ReadAudioFile(path, target_sample_rate)` when the audio
// encoder lands.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "base/status.h"
#include "lfmvox/audio_io.h"

struct sf_private_tag;  // libsndfile's SNDFILE, kept out of this header

namespace lfmvox {

// PcmFormat (kS16, kF32) is part of the public API: include/lfmvox/audio_io.h.

// The float -> s16 rule used everywhere: NaN -> 0, clamp to [-1, 1], then round to nearest (ties away from
// zero) of x * 32767. Symmetric: -1 -> -32767, +1 -> 32767; -32768 is never produced.
int16_t FloatToS16(float x);

// A WAV file written as audio is produced. The header is rewritten after every Write, so the file is
// valid (playable) at every point, even if the process dies before Close. f32 samples are stored as they
// are (no clamp).
class WavWriter {
 public:
  static Result<WavWriter> Create(const std::string& path, int sample_rate, int channels = 1,
                                  PcmFormat format = PcmFormat::kS16);
  WavWriter(WavWriter&& o) noexcept;
  WavWriter& operator=(WavWriter&& o) noexcept;
  WavWriter(const WavWriter&) = delete;
  WavWriter& operator=(const WavWriter&) = delete;
  ~WavWriter();  // closes if Close was not called (errors then go unreported)

  // Appends interleaved samples; samples.size() must be a multiple of channels(). Allocates nothing.
  Status Write(std::span<const float> samples);
  // Finalizes the file. Idempotent; Write after Close is an error.
  Status Close();

  int channels() const { return channels_; }
  int64_t frames_written() const { return frames_written_; }

 private:
  WavWriter() = default;

  sf_private_tag* sf_ = nullptr;
  std::string path_;
  int channels_ = 1;
  PcmFormat format_ = PcmFormat::kS16;
  int64_t frames_written_ = 0;
};

// Writes samples as headerless little-endian s16 or f32 (whatever the host's byte order) and flushes, so
// a consumer on a pipe gets each chunk as soon as it is decoded. Allocates nothing.
Status WriteRawPcm(FILE* out, std::span<const float> samples, PcmFormat format);

}  // namespace lfmvox
