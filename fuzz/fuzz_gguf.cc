// Fuzzes the GGUF parser and every accessor of what it hands out, through the same code as the mmap path.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = lfmvox::GgufFile::OpenFromMemory(bytes, "fuzz.gguf");
  if (!file.ok()) return 0;
  const lfmvox::GgufFile& g = **file;
  unsigned sum = g.version() + g.alignment() + static_cast<unsigned>(g.data_offset());
  const lfmvox::GgufMetadata& md = g.metadata();
  for (const std::string& key : md.keys()) {
    const lfmvox::GgufValue* v = md.Find(key);
    if (v == nullptr || !md.Has(key)) __builtin_trap();  // keys() and Find() disagree
    sum += static_cast<unsigned>(v->ToString().size() + v->size());
    sum += md.GetU32(key).ok() + md.GetI32(key).ok() + md.GetU64(key).ok() + md.GetI64(key).ok();
    sum += md.GetF32(key).ok() + md.GetBool(key).ok() + md.GetString(key).ok();
    sum += md.GetIntArray(key).ok() + md.GetF32Array(key).ok() + md.GetStringArray(key).ok();
  }
  // Touch the first and last byte of every tensor: ASan flags any pointer that leaves the buffer.
  for (const lfmvox::GgufTensor& t : g.tensors()) {
    if (g.FindTensor(t.name) != &t || !g.GetTensor(t.name).ok()) __builtin_trap();
    if (t.bytes == 0) __builtin_trap();  // zero-element tensors are refused
    sum += t.data[0] + t.data[t.bytes - 1];
  }
  volatile unsigned sink = sum;
  (void)sink;
  return 0;
}
