// File helpers for front ends: audio codes in, PCM out.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lfmvox/status.h"
#include "lfmvox/visibility.h"

LFMVOX_API_BEGIN
namespace lfmvox {

// Sample encoding for written PCM: 16-bit integer or 32-bit float.
enum class PcmFormat { kS16, kF32 };

// Reads audio codes, frame-major [frames, num_codebooks]: a text file (one
// frame of num_codebooks integers per line) or a .npy array [num_codebooks, T]
// as the official code holds them.
Result<std::vector<int32_t>> LoadCodes(const std::string& path, int num_codebooks);

// Where decoded PCM goes: an audio file, or with path "-" raw little-endian
// samples on stdout, flushed per chunk. The container follows the extension:
// .flac (16-bit), .ogg or .opus (Ogg/Opus), .mp3, .m4a (AAC in MP4), .aac
// (ADTS AAC) (all from 16-bit-range input; InvalidArgument with kF32,
// Unimplemented where CanEncodeAudio says no), anything else WAV of `format`. A regular file is all or
// nothing: it grows in a uniquely named hidden file in the same folder, which a successful Close flushes to
// disk and renames onto `path` (a symlink's target, the link kept; an existing file's mode kept); a failed
// Write or Close, or destruction without Close (a run that failed), removes it and leaves `path` as it was.
// A device or FIFO is never replaced: it receives the whole file at Close (a FIFO is opened by Open, which
// waits for its reader). A full disk, /dev/full or a reader that goes away is an error naming the path. One
// thread at a time. LoadCodes is safe from any thread.
class PcmOutput {
 public:
  static Result<std::unique_ptr<PcmOutput>> Open(const std::string& path, int sample_rate, PcmFormat format);
  virtual ~PcmOutput() = default;
  virtual Status Write(std::span<const float> samples) = 0;
  virtual Status Close() = 0;
};

// ---- Audio in memory (for servers: uploads in, encoded replies out). Thread-safe (no shared state).

// A decoded clip: interleaved [frames, channels] floats, as Conversation::AddAudio takes them.
struct DecodedAudio {
  int sample_rate = 0;
  int channels = 0;
  std::vector<float> samples;
  double seconds() const {
    return sample_rate > 0 && channels > 0 ? static_cast<double>(samples.size() / channels) / sample_rate : 0;
  }
};

// Decodes an audio file image held in memory (any format AddAudioFile reads: WAV, FLAC, Ogg Vorbis/Opus,
// MP3, AIFF through libsndfile; M4A/AAC, WebM/Opus, ADTS AAC and the rest of what FFmpeg decodes). Errors:
// InvalidArgument for bytes that are not audio (or hold NaN/Inf samples), DataLoss for a cut file, OutOfRange
// for a clip longer than `max_seconds` (checked from the header before decoding, and while decoding where the
// length is not known).
Result<DecodedAudio> DecodeAudio(std::string_view bytes, double max_seconds);

// Containers EncodeAudio writes (16-bit for WAV and FLAC); kAac is an ADTS AAC-LC stream (FFmpeg's
// encoder, 96 kb/s), the rest libsndfile's.
enum class AudioFileFormat { kWav, kFlac, kOpus, kMp3, kAac };

// Whether this build can write `format` at `sample_rate` (Opus needs 8/12/16/24/48 kHz, MP3 a libsndfile
// built with LAME, AAC one of the AAC rates: 8, 11.025, 12, 16, 22.05, 24, 32, 44.1, 48 kHz, ...).
bool CanEncodeAudio(AudioFileFormat format, int sample_rate);

// Encodes mono samples as a whole file image in memory. The samples are first quantized to 16 bits by
// AppendPcmBytes' rule (so WAV and FLAC hold exactly the s16 values raw PCM would).
// Unimplemented when CanEncodeAudio says no; InvalidArgument for no samples or a bad rate.
Result<std::string> EncodeAudio(std::span<const float> mono, int sample_rate, AudioFileFormat format);

// Headerless little-endian PCM bytes, with the rule `-o -` uses (s16: NaN -> 0, clamp to [-1, 1],
// round(x * 32767) to nearest, ties away from zero), appended to `out`.
void AppendPcmBytes(std::span<const float> samples, PcmFormat format, std::string* out);

}  // namespace lfmvox
LFMVOX_API_END
