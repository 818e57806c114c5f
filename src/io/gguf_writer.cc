#include "io/gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/file_write.h"
#include "io/file_util.h"

namespace lfmvox {

namespace {

using ull = unsigned long long;

constexpr char kAlignmentKey[] = "general.alignment";

void PutLe(std::string* out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutString(std::string* out, std::string_view s) {
  PutLe(out, s.size(), 8);
  out->append(s);
}

uint64_t Pad(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

Status GgufWriter::CheckKey(std::string_view key) const {
  if (key.empty()) return InvalidArgument("GGUF metadata keys must not be empty");
  if (key.size() > kGgufMaxKeyBytes) {
    return InvalidArgument(StrFormat("GGUF metadata key of %zu bytes is over the %llu-byte limit", key.size(),
                                     static_cast<ull>(kGgufMaxKeyBytes)));
  }
  if (keys_.count(key) != 0)
    return InvalidArgument("GGUF metadata key " + std::string(key) + " is added twice");
  return Status::Ok();
}

void GgufWriter::Emit(std::string_view key, GgufValueType type, std::string_view value) {
  PutString(&kv_bytes_, key);
  PutLe(&kv_bytes_, static_cast<uint32_t>(type), 4);
  kv_bytes_.append(value);
  keys_.emplace(key);
  ++n_kv_;
}

Status GgufWriter::AddScalar(std::string_view key, GgufValueType type, uint64_t bits) {
  LFM_RETURN_IF_ERROR(CheckKey(key));
  if (key == kAlignmentKey) {
    return InvalidArgument("general.alignment must be a u32; use SetAlignment or AddU32");
  }
  std::string v;
  PutLe(&v, bits, GgufScalarSize(type));
  Emit(key, type, v);
  return Status::Ok();
}

Status GgufWriter::SetAlignment(uint32_t alignment) {
  if (alignment == 0 || !std::has_single_bit(alignment) || alignment > kGgufMaxAlignment) {
    return InvalidArgument(
        StrFormat("GGUF alignment %u must be a power of two from 1 to %u", alignment, kGgufMaxAlignment));
  }
  LFM_RETURN_IF_ERROR(CheckKey(kAlignmentKey));
  std::string v;
  PutLe(&v, alignment, 4);
  Emit(kAlignmentKey, GgufValueType::kU32, v);
  alignment_ = alignment;
  return Status::Ok();
}

Status GgufWriter::AddU8(std::string_view key, uint8_t v) { return AddScalar(key, GgufValueType::kU8, v); }
Status GgufWriter::AddI8(std::string_view key, int8_t v) {
  return AddScalar(key, GgufValueType::kI8, static_cast<uint8_t>(v));
}
Status GgufWriter::AddU16(std::string_view key, uint16_t v) { return AddScalar(key, GgufValueType::kU16, v); }
Status GgufWriter::AddI16(std::string_view key, int16_t v) {
  return AddScalar(key, GgufValueType::kI16, static_cast<uint16_t>(v));
}
Status GgufWriter::AddU32(std::string_view key, uint32_t v) {
  if (key == kAlignmentKey) return SetAlignment(v);
  return AddScalar(key, GgufValueType::kU32, v);
}
Status GgufWriter::AddI32(std::string_view key, int32_t v) {
  return AddScalar(key, GgufValueType::kI32, static_cast<uint32_t>(v));
}
Status GgufWriter::AddU64(std::string_view key, uint64_t v) { return AddScalar(key, GgufValueType::kU64, v); }
Status GgufWriter::AddI64(std::string_view key, int64_t v) {
  return AddScalar(key, GgufValueType::kI64, static_cast<uint64_t>(v));
}
Status GgufWriter::AddF32(std::string_view key, float v) {
  return AddScalar(key, GgufValueType::kF32, std::bit_cast<uint32_t>(v));
}
Status GgufWriter::AddF64(std::string_view key, double v) {
  return AddScalar(key, GgufValueType::kF64, std::bit_cast<uint64_t>(v));
}
Status GgufWriter::AddBool(std::string_view key, bool v) {
  return AddScalar(key, GgufValueType::kBool, v ? 1 : 0);
}

Status GgufWriter::AddString(std::string_view key, std::string_view v) {
  LFM_RETURN_IF_ERROR(CheckKey(key));
  if (key == kAlignmentKey) return InvalidArgument("general.alignment must be a u32; use SetAlignment");
  if (v.size() > kGgufMaxStringBytes) {
    return InvalidArgument(
        StrFormat("value of %s is %zu bytes, over the %llu-byte string limit readers accept",
                  std::string(key).c_str(), v.size(), static_cast<ull>(kGgufMaxStringBytes)));
  }
  std::string s;
  PutString(&s, v);
  Emit(key, GgufValueType::kString, s);
  return Status::Ok();
}

Status GgufWriter::AddArrayRaw(std::string_view key, GgufValueType element_type, std::string_view packed,
                               uint64_t n) {
  LFM_RETURN_IF_ERROR(CheckKey(key));
  if (key == kAlignmentKey) return InvalidArgument("general.alignment must be a u32; use SetAlignment");
  const size_t es = GgufScalarSize(element_type);
  if (es == 0) {
    return InvalidArgument(StrFormat("AddArrayRaw takes scalar element types, not %s (for %s)",
                                     GgufValueTypeName(static_cast<uint32_t>(element_type)),
                                     std::string(key).c_str()));
  }
  if (n > packed.size() / es || n * es != packed.size()) {
    return InvalidArgument(StrFormat("array %s: %llu elements of %s need %llu bytes but %zu were given",
                                     std::string(key).c_str(), static_cast<ull>(n),
                                     GgufValueTypeName(static_cast<uint32_t>(element_type)),
                                     static_cast<ull>(n * es), packed.size()));
  }
  if (element_type == GgufValueType::kBool) {
    for (char c : packed) {
      if (c != 0 && c != 1)
        return InvalidArgument("array " + std::string(key) + ": bools must be bytes 0 or 1");
    }
  }
  std::string v;
  PutLe(&v, static_cast<uint32_t>(element_type), 4);
  PutLe(&v, n, 8);
  v.append(packed);
  Emit(key, GgufValueType::kArray, v);
  return Status::Ok();
}

Status GgufWriter::Add(std::string_view key, const GgufValue& v) {
  switch (v.type()) {
    case GgufValueType::kArray:
      if (v.element_type() == GgufValueType::kString) return AddArrayString(key, v.strings());
      return AddArrayRaw(
          key, v.element_type(),
          std::string_view(reinterpret_cast<const char*>(v.packed().data()), v.packed().size()), v.size());
    case GgufValueType::kString:
      return AddString(key, v.string_value());
    case GgufValueType::kBool:
      return AddBool(key, v.bool_value());
    case GgufValueType::kF32:
    case GgufValueType::kF64: {
      double d = 0;
      v.ToDouble(&d);
      return v.type() == GgufValueType::kF32 ? AddF32(key, static_cast<float>(d)) : AddF64(key, d);
    }
    default: {
      // Integers: the on-disk bits of the value, signed ones sign-extended (PutLe keeps the low bytes).
      int64_t i = 0;
      uint64_t u = 0;
      if (v.ToUint64(&u)) {
        if (key == kAlignmentKey) return AddU32(key, static_cast<uint32_t>(u));
        return AddScalar(key, v.type(), u);
      }
      if (v.ToInt64(&i)) return AddScalar(key, v.type(), static_cast<uint64_t>(i));
      return InvalidArgument("metadata key " + std::string(key) + " holds no value of a known type");
    }
  }
}

namespace {

template <typename T>
std::string Pack(const std::vector<T>& v) {
  std::string out;
  out.reserve(v.size() * sizeof(T));
  for (const T& x : v) {
    uint64_t bits = 0;
    if constexpr (sizeof(T) == 4) {
      bits = std::bit_cast<uint32_t>(x);
    } else {
      bits = std::bit_cast<uint64_t>(x);
    }
    PutLe(&out, bits, sizeof(T));
  }
  return out;
}

}  // namespace

Status GgufWriter::AddArrayI32(std::string_view key, const std::vector<int32_t>& v) {
  return AddArrayRaw(key, GgufValueType::kI32, Pack(v), v.size());
}
Status GgufWriter::AddArrayU32(std::string_view key, const std::vector<uint32_t>& v) {
  return AddArrayRaw(key, GgufValueType::kU32, Pack(v), v.size());
}
Status GgufWriter::AddArrayI64(std::string_view key, const std::vector<int64_t>& v) {
  return AddArrayRaw(key, GgufValueType::kI64, Pack(v), v.size());
}
Status GgufWriter::AddArrayF32(std::string_view key, const std::vector<float>& v) {
  return AddArrayRaw(key, GgufValueType::kF32, Pack(v), v.size());
}

Status GgufWriter::AddArrayString(std::string_view key, const std::vector<std::string>& v) {
  LFM_RETURN_IF_ERROR(CheckKey(key));
  if (key == kAlignmentKey) return InvalidArgument("general.alignment must be a u32; use SetAlignment");
  std::string out;
  PutLe(&out, static_cast<uint32_t>(GgufValueType::kString), 4);
  PutLe(&out, v.size(), 8);
  for (const std::string& s : v) {
    if (s.size() > kGgufMaxStringBytes) {
      return InvalidArgument("an element of array " + std::string(key) +
                             " is over the string limit readers accept");
    }
    PutString(&out, s);
  }
  Emit(key, GgufValueType::kArray, out);
  return Status::Ok();
}

Status GgufWriter::AddTensor(std::string_view name, uint32_t ggml_type, std::vector<uint64_t> ne,
                             std::string_view data) {
  const std::string what = "tensor " + std::string(name);
  if (name.empty() || name.size() > kGgufMaxTensorName) {
    return InvalidArgument(StrFormat("tensor name \"%s\" must be 1 to %zu bytes (ggml's GGML_MAX_NAME)",
                                     std::string(name).c_str(), kGgufMaxTensorName));
  }
  if (tensor_names_.count(name) != 0) return InvalidArgument(what + " is added twice");
  size_t block_elems = 0, block_bytes = 0;
  if (!GgmlTypeBlock(ggml_type, &block_elems, &block_bytes)) {
    return InvalidArgument(StrFormat("%s: ggml type %u is unknown", what.c_str(), ggml_type));
  }
  if (ne.empty() || ne.size() > static_cast<size_t>(kGgufMaxDims)) {
    return InvalidArgument(
        StrFormat("%s has %zu dimensions; GGUF tensors have 1 to %d", what.c_str(), ne.size(), kGgufMaxDims));
  }
  if (ne[0] % block_elems != 0) {
    return InvalidArgument(StrFormat("%s: ne[0] = %llu is not a multiple of %s's %zu-element block",
                                     what.c_str(), static_cast<ull>(ne[0]), GgmlTypeName(ggml_type),
                                     block_elems));
  }
  uint64_t elements = 1;
  uint64_t bytes = ne[0] / block_elems * block_bytes;
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] == 0) return InvalidArgument(StrFormat("%s has ne[%zu] = 0", what.c_str(), i));
    if (__builtin_mul_overflow(elements, ne[i], &elements) || elements > (uint64_t{1} << 63) - 1 ||
        (i > 0 && __builtin_mul_overflow(bytes, ne[i], &bytes))) {
      return InvalidArgument(what + " has more elements than fit in a signed 64-bit count");
    }
  }
  if (bytes != data.size()) {
    return InvalidArgument(StrFormat("%s: %s needs %llu bytes but %zu were given", what.c_str(),
                                     GgmlTypeName(ggml_type), static_cast<ull>(bytes), data.size()));
  }
  tensors_.push_back(Tensor{std::string(name), ggml_type, std::move(ne), data});
  tensor_names_.emplace(name);
  return Status::Ok();
}

std::string GgufWriter::Preamble() const {
  std::string out = "GGUF";
  PutLe(&out, 3, 4);
  PutLe(&out, tensors_.size(), 8);
  PutLe(&out, n_kv_, 8);
  out += kv_bytes_;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    PutLe(&out, t.ne.size(), 4);
    for (uint64_t d : t.ne) PutLe(&out, d, 8);
    PutLe(&out, t.type, 4);
    PutLe(&out, offset, 8);
    offset += Pad(t.data.size(), alignment_);
  }
  out.append(Pad(out.size(), alignment_) - out.size(), '\0');
  return out;
}

Result<std::string> GgufWriter::WriteToMemory() const {
  std::string out = Preamble();
  for (const Tensor& t : tensors_) {
    out.append(t.data);
    out.append(Pad(t.data.size(), alignment_) - t.data.size(), '\0');
  }
  return out;
}

Status GgufWriter::Write(const std::string& path) const {
  const std::string preamble = Preamble();
  LFM_ASSIGN_OR_RETURN(OutputFile out, OutputFile::Open(path));
  FILE* f = out.stream();
  if (f == nullptr) return ErrnoStatus("cannot write", path, errno);
  static const char kZeros[4096] = {};
  bool ok = std::fwrite(preamble.data(), 1, preamble.size(), f) == preamble.size();
  for (const Tensor& t : tensors_) {
    if (ok && !t.data.empty()) ok = std::fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
    for (uint64_t pad = Pad(t.data.size(), alignment_) - t.data.size(); ok && pad > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(pad, sizeof(kZeros)));
      ok = std::fwrite(kZeros, 1, n, f) == n;
      pad -= n;
    }
  }
  if (!ok) return ErrnoStatus("cannot write", path, errno);  // `out` discards the partial file
  return out.Commit();
}

}  // namespace lfmvox
