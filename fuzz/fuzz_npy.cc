// Fuzzes the .npy parser and the conversions callers use on what it accepts.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto a = lfmvox::ParseNpy(bytes);
  if (!a.ok()) return 0;
  const int64_t n = a->elements();
  if (n < 0 || static_cast<uint64_t>(n) * lfmvox::DTypeSize(a->dtype) != a->bytes.size()) __builtin_trap();
  if (n <= (1 << 20)) {
    volatile size_t sink = a->ToFloat().size();
    // Float to integer conversion of NaN or huge values is undefined, so ToInt64 is for integer arrays.
    if (a->dtype == lfmvox::DType::kI32 || a->dtype == lfmvox::DType::kI64) sink = a->ToInt64().size();
    (void)sink;
  }
  return 0;
}
