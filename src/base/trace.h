// The trace hook: stages report intermediate tensors by their trace names
// (the oracle's, e.g. "layer3_out"), for parity tests and debugging.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string_view>

namespace lfmvox {

// Receives intermediate tensors by their trace names ("layer3_out"), for
// parity tests and debugging. A null sink costs one branch per boundary.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void Record(std::string_view name, const float* data, size_t rows, size_t cols, size_t ld) = 0;
};

// Records x under the name `fmt` formatted with `i` ("layer%zu_out"); a null sink costs one branch.
inline void TraceIndexed(TraceSink* sink, const char* fmt, size_t i, const float* x, size_t rows, size_t cols,
                         size_t ld) {
  if (sink == nullptr) return;
  char name[64];
  std::snprintf(name, sizeof name, fmt, i);
  sink->Record(name, x, rows, cols, ld);
}

}  // namespace lfmvox
