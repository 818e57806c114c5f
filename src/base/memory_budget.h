// The memory budget for allocations whose size comes from a file (a config, a
// header, an upload): such a size is checked against this limit before
// anything is allocated, and the error says how much was asked and why.
//
// The limit is the machine's physical memory, or LFMVOX_MEMORY_LIMIT when set
// (bytes, with an optional K, M or G suffix: "512M", "8G").
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/status.h"

namespace lfmvox {

// The limit in bytes (never 0).
inline size_t MemoryBudgetBytes() {
  if (const char* env = std::getenv("LFMVOX_MEMORY_LIMIT"); env && *env) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(env, &end, 10);
    unsigned long long scale = 1;
    if (end && (*end == 'K' || *end == 'k')) scale = 1ull << 10, ++end;
    if (end && (*end == 'M' || *end == 'm')) scale = 1ull << 20, ++end;
    if (end && (*end == 'G' || *end == 'g')) scale = 1ull << 30, ++end;
    if (errno == 0 && end && *end == '\0' && env[0] != '-' && v > 0 && v <= SIZE_MAX / scale) {
      return static_cast<size_t>(v * scale);
    }
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 &&
      static_cast<unsigned long long>(pages) <= SIZE_MAX / static_cast<size_t>(page)) {
    return static_cast<size_t>(pages) * static_cast<size_t>(page);
  }
  return size_t{1} << 34;  // 16 GiB when the system does not say
}

// "1.50 GiB", "12.0 MiB", "512 bytes".
inline std::string FormatBytes(double b) {
  if (b >= double(1ull << 30)) return StrFormat("%.2f GiB", b / double(1ull << 30));
  if (b >= double(1ull << 20)) return StrFormat("%.1f MiB", b / double(1ull << 20));
  return StrFormat("%.0f bytes", b);
}

// OutOfRange when `bytes` exceed the budget: "<what> needs N (<why>), more than the memory limit of M ...".
inline Status CheckMemoryBudget(double bytes, const std::string& what, const std::string& why) {
  const size_t limit = MemoryBudgetBytes();
  if (bytes <= static_cast<double>(limit)) return Status::Ok();
  return OutOfRange(StrFormat(
      "%s needs %s (%s), more than the memory limit of %s (the machine's memory, or "
      "LFMVOX_MEMORY_LIMIT); %s",
      what.c_str(), FormatBytes(bytes).c_str(), why.c_str(), FormatBytes(static_cast<double>(limit)).c_str(),
      "check the config's sizes or raise LFMVOX_MEMORY_LIMIT"));
}

}  // namespace lfmvox
