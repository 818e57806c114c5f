// NumPy .npy files (format 1.0/2.0, little-endian, C order): the oracle traces
// and `lfmvox detokenize --codes x.npy`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tensor/tensor.h"

namespace lfmvox {

struct NpyArray {
  DType dtype = DType::kF32;  // f4, f8, i4, i8 (little-endian) are supported
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // raw element data, C order

  int64_t elements() const;
  // Values converted to float / int64 (any supported dtype).
  std::vector<float> ToFloat() const;
  std::vector<int64_t> ToInt64() const;
};

// Parses an in-memory .npy image; every field is validated.
Result<NpyArray> ParseNpy(std::string_view data);
// A regular file of at most kMaxNpyFileBytes (traces, code files), read whole.
inline constexpr uint64_t kMaxNpyFileBytes = uint64_t{1} << 30;
Result<NpyArray> ReadNpy(const std::string& path);
// Writes f32 or i64 data with the given shape, all or nothing (base/file_write.h).
Status WriteNpy(const std::string& path, const NpyArray& array);

}  // namespace lfmvox
