// Builds GGUF version 3 files (see io/gguf.h for the layout), for converters, tests and fuzz seeds.
//
// The output is laid out as ggml's own writer does: header, KVs in the order they were added, tensor infos in
// the order they were added, zero padding to the alignment, then each tensor's data followed by zero padding
// to the alignment. So tensor i's offset is the sum of the padded sizes of tensors 0..i-1.
//
// Every Add* validates its input and returns the error at once (a duplicate key or tensor name, a shape
// that does not match the data); the builder is unchanged by a failed call.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "io/gguf.h"

namespace lfmvox {

class GgufWriter {
 public:
  GgufWriter() = default;
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Sets the alignment (a power of two, 1 .. kGgufMaxAlignment) and adds the u32 KV "general.alignment" at
  // this point of the KV order. It is written whenever set explicitly, even to the default 32, so the file
  // says what its writer meant; without a call no key is written and readers use 32. At most once.
  // AddU32("general.alignment", a) is the same call.
  Status SetAlignment(uint32_t alignment);
  uint32_t alignment() const { return alignment_; }

  Status AddU8(std::string_view key, uint8_t v);
  Status AddI8(std::string_view key, int8_t v);
  Status AddU16(std::string_view key, uint16_t v);
  Status AddI16(std::string_view key, int16_t v);
  Status AddU32(std::string_view key, uint32_t v);
  Status AddI32(std::string_view key, int32_t v);
  Status AddU64(std::string_view key, uint64_t v);
  Status AddI64(std::string_view key, int64_t v);
  Status AddF32(std::string_view key, float v);
  Status AddF64(std::string_view key, double v);
  Status AddBool(std::string_view key, bool v);
  Status AddString(std::string_view key, std::string_view v);

  Status AddArrayI32(std::string_view key, const std::vector<int32_t>& v);
  Status AddArrayU32(std::string_view key, const std::vector<uint32_t>& v);
  Status AddArrayI64(std::string_view key, const std::vector<int64_t>& v);
  Status AddArrayF32(std::string_view key, const std::vector<float>& v);
  Status AddArrayString(std::string_view key, const std::vector<std::string>& v);
  // Any scalar element type: `packed` holds n elements little-endian back to back (bools as bytes 0/1).
  Status AddArrayRaw(std::string_view key, GgufValueType element_type, std::string_view packed, uint64_t n);
  // A value as a reader returned it, in its own type (copying a file's metadata, edited or not).
  Status Add(std::string_view key, const GgufValue& v);

  // A tensor of `ggml_type` with shape `ne` (ggml order, ne[0] fastest; 1 to 4 dims, each >= 1, ne[0] a
  // multiple of the type's block). `data` must hold exactly the bytes the type and shape need. The data is
  // NOT copied: the caller keeps it alive and unchanged until the last Write / WriteToMemory.
  Status AddTensor(std::string_view name, uint32_t ggml_type, std::vector<uint64_t> ne,
                   std::string_view data);

  // Writes the file as an OutputFile (base/file_write.h): a reader never sees a half-written file, two
  // writers to one path leave one complete file, and on failure `path` is left as it was.
  Status Write(const std::string& path) const;
  Result<std::string> WriteToMemory() const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type = 0;
    std::vector<uint64_t> ne;
    std::string_view data;
  };

  Status CheckKey(std::string_view key) const;
  // Appends key, type and the already serialized value; the key was checked.
  void Emit(std::string_view key, GgufValueType type, std::string_view value);
  Status AddScalar(std::string_view key, GgufValueType type, uint64_t bits);
  // Header, KVs, tensor infos and the padding after them.
  std::string Preamble() const;

  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t n_kv_ = 0;
  std::string kv_bytes_;  // the serialized KVs, in insertion order
  std::set<std::string, std::less<>> keys_;
  std::vector<Tensor> tensors_;
  std::set<std::string, std::less<>> tensor_names_;
};

}  // namespace lfmvox
