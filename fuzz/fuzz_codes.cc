// Fuzzes the text codes parser. The first byte picks num_codebooks (0..65, so invalid counts are covered).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/codes_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int num_codebooks = data[0] % 66;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto r = lfmvox::ParseCodesText(text, num_codebooks);
  if (r.ok()) {
    // Invariants the detokenizer relies on.
    if (r->num_codebooks != num_codebooks || r->codes.empty() ||
        r->codes.size() != r->frames() * static_cast<size_t>(num_codebooks)) {
      __builtin_trap();
    }
    for (int32_t c : r->codes) {
      if (c < 0) __builtin_trap();
    }
  }
  return 0;
}
