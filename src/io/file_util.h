// Small file helpers shared by the readers in src/io (the regular-file reads
// themselves are base/file_read.h, shared with src/text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/file_read.h"
#include "base/status.h"

namespace lfmvox {

// A read-only private mapping of a whole regular file (the mapping keeps the
// file referenced; the descriptor is closed). An empty file has data null and
// size 0 (mmap refuses length 0; the parsers report the empty file). The
// caller munmaps data.
struct MappedFile {
  void* data = nullptr;
  size_t size = 0;
};
Result<MappedFile> MapReadOnly(const std::string& path);

}  // namespace lfmvox
