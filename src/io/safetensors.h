// Safetensors checkpoints, read through a read-only mmap, and a small writer.
//
// Format: u64-LE header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]},
// "__metadata__": {str: str}}, then the data area; offsets are relative to the data area. Every field is
// validated on open, so a TensorView handed out later always lies inside the file and has the size its
// dtype and shape say. The file must not be truncated or rewritten while it is mapped (that is SIGBUS
// territory, which no parser can prevent).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "tensor/tensor.h"

namespace lfmvox {

// Larger headers are refused: real ones are a few hundred KB even for thousands of tensors.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the data area, begin <= end
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;                     // 8 + N: where the data area starts in the file
  std::vector<SafetensorsEntry> tensors;        // sorted by begin (then name)
  std::map<std::string, std::string> metadata;  // "__metadata__", may be empty
};

// Parses and validates the header of a complete in-memory safetensors image (`file` is the whole file,
// so the data area's size is known). This is the one parser: the mmap path and the fuzz target use it.
Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view file);

// One .safetensors file. Immutable after Open; safe to read from many threads.
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Copies `bytes` into an owned buffer and parses it with the same code as Open.
  static Result<std::unique_ptr<SafetensorsFile>> OpenFromMemory(std::string_view bytes,
                                                                 std::string name = "<memory>");
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  bool Has(std::string_view name) const;
  Result<TensorView> Get(std::string_view name) const;  // NotFound names the tensor and the file
  std::vector<std::string> Names() const;               // sorted
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }
  // The file's read-only mapping (Open), empty for OpenFromMemory's copy.
  std::span<const std::byte> mapping() const { return {static_cast<const std::byte*>(map_), map_size_}; }

 private:
  SafetensorsFile() = default;
  // Validates the header and builds the tensor views over [base, base + size).
  Status Init(const void* base, size_t size);

  std::string path_;
  void* map_ = nullptr;  // mmap'd region (Open), or null
  size_t map_size_ = 0;
  AlignedBuffer<std::byte> owned_;  // OpenFromMemory's copy
  // Tensors whose offset in the file is not a multiple of their element size are copied here, so every
  // view is naturally aligned (the format pads the header to 8 bytes, so this is rare).
  std::vector<AlignedBuffer<std::byte>> realigned_;
  std::map<std::string, TensorView, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint: one safetensors file or a sharded set. Immutable after Open, movable, shareable across
// threads; the views it hands out live as long as the Checkpoint.
class Checkpoint {
 public:
  // `path` may be
  //   - a .safetensors file,
  //   - a directory holding model.safetensors.index.json (sharded: {"weight_map": {name: shard file}},
  //     shard files relative to the index's directory), or a path to such an index file,
  //   - a directory holding model.safetensors.
  // In a sharded set the weight map is authoritative: every listed tensor must be in its shard, each shard
  // is opened once, and tensors a shard holds but the map does not list are not exposed.
  static Result<Checkpoint> Open(const std::string& path);
  // A checkpoint over one already opened file (tests, fuzzing, in-memory images).
  static Checkpoint FromFile(std::unique_ptr<SafetensorsFile> file);
  // A checkpoint over views another reader made (a GGUF release presented under its Hugging Face
  // names): every view must point into memory that `owner` keeps alive.
  // `mapped`: the read-only file mappings among that memory (see Derived).
  static Checkpoint FromViews(std::string path, std::map<std::string, TensorView, std::less<>> tensors,
                              std::shared_ptr<const void> owner,
                              std::vector<std::span<const std::byte>> mapped = {});

  Checkpoint(Checkpoint&&) = default;
  Checkpoint& operator=(Checkpoint&&) = default;

  bool Has(std::string_view name) const;
  Result<TensorView> Get(std::string_view name) const;  // NotFound names the tensor
  // Also checks the shape; the message names the tensor, its shape and the expected one.
  Result<TensorView> Get(std::string_view name, const Shape& expected) const;
  std::vector<std::string> Names() const;  // sorted
  const std::string& path() const { return path_; }

  // Owned bytes derived from a tensor at load time (a weight matrix repacked
  // for the kernels): the first call with `key` maps `bytes` bytes (64-byte
  // aligned, on transparent huge pages where the kernel grants them), fills
  // them with fill(dst) and keeps them as long as the checkpoint (they move
  // with it); every later call with that key returns the same bytes without
  // calling fill. Safe to call from several threads. OutOfMemory (nothing kept) when the kernel
  // refuses the mapping.
  Result<const uint8_t*> Derived(std::string_view key, size_t bytes,
                                 const std::function<void(uint8_t*)>& fill) const;
  // Hands the whole pages inside [p, p + n) back to the kernel when they lie
  // in one of the checkpoint's read-only file mappings (madvise
  // MADV_DONTNEED: they leave this process's resident set and are read from
  // the file again if touched), so that a tensor copied by Derived is not
  // resident twice; elsewhere (heap copies, OpenFromMemory) nothing.
  void ReleasePages(const void* p, size_t n) const;
  // The bytes Derived holds, in all.
  size_t DerivedByteCount() const;

 private:
  Checkpoint() = default;
  // An anonymous mapping from a 2 MiB boundary (transparent huge pages where
  // the kernel grants them: a repacked matrix streams through fewer TLB
  // entries and longer physically contiguous runs than 4 KiB heap pages).
  struct DerivedBytes {
    DerivedBytes() = default;
    DerivedBytes(const DerivedBytes&) = delete;
    DerivedBytes& operator=(const DerivedBytes&) = delete;
    ~DerivedBytes();
    uint8_t* data = nullptr;
    size_t size = 0;    // the bytes asked for
    size_t mapped = 0;  // the bytes mapped
  };
  struct DerivedStore {
    std::mutex mu;
    std::map<std::string, DerivedBytes, std::less<>> buffers;
  };

  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;  // unique_ptr: views stay valid when moved
  std::shared_ptr<const void> owner_;                    // FromViews: what the views point into
  std::map<std::string, TensorView, std::less<>> tensors_;
  std::vector<std::span<const std::byte>> mapped_;  // the read-only file mappings the views point into
  std::unique_ptr<DerivedStore> derived_ = std::make_unique<DerivedStore>();  // Derived's buffers
};

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // any rank (the reader accepts up to kMaxDims)
  const void* data = nullptr;
  size_t size = 0;  // bytes; must equal product(shape) * DTypeSize(dtype)
};

// Writes tensors in the given order, contiguous, header padded with spaces to a multiple of 8 bytes as the
// reference writer does. Names must be unique, non-empty and not "__metadata__". All or nothing, as an
// OutputFile (base/file_write.h).
Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace lfmvox
