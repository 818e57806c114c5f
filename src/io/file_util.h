// Small file helpers shared by the readers in src/io.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace lfmvox {

// Reads a whole (small) file. Files larger than `max_bytes` are refused with OutOfRange rather than read,
// so a wrong path (a device, a multi-GB file) cannot exhaust memory.
Result<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes);

// Opens a regular file read-only: the descriptor (the caller closes it) and
// its size. A directory, device or pipe is InvalidArgument.
struct OpenedFile {
  int fd = -1;
  uint64_t size = 0;
};
Result<OpenedFile> OpenRegularFile(const std::string& path);

// A read-only private mapping of a whole regular file (the mapping keeps the
// file referenced; the descriptor is closed). An empty file has data null and
// size 0 (mmap refuses length 0; the parsers report the empty file). The
// caller munmaps data.
struct MappedFile {
  void* data = nullptr;
  size_t size = 0;
};
Result<MappedFile> MapReadOnly(const std::string& path);

// "open X: No such file or directory" as NotFound, other errno values as IoError.
Status ErrnoStatus(const std::string& what, const std::string& path, int err);

}  // namespace lfmvox
