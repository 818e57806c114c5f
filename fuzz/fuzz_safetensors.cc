// Fuzzes the safetensors header parser and every view it hands out, through the same code as the mmap path.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = lfmvox::SafetensorsFile::OpenFromMemory(bytes);
  if (!file.ok()) return 0;
  lfmvox::Checkpoint ck = lfmvox::Checkpoint::FromFile(std::move(file).value());
  // Touch the first and last byte of every tensor: ASan flags any view that leaves the buffer.
  unsigned sum = 0;
  for (const std::string& name : ck.Names()) {
    auto v = ck.Get(name, lfmvox::Shape{1});
    v = ck.Get(name);
    if (!v.ok()) __builtin_trap();  // Names() and Get() disagree
    const size_t n = v->bytes();
    if (n > 0) sum += static_cast<const uint8_t*>(v->data)[0] + static_cast<const uint8_t*>(v->data)[n - 1];
  }
  volatile unsigned sink = sum;
  (void)sink;
  return 0;
}
