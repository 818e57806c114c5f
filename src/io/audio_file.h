// Audio files.
//
// Reading: any format libsndfile decodes (WAV, FLAC, Ogg/Vorbis, Ogg/Opus, MP3, AIFF, ...) and, for
// what libsndfile does not recognise, any FFmpeg decodes (M4A/AAC, WebM/Opus, ...: io/ffmpeg_audio.h),
// from a path or from memory, or headerless PCM, into interleaved float32 samples; and the downmix to
// mono. The decoder is chosen by content, never by the file name. Resampling
// to the encoder's rate is dsp/resample.h, the log-mel front end model/features/log_mel.h.
//
// Writing: WAV (FLAC, Ogg/Opus, MP3) through libsndfile (streamed, frames appended as they are decoded) and
// raw little-endian PCM for `-o -`.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_write.h"
#include "base/status.h"
#include "lfmvox/audio_io.h"

struct sf_private_tag;  // libsndfile's SNDFILE, kept out of this header

namespace lfmvox {

// PcmFormat (kS16, kF32) is part of the public API: include/lfmvox/audio_io.h.

// ---- Reading ---------------------------------------------------------------------------------------

// Decoded audio. Sample values are what `soundfile.read(path, dtype="float32")` returns, because both
// go through libsndfile's sf_read_float with its default normalisation: integer PCM of b bits is
// x / 2^(b-1) (PCM16: x / 32768, so -32768 -> -1.0 and 32767 -> 0.999969...), float files keep their
// values (not clamped), lossy formats give the decoder's floats.
struct AudioBuffer {
  int sample_rate = 0;  // Hz
  int channels = 0;
  std::vector<float> samples;  // [frames, channels], interleaved

  size_t frames() const { return channels > 0 ? samples.size() / static_cast<size_t>(channels) : 0; }
};

// Limits on what a reader accepts. Every input is checked against them before and while it is decoded,
// so a hostile header (a declared length of 2^62 frames, 1000 channels) costs nothing.
inline constexpr int kMaxAudioSampleRate = 1000000;  // 1 MHz; anything higher is a corrupt header
inline constexpr int kMaxAudioChannels = 64;
struct AudioLimits {
  double max_seconds = 3600.0;             // a longer clip is an error (OutOfRange), never cut silently
  int64_t max_samples = int64_t{1} << 28;  // frames x channels: 1 GiB of float32
};

// A decoder read in blocks of interleaved float frames (libsndfile's or FFmpeg's).
class AudioDecoder {
 public:
  virtual ~AudioDecoder() = default;
  // Reads up to `frames` frames into `out` ([frames, channels]); 0 at the end. DataLoss when the
  // stream turns out to be damaged part way.
  virtual Result<int64_t> Read(float* out, int64_t frames) = 0;

  int sample_rate = 0;
  int channels = 0;
  // The frame count the container declares where it is reliable (not an estimate from the bitrate);
  // -1 when unknown.
  int64_t declared_frames = -1;
  // How many frames fewer than declared_frames a whole file may decode to (a codec's last frame and
  // priming); -1: any number (the declared count is an estimate).
  int64_t allowed_shortfall = 0;
};

// Opens a decoder on a regular file or on an in-memory image (`bytes` must outlive the decoder):
// libsndfile when it recognises the content, else FFmpeg. Errors as ReadAudioFile's below; the sample
// rate and channel count are checked against kMaxAudioSampleRate / kMaxAudioChannels.
Result<std::unique_ptr<AudioDecoder>> OpenAudioFile(const std::string& path);
Result<std::unique_ptr<AudioDecoder>> OpenAudioMemory(std::string_view bytes);

// Reads and decodes a whole file. Errors (never a crash):
//   NotFound     the path does not exist;
//   InvalidArgument  not audio / a format neither libsndfile nor FFmpeg decodes, a directory, sample rate
//   outside
//                [1, kMaxAudioSampleRate], channels outside [1, kMaxAudioChannels], no samples at all
//                (empty file, header only), or a NaN/Inf sample (refused rather than passed on: one NaN
//                would turn every normalised mel value of the clip into NaN);
//   DataLoss     the decoder failed part way, or fewer frames decode than the header declares (a cut
//                FLAC/Ogg file). Two documented exceptions, as libsndfile (and so soundfile, and so the
//                reference) reads them: a WAV/AIFF-style file whose data chunk is cut short is read up
//                to the end of the bytes present; an MP3 is read to its end (its declared length is an
//                estimate). Through FFmpeg a file may fall short of its container's length by two codec
//                frames (priming and the last partial frame), and a length estimated from the bitrate
//                (ADTS AAC) is not checked;
//   Unimplemented  an audio codec this FFmpeg cannot decode;
//   OutOfRange   longer than limits.max_seconds or more than limits.max_samples samples.
Result<AudioBuffer> ReadAudioFile(const std::string& path, const AudioLimits& limits = {});

// The same from an in-memory file image (libsndfile virtual I/O or an FFmpeg AVIOContext; `bytes` must
// outlive the call only).
Result<AudioBuffer> ReadAudioMemory(std::string_view bytes, const AudioLimits& limits = {});

// Headerless little-endian PCM: kS16 -> x / 32768 (as a PCM16 WAV reads), kF32 as stored. bytes.size()
// must be a whole, non-zero number of frames. Same rate, channel, NaN/Inf and length checks as above.
Result<AudioBuffer> FromRawPcm(std::span<const uint8_t> bytes, int sample_rate, int channels,
                               PcmFormat format, const AudioLimits& limits = {});

// Downmix rule: the mean of the channels, m[t] = (x[t,0] + ... + x[t,C-1]) / C, summed in channel order
// in float32 (numpy's and torch's `mean` over a short axis give the same). Mono input is copied as is.
// The reference pipeline only takes mono; this is how lfmvox gets there from a multichannel file.
// Returns [frames].
std::vector<float> MixToMono(const AudioBuffer& audio);

// ---- Writing ---------------------------------------------------------------------------------------

// The float -> s16 rule used everywhere: NaN -> 0, clamp to [-1, 1], then round to nearest (ties away from
// zero) of x * 32767. Symmetric: -1 -> -32767, +1 -> 32767; -32768 is never produced.
int16_t FloatToS16(float x);

// A WAV file written as audio is produced. The header is rewritten after every Write, so the file is
// valid (playable) at every point, even if the process dies before Close. f32 samples are stored as they
// are (no clamp).
class WavWriter {
 public:
  // sf_format: libsndfile's SF_FORMAT_* word for another container (FLAC, Ogg/Opus, MP3); 0: WAV of
  // `format`. kS16 samples are quantized by FloatToS16 before any encoder sees them. The file is an
  // OutputFile (base/file_write.h): `path` shows it only once Close succeeds.
  static Result<WavWriter> Create(const std::string& path, int sample_rate, int channels = 1,
                                  PcmFormat format = PcmFormat::kS16, int sf_format = 0);
  WavWriter(WavWriter&& o) noexcept;
  WavWriter& operator=(WavWriter&& o) noexcept;
  WavWriter(const WavWriter&) = delete;
  WavWriter& operator=(const WavWriter&) = delete;
  ~WavWriter();  // without a successful Close, discards the file: `path` stays as it was

  // Appends interleaved samples; samples.size() must be a multiple of channels(). Allocates nothing.
  Status Write(std::span<const float> samples);
  // Finalizes the file and makes it `path`. Idempotent; Write after Close is an error.
  Status Close();

  int channels() const { return channels_; }
  int64_t frames_written() const { return frames_written_; }

 private:
  WavWriter() = default;

  sf_private_tag* sf_ = nullptr;
  std::optional<OutputFile> out_;  // libsndfile writes its descriptor
  std::string path_;
  int channels_ = 1;
  PcmFormat format_ = PcmFormat::kS16;
  int64_t frames_written_ = 0;
  bool failed_ = false;  // Close failed: the file was discarded
};

// Encodes mono samples as a whole file image (libsndfile virtual I/O): `sf_format` is libsndfile's
// SF_FORMAT_* word (container | encoding). Unimplemented when this libsndfile cannot write it.
bool CanWriteAudioFormat(int sf_format, int sample_rate);
Result<std::string> WriteAudioMemory(std::span<const float> mono, int sample_rate, int sf_format);

// Writes samples as headerless little-endian s16 or f32 (whatever the host's byte order) and flushes, so
// a consumer on a pipe gets each chunk as soon as it is decoded. Allocates nothing.
Status WriteRawPcm(FILE* out, std::span<const float> samples, PcmFormat format);

}  // namespace lfmvox
