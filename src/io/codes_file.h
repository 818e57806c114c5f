// Audio codes for `lfmvox detokenize --codes FILE`: frames of one code per codebook.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lfmvox {

// More frames than this (2^24 frames: weeks of audio at 12.5 frames/s) is taken as a malformed file.
inline constexpr size_t kMaxCodeFrames = size_t{1} << 24;
inline constexpr int kMaxCodebooks = 64;

struct CodeFrames {
  int num_codebooks = 0;
  std::vector<int32_t> codes;  // [T, num_codebooks], frame-major; every value in [0, INT32_MAX]
  size_t frames() const { return num_codebooks > 0 ? codes.size() / static_cast<size_t>(num_codebooks) : 0; }
};

// Text codes: one frame per line, num_codebooks non-negative decimal integers separated by whitespace or a
// comma; blank lines and '#' comments (to the end of the line) are ignored. Errors name the line number.
// Only the format is checked here; whether a code is below the codebook size is the detokenizer's check.
Result<CodeFrames> ParseCodesText(std::string_view text, int num_codebooks);

// A .npy file (recognised by its magic, whatever the name) holds integer codes [num_codebooks, T] or
// [1, num_codebooks, T], codebook-major as the reference code holds them; they are transposed to frame-major.
// Anything else is read as text (ParseCodesText).
Result<CodeFrames> ReadCodesFile(const std::string& path, int num_codebooks);

}  // namespace lfmvox
