#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "base/file_write.h"
#include "base/json_parse.h"
#include "io/file_util.h"

namespace lfmvox {

// Tensor bytes are handed out as views straight into the file, which is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors views assume a little-endian host");

namespace {

using json = nlohmann::json;

constexpr char kMetadataKey[] = "__metadata__";
constexpr uint64_t kMaxIndexBytes = 100ull << 20;
// A header is {name: {dtype, shape: [...], data_offsets: [a, b]}, "__metadata__": {str: str}}: three
// levels, ~8 values a tensor; the index {"weight_map": {name: file}, "metadata": {...}}. 2^21 values
// is a quarter of a million tensors.
constexpr JsonLimits kHeaderLimits = {.max_depth = 8, .max_values = size_t{1} << 21};

uint64_t LoadLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// A JSON integer >= 0 (nlohmann stores "3" as unsigned, "-3" as signed, "3.0" and "1e3" as float).
bool AsU64(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

// A string from the file as a message may show it: control bytes, NUL above all (which would end the
// message where a C string is printed), as \xNN, and at most 200 bytes.
std::string Printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 200; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 200) out += "...";
  return out;
}

Status ParseEntry(const std::string& name, const json& v, uint64_t data_size, SafetensorsEntry* e) {
  e->name = name;
  const std::string what = "tensor " + Printable(name);
  if (!v.is_object()) return DataLoss(what + ": header entry is not a JSON object");

  const auto dtype = v.find("dtype");
  if (dtype == v.end() || !dtype->is_string())
    return DataLoss(what + ": header entry lacks a string \"dtype\"");
  if (!ParseDType(dtype->get_ref<const std::string&>(), &e->dtype)) {
    return Unimplemented(what + " has dtype \"" + Printable(dtype->get<std::string>()) + "\"" +
                         ", which lfmvox does not read (known: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
  }

  const auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array())
    return DataLoss(what + ": header entry lacks a \"shape\" array");
  if (shape->size() > static_cast<size_t>(kMaxDims)) {
    return Unimplemented(StrFormat("%s has %zu dimensions; lfmvox supports at most %d", what.c_str(),
                                   shape->size(), kMaxDims));
  }
  // The product is kept <= INT64_MAX so Shape::elements() cannot overflow.
  uint64_t elements = 1;
  for (const json& d : *shape) {
    uint64_t n = 0;
    if (!AsU64(d, &n) || n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return DataLoss(what + ": shape " + shape->dump() + " must hold non-negative integers below 2^63");
    }
    e->shape.dim[e->shape.rank++] = static_cast<int64_t>(n);
    if (__builtin_mul_overflow(elements, n, &elements) ||
        elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return DataLoss(what + ": shape " + shape->dump() + " has more elements than fit in 64 bits");
    }
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(DTypeSize(e->dtype)), &bytes)) {
    return DataLoss(what + ": shape " + shape->dump() + " needs more bytes than fit in 64 bits");
  }

  const auto offsets = v.find("data_offsets");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 ||
      !AsU64((*offsets)[0], &e->begin) || !AsU64((*offsets)[1], &e->end)) {
    return DataLoss(what + ": header entry lacks \"data_offsets\" [begin, end] of non-negative integers");
  }
  if (e->begin > e->end) {
    return DataLoss(StrFormat("%s: data_offsets [%llu, %llu] are reversed", what.c_str(),
                              static_cast<unsigned long long>(e->begin),
                              static_cast<unsigned long long>(e->end)));
  }
  if (e->end > data_size) {
    return DataLoss(StrFormat(
        "%s: data_offsets end %llu lies past the data area (%llu bytes); the file is "
        "truncated or corrupt",
        what.c_str(), static_cast<unsigned long long>(e->end), static_cast<unsigned long long>(data_size)));
  }
  if (e->end - e->begin != bytes) {
    return DataLoss(StrFormat("%s: %s %s needs %llu bytes but data_offsets span %llu", what.c_str(),
                              DTypeName(e->dtype), e->shape.ToString().c_str(),
                              static_cast<unsigned long long>(bytes),
                              static_cast<unsigned long long>(e->end - e->begin)));
  }
  return Status::Ok();
}

std::vector<std::string> SortedNames(const std::map<std::string, TensorView, std::less<>>& tensors) {
  std::vector<std::string> names;
  names.reserve(tensors.size());
  for (const auto& [name, view] : tensors) names.push_back(name);
  return names;  // std::map iterates in sorted order
}

}  // namespace

Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view file) {
  if (file.size() < 8) {
    return DataLoss(
        StrFormat("file is %zu bytes; a safetensors file starts with an 8-byte header length", file.size()));
  }
  const uint64_t n = LoadLe64(file.data());
  if (n > kMaxSafetensorsHeaderBytes) {
    return OutOfRange(StrFormat("header length %llu is over the %llu-byte limit; is this a safetensors file?",
                                static_cast<unsigned long long>(n),
                                static_cast<unsigned long long>(kMaxSafetensorsHeaderBytes)));
  }
  if (n > file.size() - 8) {
    return DataLoss(
        StrFormat("header length %llu runs past the end of the %zu-byte file; it is truncated or "
                  "not a safetensors file",
                  static_cast<unsigned long long>(n), file.size()));
  }
  const char* text = file.data() + 8;
  LFM_ASSIGN_OR_RETURN(const json root, ParseJson(std::string_view(text, n), "the header", kHeaderLimits));
  if (!root.is_object()) return DataLoss("header JSON is not an object");

  SafetensorsHeader h;
  h.data_offset = 8 + n;
  const uint64_t data_size = file.size() - h.data_offset;
  for (const auto& [key, value] : root.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) return DataLoss("header \"__metadata__\" is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          return DataLoss("header \"__metadata__\" value for \"" + mk + "\" is not a string");
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    SafetensorsEntry e;
    LFM_RETURN_IF_ERROR(ParseEntry(key, value, data_size, &e));
    h.tensors.push_back(std::move(e));
  }

  std::sort(h.tensors.begin(), h.tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  // Sorted by begin, non-empty spans overlap iff one starts before the furthest end seen so far.
  // Empty tensors hold no bytes and so cannot overlap anything.
  const SafetensorsEntry* furthest = nullptr;
  for (const SafetensorsEntry& e : h.tensors) {
    if (e.begin == e.end) continue;
    if (furthest != nullptr && e.begin < furthest->end) {
      return DataLoss(StrFormat(
          "tensors %s [%llu, %llu) and %s [%llu, %llu) overlap in the data area", furthest->name.c_str(),
          static_cast<unsigned long long>(furthest->begin), static_cast<unsigned long long>(furthest->end),
          e.name.c_str(), static_cast<unsigned long long>(e.begin), static_cast<unsigned long long>(e.end)));
    }
    if (furthest == nullptr || e.end > furthest->end) furthest = &e;
  }
  return h;
}

// ---------------------------------------------------------------------------------------------------------
// SafetensorsFile

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

Status SafetensorsFile::Init(const void* base, size_t size) {
  const char* bytes = static_cast<const char*>(base);
  LFM_ASSIGN_OR_RETURN(SafetensorsHeader h, ParseSafetensorsHeader(std::string_view(bytes, size)));
  for (SafetensorsEntry& e : h.tensors) {
    TensorView v;
    v.dtype = e.dtype;
    v.shape = e.shape;
    const char* p = bytes + h.data_offset + e.begin;
    const size_t n = static_cast<size_t>(e.end - e.begin);
    if (n > 0 && reinterpret_cast<uintptr_t>(p) % DTypeSize(e.dtype) != 0) {
      AlignedBuffer<std::byte> copy(n);
      std::memcpy(copy.data(), p, n);
      p = reinterpret_cast<const char*>(copy.data());
      realigned_.push_back(std::move(copy));
    }
    v.data = p;
    tensors_.emplace(std::move(e.name), v);
  }
  metadata_ = std::move(h.metadata);
  return Status::Ok();
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  LFM_ASSIGN_OR_RETURN(const MappedFile m, MapReadOnly(path));
  f->map_ = m.data;
  f->map_size_ = m.size;
  LFM_RETURN_IF_ERROR(f->Init(f->map_ != nullptr ? f->map_ : "", m.size).WithContext(path));
  return f;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::OpenFromMemory(std::string_view bytes,
                                                                         std::string name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = std::move(name);
  f->owned_.Reset(bytes.size());
  if (!bytes.empty()) std::memcpy(f->owned_.data(), bytes.data(), bytes.size());
  const void* base = f->owned_.data() != nullptr ? static_cast<const void*>(f->owned_.data()) : "";
  LFM_RETURN_IF_ERROR(f->Init(base, bytes.size()).WithContext(f->path_));
  return f;
}

bool SafetensorsFile::Has(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

Result<TensorView> SafetensorsFile::Get(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) return NotFound("tensor " + std::string(name) + " is not in " + path_);
  return it->second;
}

std::vector<std::string> SafetensorsFile::Names() const { return SortedNames(tensors_); }

// ---------------------------------------------------------------------------------------------------------
// Checkpoint

namespace {

namespace fs = std::filesystem;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

bool IsRegularFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Shard names come from a file; keep them inside the checkpoint's directory.
bool IsPlainRelativePath(const std::string& s) {
  if (s.empty()) return false;
  const fs::path p(s);
  if (p.is_absolute()) return false;
  for (const fs::path& part : p) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

Checkpoint Checkpoint::FromFile(std::unique_ptr<SafetensorsFile> file) {
  Checkpoint c;
  c.path_ = file->path();
  for (const std::string& name : file->Names()) c.tensors_.emplace(name, file->Get(name).value());
  if (!file->mapping().empty()) c.mapped_.push_back(file->mapping());
  c.files_.push_back(std::move(file));
  return c;
}

Checkpoint Checkpoint::FromViews(std::string path, std::map<std::string, TensorView, std::less<>> tensors,
                                 std::shared_ptr<const void> owner,
                                 std::vector<std::span<const std::byte>> mapped) {
  Checkpoint c;
  c.path_ = std::move(path);
  c.tensors_ = std::move(tensors);
  c.owner_ = std::move(owner);
  c.mapped_ = std::move(mapped);
  return c;
}

Result<const uint8_t*> Checkpoint::Derived(std::string_view key, size_t bytes,
                                           const std::function<void(uint8_t*)>& fill) const {
  std::lock_guard<std::mutex> lock(derived_->mu);
  auto it = derived_->buffers.find(key);
  if (it != derived_->buffers.end()) return it->second.data;
  constexpr size_t kHuge = size_t{2} << 20;
  if (bytes > std::numeric_limits<size_t>::max() / 2 - kHuge) {
    return OutOfMemory(
        StrFormat("%zu bytes for %.*s cannot be mapped", bytes, static_cast<int>(key.size()), key.data()));
  }
  // Whole 4 KiB pages from a 2 MiB boundary: the kernel backs the whole 2 MiB runs with huge pages and the
  // rest with small ones, so nothing is wasted.
  const size_t mapped = std::max<size_t>((bytes + 4095) / 4096 * 4096, 4096);
  void* p = mmap(nullptr, mapped + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return OutOfMemory(StrFormat(
        "could not map %zu MiB for the repacked copy of %.*s (%s); free memory, or load fewer models at once",
        mapped >> 20, static_cast<int>(key.size()), key.data(), std::strerror(errno)));
  }
  DerivedBytes& buf = derived_->buffers[std::string(key)];
  // Trim to a 2 MiB aligned start, so that every page can be huge.
  auto* base = static_cast<uint8_t*>(p);
  const uintptr_t a = (reinterpret_cast<uintptr_t>(base) + kHuge - 1) / kHuge * kHuge;
  auto* start = reinterpret_cast<uint8_t*>(a);
  if (start > base) munmap(base, static_cast<size_t>(start - base));
  if (const size_t after = static_cast<size_t>(base + mapped + kHuge - (start + mapped)); after > 0)
    munmap(start + mapped, after);
  madvise(start, mapped, MADV_HUGEPAGE);  // advice: failure is harmless
  buf.data = start;
  buf.size = bytes;
  buf.mapped = mapped;
  fill(buf.data);
  return static_cast<const uint8_t*>(buf.data);
}

void Checkpoint::ReleasePages(const void* p, size_t n) const {
  const auto* s = static_cast<const std::byte*>(p);
  for (const std::span<const std::byte>& m : mapped_) {
    if (s < m.data() || s + n > m.data() + m.size()) continue;
    // The whole pages inside [s, s + n): a neighbour's bytes stay resident.
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(s) + page - 1) / page * page;
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(s) + n) / page * page;
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);  // advice: failure is harmless
    return;
  }
}

Checkpoint::DerivedBytes::~DerivedBytes() {
  if (data != nullptr) munmap(data, mapped);
}

size_t Checkpoint::DerivedByteCount() const {
  std::lock_guard<std::mutex> lock(derived_->mu);
  size_t n = 0;
  for (const auto& [key, buf] : derived_->buffers) n += buf.size;
  return n;
}

Result<Checkpoint> Checkpoint::Open(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  fs::path index;
  if (fs::is_directory(p, ec)) {
    if (IsRegularFile(p / kIndexFile)) {
      index = p / kIndexFile;
    } else if (IsRegularFile(p / kSingleFile)) {
      LFM_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open((p / kSingleFile).string()));
      Checkpoint c = FromFile(std::move(file));
      c.path_ = path;
      return c;
    } else {
      return NotFound("checkpoint directory " + path + " holds neither " + kSingleFile + " nor " +
                      kIndexFile);
    }
  } else if (path.ends_with(".index.json")) {
    index = p;
  } else {
    LFM_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
    return FromFile(std::move(file));
  }

  // Sharded: {"weight_map": {tensor name: shard file}}.
  const std::string index_name = index.string();
  LFM_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(index_name, kMaxIndexBytes));
  LFM_ASSIGN_OR_RETURN(const json root, ParseJson(text, index_name, kHeaderLimits));
  const auto map = root.is_object() ? root.find("weight_map") : root.end();
  if (map == root.end() || !map->is_object()) {
    return DataLoss(index_name + " lacks a \"weight_map\" object {tensor name: shard file}");
  }
  if (map->empty()) return DataLoss(index_name + ": \"weight_map\" is empty");

  Checkpoint c;
  c.path_ = path;
  std::map<std::string, const SafetensorsFile*> shards;  // each shard opened once
  for (const auto& [name, shard] : map->items()) {
    if (!shard.is_string() || !IsPlainRelativePath(shard.get<std::string>())) {
      return DataLoss(index_name + ": weight_map entry for " + name +
                      " must be a shard file name relative to the index's directory");
    }
    const std::string& shard_name = shard.get_ref<const std::string&>();
    auto it = shards.find(shard_name);
    if (it == shards.end()) {
      LFM_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open((index.parent_path() / shard_name).string()));
      it = shards.emplace(shard_name, file.get()).first;
      if (!file->mapping().empty()) c.mapped_.push_back(file->mapping());
      c.files_.push_back(std::move(file));
    }
    if (!it->second->Has(name)) {
      return NotFound(index_name + " maps tensor " + name + " to " + shard_name + ", which does not hold it");
    }
    c.tensors_.emplace(name, it->second->Get(name).value());
  }
  return c;
}

bool Checkpoint::Has(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

Result<TensorView> Checkpoint::Get(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) return NotFound("tensor " + std::string(name) + " is not in checkpoint " + path_);
  return it->second;
}

Result<TensorView> Checkpoint::Get(std::string_view name, const Shape& expected) const {
  LFM_ASSIGN_OR_RETURN(TensorView v, Get(name));
  if (!(v.shape == expected)) {
    return InvalidArgument("tensor " + std::string(name) + " has shape " + v.shape.ToString() +
                           " but the config needs " + expected.ToString());
  }
  return v;
}

std::vector<std::string> Checkpoint::Names() const { return SortedNames(tensors_); }

// ---------------------------------------------------------------------------------------------------------
// Writer

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == kMetadataKey) {
      return InvalidArgument("tensor name \"" + t.name + "\" is not allowed in a safetensors file");
    }
    if (header.contains(t.name)) return InvalidArgument("tensor " + t.name + " is listed twice");
    uint64_t bytes = DTypeSize(t.dtype);
    for (int64_t d : t.shape) {
      if (d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
        return InvalidArgument("tensor " + t.name + " has a negative or overflowing shape");
      }
    }
    if (bytes != t.size || (t.size > 0 && t.data == nullptr)) {
      return InvalidArgument(StrFormat("tensor %s: %s shape needs %llu bytes but %zu were given",
                                       t.name.c_str(), DTypeName(t.dtype),
                                       static_cast<unsigned long long>(bytes), t.size));
    }
    header[t.name] = {
        {"dtype", DTypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception&) {  // dump throws on invalid UTF-8
    return InvalidArgument("tensor names and metadata must be valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data area starts 8-aligned

  LFM_ASSIGN_OR_RETURN(OutputFile out, OutputFile::Open(path));
  FILE* f = out.stream();
  if (f == nullptr) return ErrnoStatus("cannot write", path, errno);
  char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xff);
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (const TensorToWrite& t : tensors) {
    if (ok && t.size > 0) ok = std::fwrite(t.data, 1, t.size, f) == t.size;
  }
  if (!ok) return ErrnoStatus("cannot write", path, errno);  // `out` discards the partial file
  return out.Commit();
}

}  // namespace lfmvox
