// GGUF (versions 2 and 3) files, read through a read-only mmap.
//
// Layout (all little-endian): "GGUF" · u32 version · u64 tensor_count · u64 kv_count · kv_count KVs
// (string key · u32 value type · value) · tensor_count tensor infos (string name · u32 n_dims ·
// u64 ne[n_dims] · u32 ggml type · u64 offset) · zero padding to the alignment · the data blob. Strings are
// u64 length + bytes (no NUL). Tensor offsets are relative to the blob. Versions 2 and 3 share this layout;
// version 1 (u32 counts and lengths) is refused.
//
// Every field is validated on parse, so a GgufTensor handed out later lies inside the file and has the size
// its type and shape say. The file must not be truncated or rewritten while it is mapped (SIGBUS territory,
// which no parser can prevent). Counts and lengths are checked against the bytes left before anything is
// allocated from them, so a hostile file costs at most a small multiple of its own size in memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"

namespace lfmvox {

// ggml tensor types (ggml.h's enum ggml_type). Ids 4 and 5 (the removed Q4_2/Q4_3) and the ones not listed
// are unknown to lfmvox; files using them are refused as Unimplemented.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

// "Q4_0" etc.; "unknown" for an id lfmvox does not know.
const char* GgmlTypeName(uint32_t type);
// Elements and bytes per block (1 and the element size for plain types), as ggml's type traits. False for an
// unknown id (the outputs are then untouched).
bool GgmlTypeBlock(uint32_t type, size_t* block_elems, size_t* block_bytes);

// Metadata value types (gguf.h's enum gguf_type).
enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// "u32", "string", "array" etc.; "unknown" for other ids.
const char* GgufValueTypeName(uint32_t type);
// Bytes of one scalar on disk; 0 for string, array and unknown ids.
size_t GgufScalarSize(GgufValueType type);

// Limits. Keys: the GGUF spec caps them at 65535 bytes. Strings: real values (chat templates, merges) are a
// few KB at most. Alignment: ggml's default is 32; a MiB is far beyond any real file.
inline constexpr uint64_t kGgufMaxKeyBytes = 65535;
inline constexpr uint64_t kGgufMaxStringBytes = 16ull << 20;
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint32_t kGgufMaxAlignment = 1u << 20;
inline constexpr size_t kGgufMaxTensorName = 63;  // ggml's GGML_MAX_NAME (64) less the NUL
inline constexpr int kGgufMaxDims = 4;

// One metadata value: a scalar, or an array of scalars or of strings.
//
// Nested arrays (an array whose elements are arrays) are refused by the parser with Unimplemented: ggml
// itself refuses them and no known writer emits them, so supporting them would only widen the attack surface.
class GgufValue {
 public:
  GgufValue() = default;
  // Scalars. Integers keep their on-disk type; signed ones are stored sign-extended.
  static GgufValue Integer(GgufValueType type, uint64_t bits);
  static GgufValue Float(GgufValueType type, double v);  // kF32 or kF64
  static GgufValue Bool(bool v);
  static GgufValue String(std::string v);
  // An array of n scalars of `element_type`, `packed` holding them little-endian back to back.
  static GgufValue ScalarArray(GgufValueType element_type, std::vector<uint8_t> packed);
  static GgufValue StringArray(std::vector<std::string> v);

  GgufValueType type() const { return type_; }
  // The elements' type for an array, type() for a scalar.
  GgufValueType element_type() const { return element_type_; }
  bool is_array() const { return type_ == GgufValueType::kArray; }
  // Element count for an array, 1 for a scalar.
  size_t size() const;

  // Scalars. ToInt64/ToUint64: an integer (not bool) scalar whose value fits; false otherwise.
  bool ToInt64(int64_t* out) const;
  bool ToUint64(uint64_t* out) const;
  bool ToDouble(double* out) const;  // f32 or f64 scalar
  bool bool_value() const { return bits_ != 0; }
  const std::string& string_value() const { return string_; }

  // Arrays. Element i of an integer array as int64 (false if not an integer array, i out of range, or a
  // u64 above INT64_MAX); of a float array as double.
  bool IntAt(size_t i, int64_t* out) const;
  bool DoubleAt(size_t i, double* out) const;
  std::span<const uint8_t> packed() const { return packed_; }           // scalar arrays, little-endian
  const std::vector<std::string>& strings() const { return strings_; }  // string arrays

  // A short human-readable form ("u32 16", "string \"lfm2\"", "array<i32>[16] {0, 0, 8, ...}") for dumps.
  std::string ToString(size_t max_elements = 8) const;

 private:
  GgufValueType type_ = GgufValueType::kU8;
  GgufValueType element_type_ = GgufValueType::kU8;
  uint64_t bits_ = 0;  // integer and bool scalars
  double float_ = 0;   // f32 and f64 scalars
  std::string string_;
  std::vector<uint8_t> packed_;
  std::vector<std::string> strings_;
};

// The metadata KVs of one file, in file order. The getters return NotFound for a missing key,
// InvalidArgument for a value of another type and OutOfRange for an integer that does not fit; messages name
// the key, the type found and the file.
class GgufMetadata {
 public:
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  const GgufValue* Find(std::string_view key) const;              // null if absent
  const std::vector<std::string>& keys() const { return keys_; }  // file order
  size_t size() const { return keys_.size(); }

  // Integer getters take any integer type whose value fits: ggml writers differ (u32 vs i32 for the same
  // key), so the on-disk width is not part of the contract.
  Result<uint32_t> GetU32(std::string_view key) const;
  Result<int32_t> GetI32(std::string_view key) const;
  Result<uint64_t> GetU64(std::string_view key) const;
  Result<int64_t> GetI64(std::string_view key) const;
  Result<float> GetF32(std::string_view key) const;  // f32, or f64 rounded to f32
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string> GetString(std::string_view key) const;
  Result<std::vector<int64_t>> GetIntArray(std::string_view key) const;  // any integer element type
  Result<std::vector<float>> GetF32Array(std::string_view key) const;    // f32 or f64 elements
  Result<std::vector<std::string>> GetStringArray(std::string_view key) const;

  // Builders, for the parser. Add refuses a key already present (DataLoss: ggml refuses duplicates too).
  Status Add(std::string key, GgufValue value);
  void set_source(std::string source) { source_ = std::move(source); }  // the file name used in messages

 private:
  Result<const GgufValue*> Get(std::string_view key) const;
  Status WrongType(std::string_view key, const GgufValue& v, const char* wanted) const;

  std::string source_ = "<memory>";
  std::vector<std::string> keys_;
  std::map<std::string, GgufValue, std::less<>> values_;
};

struct GgufTensor {
  std::string name;
  int n_dims = 0;
  std::array<uint64_t, 4> ne = {1, 1, 1, 1};  // ggml order: ne[0] is the contiguous dimension; unused = 1
  uint32_t type = 0;                          // a GgmlType id
  uint64_t offset = 0;                        // relative to the data blob; a multiple of the alignment
  uint64_t bytes = 0;                         // ne[0] / block · block bytes · ne[1] · ne[2] · ne[3]
  uint64_t elements = 0;                      // ne[0] · ne[1] · ne[2] · ne[3], <= INT64_MAX
  const uint8_t* data = nullptr;              // into the parsed image
};

struct GgufHeader {
  uint32_t version = 0;
  uint32_t alignment = kGgufDefaultAlignment;
  uint64_t data_offset = 0;  // where the data blob starts in the file
  GgufMetadata metadata;
  std::vector<GgufTensor> tensors;  // file order
};

// Parses and validates a complete in-memory GGUF image (`file` is the whole file, so every tensor's bytes can
// be checked to lie inside it). This is the one parser: the mmap path and the fuzz target use it. The
// tensors' data pointers point into `file`.
Result<GgufHeader> ParseGguf(std::string_view file);

// One .gguf file. Immutable after Open; safe to read from many threads.
class GgufFile {
 public:
  static Result<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Copies `bytes` into an owned, 64-byte aligned buffer and parses it with the same code as Open.
  static Result<std::unique_ptr<GgufFile>> OpenFromMemory(std::string_view bytes,
                                                          std::string name = "<memory>");
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return header_.version; }
  uint32_t alignment() const { return header_.alignment; }
  uint64_t data_offset() const { return header_.data_offset; }
  const GgufMetadata& metadata() const { return header_.metadata; }
  const std::vector<GgufTensor>& tensors() const { return header_.tensors; }  // file order
  const GgufTensor* FindTensor(std::string_view name) const;                  // null if absent
  Result<const GgufTensor*> GetTensor(std::string_view name) const;  // NotFound names the tensor and file
  const std::string& path() const { return path_; }
  // The file's read-only mapping (Open), empty for OpenFromMemory's copy.
  std::span<const std::byte> mapping() const { return {static_cast<const std::byte*>(map_), map_size_}; }

 private:
  GgufFile() = default;
  Status Init(const void* base, size_t size);

  std::string path_;
  void* map_ = nullptr;  // mmap'd region (Open), or null
  size_t map_size_ = 0;
  AlignedBuffer<std::byte> owned_;  // OpenFromMemory's copy
  GgufHeader header_;
  std::map<std::string, size_t, std::less<>> by_name_;  // index into header_.tensors
};

}  // namespace lfmvox
