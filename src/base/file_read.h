// Reading files named by users and model folders: regular files only (a
// directory, device or FIFO is refused by fstat before anything is read, and
// opening never blocks on a FIFO), and whole-file reads bounded by a size the
// caller states. Shared by every reader (io, text).
#pragma once

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

// "open X: No such file or directory" as NotFound, other errno values as IoError.
Status ErrnoStatus(const std::string& what, const std::string& path, int err);

}  // namespace lfmvox
