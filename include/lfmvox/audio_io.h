// File helpers for front ends: audio codes in, PCM out.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
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

// Where decoded PCM goes: a WAV file, or with path "-" raw little-endian
// samples on stdout, flushed per chunk. A WAV is all or nothing: it grows in a
// temporary file in the same folder, which a successful Close renames onto
// `path`; a failed Write or Close, or destruction without Close (a run that
// failed), removes it and leaves `path` as it was. One thread at a time.
// LoadCodes is safe from any thread.
class PcmOutput {
 public:
  static Result<std::unique_ptr<PcmOutput>> Open(const std::string& path, int sample_rate, PcmFormat format);
  virtual ~PcmOutput() = default;
  virtual Status Write(std::span<const float> samples) = 0;
  virtual Status Close() = 0;
};

}  // namespace lfmvox
LFMVOX_API_END
