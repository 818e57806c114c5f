// The audio formats libsndfile lacks, through Debian's FFmpeg libraries (libavformat demuxes,
// libavcodec decodes and encodes): M4A/MP4 (AAC, ALAC), WebM/Matroska (Opus, Vorbis), ADTS AAC,
// Ogg Speex, WMA, AC-3 and whatever else this FFmpeg decodes. audio_file.cc tries libsndfile first and
// comes here only for a file libsndfile does not recognise.
//
// Hostile input: FFmpeg only ever sees bytes through our own AVIOContext (a regular file already opened,
// or an in-memory image); it opens nothing else (a playlist or a reference to another file is refused),
// probes only what is given, and logs nothing (the log callback is silenced once per process, which
// also silences FFmpeg for a host program that links it).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "io/audio_file.h"

namespace lfmvox {

// Opens `file` (owned from here; a regular file, read from its current position) or, when file is null,
// the image `bytes` (which must outlive the decoder). `what` names the input in errors.
// InvalidArgument: not a format FFmpeg recognises with confidence, damaged headers, no audio stream;
// Unimplemented: an audio codec this FFmpeg cannot decode.
Result<std::unique_ptr<AudioDecoder>> OpenFfmpegDecoder(FILE* file, std::string_view bytes,
                                                        const std::string& what);

// Encoding through FFmpeg, mono: AAC-LC (FFmpeg's native encoder) in an MP4 (.m4a) file or an ADTS
// stream, and Opus (libopus) in WebM.
enum class FfmpegFormat { kM4aAac, kAdtsAac, kWebmOpus };

// Whether this FFmpeg encodes `format` at `sample_rate` (AAC: 7350 ... 96000 Hz; Opus: 8, 12, 16, 24,
// 48 kHz).
bool CanEncodeFfmpeg(FfmpegFormat format, int sample_rate);

class FfmpegWriter {
 public:
  // Writes into `file` (not owned; seekable for kM4aAac and kWebmOpus, whose index is written at Close)
  // or, when file is null, into *memory.
  static Result<FfmpegWriter> Create(FILE* file, std::string* memory, int sample_rate, FfmpegFormat format);
  FfmpegWriter(FfmpegWriter&&) noexcept;
  FfmpegWriter& operator=(FfmpegWriter&&) noexcept;
  ~FfmpegWriter();

  // Mono samples, with NaN -> 0 and clamped to [-1, 1] (FloatToS16's rule but for the rounding) before
  // the encoder sees them.
  Status Write(std::span<const float> samples);
  Status Close();  // flushes the encoder and finishes the container; idempotent

 private:
  struct Impl;
  explicit FfmpegWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A whole encoded file image in memory (ADTS AAC: the server's response_format "aac").
Result<std::string> EncodeFfmpegMemory(std::span<const float> mono, int sample_rate, FfmpegFormat format);

}  // namespace lfmvox
