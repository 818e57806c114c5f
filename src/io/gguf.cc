#include "io/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "io/file_util.h"

namespace lfmvox {

// Tensor bytes are handed out as pointers straight into the file, which is little-endian.
static_assert(std::endian::native == std::endian::little, "GGUF tensor pointers assume a little-endian host");

namespace {

using ull = unsigned long long;

struct TypeInfo {
  uint32_t id;
  const char* name;
  size_t block_elems;
  size_t block_bytes;
};

// Block sizes as ggml's type_traits (ggml.c): QK4_0 = QK8_0 = 32, QK_K = 256.
constexpr TypeInfo kTypes[] = {
    {0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},    {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},    {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},  {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},       {25, "I16", 1, 2},
    {26, "I32", 1, 4},      {27, "I64", 1, 8},      {28, "F64", 1, 8},      {30, "BF16", 1, 2},
};

const TypeInfo* FindType(uint32_t id) {
  for (const TypeInfo& t : kTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

constexpr const char* kValueTypeNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};
constexpr uint32_t kNumValueTypes = 13;

bool IsIntegerType(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kU16:
    case GgufValueType::kI16:
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kU64:
    case GgufValueType::kI64:
      return true;
    default:
      return false;
  }
}

bool IsSignedType(GgufValueType t) {
  return t == GgufValueType::kI8 || t == GgufValueType::kI16 || t == GgufValueType::kI32 ||
         t == GgufValueType::kI64;
}

bool IsFloatType(GgufValueType t) { return t == GgufValueType::kF32 || t == GgufValueType::kF64; }

uint64_t LoadLe(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

// An n-byte little-endian integer of type t, sign-extended to 64 bits if t is signed.
uint64_t LoadInteger(GgufValueType t, const uint8_t* p) {
  const size_t n = GgufScalarSize(t);
  uint64_t v = LoadLe(p, n);
  if (IsSignedType(t) && n < 8 && (v >> (8 * n - 1)) != 0) v |= ~uint64_t{0} << (8 * n);
  return v;
}

double LoadFloat(GgufValueType t, const uint8_t* p) {
  if (t == GgufValueType::kF32)
    return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(LoadLe(p, 4))));
  return std::bit_cast<double>(LoadLe(p, 8));
}

bool BitsToInt64(GgufValueType t, uint64_t bits, int64_t* out) {
  if (!IsSignedType(t) && bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = static_cast<int64_t>(bits);
  return true;
}

bool BitsToUint64(GgufValueType t, uint64_t bits, uint64_t* out) {
  if (IsSignedType(t) && static_cast<int64_t>(bits) < 0) return false;
  *out = bits;
  return true;
}

std::string Quote(std::string_view s, size_t max = 64) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += StrFormat("\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max) out += "...";
  return out + "\"";
}

// A bounds-checked reader over the image. Every read names what it reads, so a truncated file says where.
class Reader {
 public:
  explicit Reader(std::string_view file)
      : p_(reinterpret_cast<const uint8_t*>(file.data())), size_(file.size()) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  const uint8_t* at(uint64_t off) const { return p_ + off; }

  Status Need(uint64_t n, const std::string& what) const {
    if (n > left()) {
      return DataLoss(StrFormat("file ends at byte %llu, %llu bytes short of %s; it is truncated or not GGUF",
                                static_cast<ull>(size_), static_cast<ull>(n - left()), what.c_str()));
    }
    return Status::Ok();
  }
  Status U32(const std::string& what, uint32_t* out) {
    LFM_RETURN_IF_ERROR(Need(4, what));
    *out = static_cast<uint32_t>(LoadLe(p_ + pos_, 4));
    pos_ += 4;
    return Status::Ok();
  }
  Status U64(const std::string& what, uint64_t* out) {
    LFM_RETURN_IF_ERROR(Need(8, what));
    *out = LoadLe(p_ + pos_, 8);
    pos_ += 8;
    return Status::Ok();
  }
  // A u64 length and that many bytes; the length is checked against `max` and the bytes left first.
  Status String(const std::string& what, uint64_t max, std::string* out) {
    uint64_t n = 0;
    LFM_RETURN_IF_ERROR(U64("the length of " + what, &n));
    if (n > max) {
      return OutOfRange(StrFormat("%s is %llu bytes long, over the %llu-byte limit; the file is corrupt",
                                  what.c_str(), static_cast<ull>(n), static_cast<ull>(max)));
    }
    LFM_RETURN_IF_ERROR(Need(n, what));
    out->assign(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return Status::Ok();
  }
  void Skip(uint64_t n) { pos_ += n; }  // after Need(n)

 private:
  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// The fewest bytes one array element of a known type takes on disk: a string is at least its u64 length.
uint64_t MinElementBytes(GgufValueType t) { return t == GgufValueType::kString ? 8 : GgufScalarSize(t); }

Status CheckValueType(uint32_t type, const std::string& what) {
  if (type >= kNumValueTypes) {
    return DataLoss(StrFormat("%s has value type %u, which is not a GGUF type (0..12); the file is corrupt",
                              what.c_str(), type));
  }
  return Status::Ok();
}

Status ReadValue(Reader& r, uint32_t type_id, const std::string& what, GgufValue* out) {
  LFM_RETURN_IF_ERROR(CheckValueType(type_id, what));
  const auto type = static_cast<GgufValueType>(type_id);
  if (type == GgufValueType::kString) {
    std::string s;
    LFM_RETURN_IF_ERROR(r.String(what, kGgufMaxStringBytes, &s));
    *out = GgufValue::String(std::move(s));
    return Status::Ok();
  }
  if (type != GgufValueType::kArray) {
    const size_t n = GgufScalarSize(type);
    LFM_RETURN_IF_ERROR(r.Need(n, what));
    const uint8_t* p = r.at(r.pos());
    r.Skip(n);
    if (type == GgufValueType::kBool) {
      if (*p > 1)
        return DataLoss(
            StrFormat("%s is a bool with byte value %u; only 0 and 1 are valid", what.c_str(), *p));
      *out = GgufValue::Bool(*p != 0);
    } else if (IsFloatType(type)) {
      *out = GgufValue::Float(type, LoadFloat(type, p));
    } else {
      *out = GgufValue::Integer(type, LoadInteger(type, p));
    }
    return Status::Ok();
  }

  uint32_t elem_id = 0;
  LFM_RETURN_IF_ERROR(r.U32("the element type of " + what, &elem_id));
  LFM_RETURN_IF_ERROR(CheckValueType(elem_id, "the array " + what));
  const auto elem = static_cast<GgufValueType>(elem_id);
  if (elem == GgufValueType::kArray) {
    return Unimplemented(what + " is an array of arrays; lfmvox (like ggml) does not read nested arrays");
  }
  uint64_t n = 0;
  LFM_RETURN_IF_ERROR(r.U64("the element count of " + what, &n));
  // Bound the count by the bytes left before allocating anything from it.
  const uint64_t min_bytes = MinElementBytes(elem);
  if (n > r.left() / min_bytes) {
    return DataLoss(
        StrFormat("%s claims %llu elements of type %s, more than the %llu bytes left in the file can "
                  "hold; the file is truncated or corrupt",
                  what.c_str(), static_cast<ull>(n), GgufValueTypeName(elem_id), static_cast<ull>(r.left())));
  }
  if (elem == GgufValueType::kString) {
    std::vector<std::string> v;
    v.reserve(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n; ++i) {
      // Vocabularies hold 65536 tokens and as many merges: describe an element only when it is bad.
      const uint64_t len = r.left() >= 8 ? LoadLe(r.at(r.pos()), 8) : 0;
      if (r.left() < 8 || len > kGgufMaxStringBytes || len > r.left() - 8) {
        std::string unused;
        const Status bad = r.String(StrFormat("element %llu of %s", static_cast<ull>(i), what.c_str()),
                                    kGgufMaxStringBytes, &unused);
        return bad.ok() ? Internal("GGUF string array: fast and slow path disagree") : bad;
      }
      v.emplace_back(reinterpret_cast<const char*>(r.at(r.pos() + 8)), static_cast<size_t>(len));
      r.Skip(8 + len);
    }
    *out = GgufValue::StringArray(std::move(v));
    return Status::Ok();
  }
  const uint64_t bytes = n * min_bytes;  // cannot overflow: n <= left / min_bytes
  const uint8_t* p = r.at(r.pos());
  r.Skip(bytes);
  if (elem == GgufValueType::kBool) {
    for (uint64_t i = 0; i < n; ++i) {
      if (p[i] > 1) {
        return DataLoss(StrFormat("element %llu of %s is a bool with byte value %u; only 0 and 1 are valid",
                                  static_cast<ull>(i), what.c_str(), p[i]));
      }
    }
  }
  *out = GgufValue::ScalarArray(elem, std::vector<uint8_t>(p, p + bytes));
  return Status::Ok();
}

// ne[0] / block · block bytes · ne[1..]: false on overflow.
bool TensorBytes(const GgufTensor& t, size_t block_elems, size_t block_bytes, uint64_t* out) {
  uint64_t bytes = t.ne[0] / block_elems;
  if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(block_bytes), &bytes)) return false;
  for (int i = 1; i < t.n_dims; ++i) {
    if (__builtin_mul_overflow(bytes, t.ne[i], &bytes)) return false;
  }
  *out = bytes;
  return true;
}

std::string ShapeString(const GgufTensor& t) {
  std::string s = "{";
  for (int i = 0; i < t.n_dims; ++i) s += StrFormat(i ? ", %llu" : "%llu", static_cast<ull>(t.ne[i]));
  return s + "}";
}

Status ReadTensorInfo(Reader& r, uint64_t index, GgufTensor* t) {
  const std::string what = StrFormat("tensor info #%llu", static_cast<ull>(index));
  uint64_t len = 0;
  LFM_RETURN_IF_ERROR(r.U64("the name length of " + what, &len));
  if (len == 0) return DataLoss(what + " has an empty name");
  if (len > kGgufMaxTensorName) {
    return DataLoss(StrFormat("%s has a %llu-byte name; ggml allows at most %zu bytes (GGML_MAX_NAME)",
                              what.c_str(), static_cast<ull>(len), kGgufMaxTensorName));
  }
  LFM_RETURN_IF_ERROR(r.Need(len, "the name of " + what));
  t->name.assign(reinterpret_cast<const char*>(r.at(r.pos())), static_cast<size_t>(len));
  r.Skip(len);
  const std::string tw = "tensor " + Quote(t->name);

  uint32_t n_dims = 0;
  LFM_RETURN_IF_ERROR(r.U32("n_dims of " + tw, &n_dims));
  if (n_dims < 1 || n_dims > kGgufMaxDims) {
    return DataLoss(
        StrFormat("%s has %u dimensions; GGUF tensors have 1 to %d", tw.c_str(), n_dims, kGgufMaxDims));
  }
  t->n_dims = static_cast<int>(n_dims);
  uint64_t elements = 1;
  for (uint32_t i = 0; i < n_dims; ++i) {
    LFM_RETURN_IF_ERROR(r.U64(StrFormat("ne[%u] of %s", i, tw.c_str()), &t->ne[i]));
    if (t->ne[i] == 0)
      return DataLoss(StrFormat("%s has ne[%u] = 0; empty tensors are not valid", tw.c_str(), i));
    // ggml keeps ne in int64_t, so the element count must stay below 2^63.
    if (__builtin_mul_overflow(elements, t->ne[i], &elements) ||
        elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return DataLoss(tw + " has more elements than fit in a signed 64-bit count; the file is corrupt");
    }
  }
  t->elements = elements;

  LFM_RETURN_IF_ERROR(r.U32("the ggml type of " + tw, &t->type));
  size_t block_elems = 0, block_bytes = 0;
  if (!GgmlTypeBlock(t->type, &block_elems, &block_bytes)) {
    return Unimplemented(StrFormat("%s has ggml type %u, which lfmvox does not know", tw.c_str(), t->type));
  }
  if (t->ne[0] % block_elems != 0) {
    return DataLoss(StrFormat("%s is %s with ne[0] = %llu, not a multiple of the type's %zu-element block",
                              tw.c_str(), GgmlTypeName(t->type), static_cast<ull>(t->ne[0]), block_elems));
  }
  if (!TensorBytes(*t, block_elems, block_bytes, &t->bytes)) {
    return DataLoss(tw + " needs more bytes than fit in 64 bits; the file is corrupt");
  }
  LFM_RETURN_IF_ERROR(r.U64("the data offset of " + tw, &t->offset));
  return Status::Ok();
}

}  // namespace

const char* GgmlTypeName(uint32_t type) {
  const TypeInfo* t = FindType(type);
  return t != nullptr ? t->name : "unknown";
}

bool GgmlTypeBlock(uint32_t type, size_t* block_elems, size_t* block_bytes) {
  const TypeInfo* t = FindType(type);
  if (t == nullptr) return false;
  *block_elems = t->block_elems;
  *block_bytes = t->block_bytes;
  return true;
}

const char* GgufValueTypeName(uint32_t type) {
  return type < kNumValueTypes ? kValueTypeNames[type] : "unknown";
}

size_t GgufScalarSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    default:
      return 0;
  }
}

// ---------------------------------------------------------------------------------------------------------
// GgufValue

GgufValue GgufValue::Integer(GgufValueType type, uint64_t bits) {
  GgufValue v;
  v.type_ = v.element_type_ = type;
  v.bits_ = bits;
  return v;
}

GgufValue GgufValue::Float(GgufValueType type, double f) {
  GgufValue v;
  v.type_ = v.element_type_ = type;
  v.float_ = f;
  return v;
}

GgufValue GgufValue::Bool(bool b) {
  GgufValue v;
  v.type_ = v.element_type_ = GgufValueType::kBool;
  v.bits_ = b ? 1 : 0;
  return v;
}

GgufValue GgufValue::String(std::string s) {
  GgufValue v;
  v.type_ = v.element_type_ = GgufValueType::kString;
  v.string_ = std::move(s);
  return v;
}

GgufValue GgufValue::ScalarArray(GgufValueType element_type, std::vector<uint8_t> packed) {
  GgufValue v;
  v.type_ = GgufValueType::kArray;
  v.element_type_ = element_type;
  v.packed_ = std::move(packed);
  return v;
}

GgufValue GgufValue::StringArray(std::vector<std::string> s) {
  GgufValue v;
  v.type_ = GgufValueType::kArray;
  v.element_type_ = GgufValueType::kString;
  v.strings_ = std::move(s);
  return v;
}

size_t GgufValue::size() const {
  if (!is_array()) return 1;
  if (element_type_ == GgufValueType::kString) return strings_.size();
  const size_t n = GgufScalarSize(element_type_);
  return n == 0 ? 0 : packed_.size() / n;
}

bool GgufValue::ToInt64(int64_t* out) const { return IsIntegerType(type_) && BitsToInt64(type_, bits_, out); }

bool GgufValue::ToUint64(uint64_t* out) const {
  return IsIntegerType(type_) && BitsToUint64(type_, bits_, out);
}

bool GgufValue::ToDouble(double* out) const {
  if (!IsFloatType(type_)) return false;
  *out = float_;
  return true;
}

bool GgufValue::IntAt(size_t i, int64_t* out) const {
  if (!is_array() || !IsIntegerType(element_type_) || i >= size()) return false;
  const size_t n = GgufScalarSize(element_type_);
  return BitsToInt64(element_type_, LoadInteger(element_type_, packed_.data() + i * n), out);
}

bool GgufValue::DoubleAt(size_t i, double* out) const {
  if (!is_array() || !IsFloatType(element_type_) || i >= size()) return false;
  *out = LoadFloat(element_type_, packed_.data() + i * GgufScalarSize(element_type_));
  return true;
}

namespace {

std::string ScalarText(GgufValueType t, uint64_t bits, double f, const std::string* s) {
  if (t == GgufValueType::kString) return Quote(*s);
  if (t == GgufValueType::kBool) return bits ? "true" : "false";
  if (IsFloatType(t)) return StrFormat("%.9g", f);
  if (IsSignedType(t)) return StrFormat("%lld", static_cast<long long>(bits));
  return StrFormat("%llu", static_cast<ull>(bits));
}

}  // namespace

std::string GgufValue::ToString(size_t max_elements) const {
  if (!is_array()) {
    return std::string(GgufValueTypeName(static_cast<uint32_t>(type_))) + " " +
           ScalarText(type_, bits_, float_, &string_);
  }
  const uint32_t et = static_cast<uint32_t>(element_type_);
  std::string out = StrFormat("array<%s>[%zu] {", GgufValueTypeName(et), size());
  const size_t n = std::min(size(), max_elements);
  const size_t es = GgufScalarSize(element_type_);
  for (size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    if (element_type_ == GgufValueType::kString) {
      out += Quote(strings_[i]);
    } else {
      const uint8_t* p = packed_.data() + i * es;
      const bool is_float = IsFloatType(element_type_);
      out += ScalarText(element_type_, is_float ? 0 : LoadInteger(element_type_, p),
                        is_float ? LoadFloat(element_type_, p) : 0.0, nullptr);
    }
  }
  if (size() > n) out += ", ...";
  return out + "}";
}

// ---------------------------------------------------------------------------------------------------------
// GgufMetadata

const GgufValue* GgufMetadata::Find(std::string_view key) const {
  const auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

Status GgufMetadata::Add(std::string key, GgufValue value) {
  if (values_.count(key) != 0) {
    return DataLoss("metadata key " + Quote(key) + " appears twice; GGUF keys must be unique");
  }
  keys_.push_back(key);
  values_.emplace(std::move(key), std::move(value));
  return Status::Ok();
}

Result<const GgufValue*> GgufMetadata::Get(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFound("metadata key " + std::string(key) + " is not in " + source_);
  return v;
}

Status GgufMetadata::WrongType(std::string_view key, const GgufValue& v, const char* wanted) const {
  std::string found = v.is_array()
                          ? StrFormat("array<%s>", GgufValueTypeName(static_cast<uint32_t>(v.element_type())))
                          : GgufValueTypeName(static_cast<uint32_t>(v.type()));
  return InvalidArgument("metadata key " + std::string(key) + " in " + source_ + " is " + found + ", not " +
                         wanted);
}

Result<int64_t> GgufMetadata::GetI64(std::string_view key) const {
  LFM_ASSIGN_OR_RETURN(const GgufValue* v, Get(key));
  if (!IsIntegerType(v->type())) return WrongType(key, *v, "an integer");
  int64_t x = 0;
  if (!v->ToInt64(&x)) {
    return OutOfRange("metadata key " + std::string(key) + " in " + source_ + " is " + v->ToString() +
                      ", which does not fit i64");
  }
  return x;
}

Result<uint64_t> GgufMetadata::GetU64(std::string_view key) const {
  LFM_ASSIGN_OR_RETURN(const GgufValue* v, Get(key));
  if (!IsIntegerType(v->type())) return WrongType(key, *v, "an integer");
  uint64_t x = 0;
  if (!v->ToUint64(&x)) {
    return OutOfRange("metadata key " + std::string(key) + " in " + source_ + " is " + v->ToString() +
                      ", which does not fit u64");
  }
  return x;
}

Result<uint32_t> GgufMetadata::GetU32(std::string_view key) const {
  LFM_ASSIGN_OR_RETURN(const GgufValue* v, Get(key));
  if (!IsIntegerType(v->type())) return WrongType(key, *v, "an integer");
  uint64_t x = 0;
  if (!v->ToUint64(&x) || x > std::numeric_limits<uint32_t>::max()) {
    return OutOfRange("metadata key " + std::string(key) + " in " + source_ + " is " + v->ToString() +
                      ", which does not fit u32");
  }
  return static_cast<uint32_t>(x);
}

Result<int32_t> GgufMetadata::GetI32(std::string_view key) const {
  LFM_ASSIGN_OR_RETURN(const GgufValue* v, Get(key));
  if (!IsIntegerType(v->type())) return WrongType(key, *v, "an integer");
  int64_t x = 0;
  if (!v->ToInt64(&x) || x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max()) {
    return OutOfRange("metadata key " + std::string(key) + " in " + source_ + " is " + v->ToString() +
                      ", which does not fit i32");
  }
  return static_cast<int32_t>(x);
}

Result<float> GgufMetadata::GetF32(std::string_view key) const {
  LFM_ASSIGN_OR_RETURN(const GgufValue* v, Get(key));
  double x = 0;
  if (!v->ToDouble(&x)) return WrongType(key, *v, "f32");
  return static_cast<float>(x);
}

Result<bool> GgufMetadata::GetBool(std::string_view key) const {
  LFM_ASSIGN_OR_RETURN(const GgufValue* v, Get(key));
  if (v->type() != GgufValueType::kBool) return WrongType(key, *v, "bool");
  return v->bool_value();
}

Result<std::string> GgufMetadata::GetString(std::string_view key) const {
  LFM_ASSIGN_OR_RETURN(const GgufValue* v, Get(key));
  if (v->type() != GgufValueType::kString) return WrongType(key, *v, "string");
  return v->string_value();
}

Result<std::vector<int64_t>> GgufMetadata::GetIntArray(std::string_view key) const {
  LFM_ASSIGN_OR_RETURN(const GgufValue* v, Get(key));
  if (!v->is_array() || !IsIntegerType(v->element_type())) return WrongType(key, *v, "an integer array");
  std::vector<int64_t> out(v->size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!v->IntAt(i, &out[i])) {
      return OutOfRange(StrFormat("metadata key %s in %s: element %zu does not fit i64",
                                  std::string(key).c_str(), source_.c_str(), i));
    }
  }
  return out;
}

Result<std::vector<float>> GgufMetadata::GetF32Array(std::string_view key) const {
  LFM_ASSIGN_OR_RETURN(const GgufValue* v, Get(key));
  if (!v->is_array() || !IsFloatType(v->element_type())) return WrongType(key, *v, "an f32 array");
  std::vector<float> out(v->size());
  for (size_t i = 0; i < out.size(); ++i) {
    double x = 0;
    v->DoubleAt(i, &x);
    out[i] = static_cast<float>(x);
  }
  return out;
}

Result<std::vector<std::string>> GgufMetadata::GetStringArray(std::string_view key) const {
  LFM_ASSIGN_OR_RETURN(const GgufValue* v, Get(key));
  if (!v->is_array() || v->element_type() != GgufValueType::kString)
    return WrongType(key, *v, "a string array");
  return v->strings();
}

// ---------------------------------------------------------------------------------------------------------
// Parser

Result<GgufHeader> ParseGguf(std::string_view file) {
  Reader r(file);
  GgufHeader h;
  LFM_RETURN_IF_ERROR(r.Need(4, "the magic \"GGUF\""));
  if (std::memcmp(file.data(), "GGUF", 4) != 0) {
    return DataLoss("the file does not start with the magic \"GGUF\"; it is not a GGUF file");
  }
  r.Skip(4);
  LFM_RETURN_IF_ERROR(r.U32("the version", &h.version));
  if (h.version != 2 && h.version != 3) {
    return Unimplemented(StrFormat("GGUF version %u is not supported (lfmvox reads versions 2 and 3%s)",
                                   h.version,
                                   h.version == 1 ? "; re-convert the model with a current converter" : ""));
  }
  uint64_t n_tensors = 0, n_kv = 0;
  LFM_RETURN_IF_ERROR(r.U64("the tensor count", &n_tensors));
  LFM_RETURN_IF_ERROR(r.U64("the metadata KV count", &n_kv));
  // Bound both counts by the bytes left, before reserving anything: a KV takes at least 13 bytes (key length,
  // one key byte, value type, a 1-byte value), a tensor info at least 33 (name length, one name byte, n_dims,
  // one ne, type, offset).
  constexpr uint64_t kMinKv = 8 + 1 + 4 + 1, kMinTensorInfo = 8 + 1 + 4 + 8 + 4 + 8;
  if (n_kv > r.left() / kMinKv || n_tensors > (r.left() - n_kv * kMinKv) / kMinTensorInfo) {
    return DataLoss(
        StrFormat("the header claims %llu tensors and %llu metadata KVs, more than the %llu bytes "
                  "after it can hold; the file is truncated or corrupt",
                  static_cast<ull>(n_tensors), static_cast<ull>(n_kv), static_cast<ull>(r.left())));
  }

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    LFM_RETURN_IF_ERROR(
        r.String(StrFormat("the key of metadata KV #%llu", static_cast<ull>(i)), kGgufMaxKeyBytes, &key));
    if (key.empty()) return DataLoss(StrFormat("metadata KV #%llu has an empty key", static_cast<ull>(i)));
    const std::string what = "metadata key " + Quote(key);
    uint32_t type = 0;
    LFM_RETURN_IF_ERROR(r.U32("the value type of " + what, &type));
    GgufValue v;
    LFM_RETURN_IF_ERROR(ReadValue(r, type, what, &v));
    if (key == "general.alignment") {
      // ggml requires a u32 here; anything else would silently change where every tensor lies.
      uint64_t a = 0;
      if (v.type() != GgufValueType::kU32 || !v.ToUint64(&a) || a == 0 || !std::has_single_bit(a) ||
          a > kGgufMaxAlignment) {
        return DataLoss(StrFormat("general.alignment is %s; it must be a u32 power of two from 1 to %u",
                                  v.ToString().c_str(), kGgufMaxAlignment));
      }
      h.alignment = static_cast<uint32_t>(a);
    }
    LFM_RETURN_IF_ERROR(h.metadata.Add(std::move(key), std::move(v)));
  }

  h.tensors.reserve(static_cast<size_t>(n_tensors));
  std::map<std::string_view, uint64_t> seen;  // views into h.tensors, which no longer reallocates
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    LFM_RETURN_IF_ERROR(ReadTensorInfo(r, i, &t));
    h.tensors.push_back(std::move(t));
    const GgufTensor& back = h.tensors.back();
    if (!seen.emplace(back.name, i).second) {
      return DataLoss(
          StrFormat("tensor %s appears twice (infos #%llu and #%llu); tensor names must be unique",
                    Quote(back.name).c_str(), static_cast<ull>(seen[back.name]), static_cast<ull>(i)));
    }
  }

  // The blob starts at the end of the infos padded to the alignment; the padding must be there.
  h.data_offset = (r.pos() + h.alignment - 1) / h.alignment * h.alignment;
  LFM_RETURN_IF_ERROR(r.Need(h.data_offset - r.pos(), "the padding before the tensor data"));
  const uint64_t blob = file.size() - h.data_offset;
  for (GgufTensor& t : h.tensors) {
    const std::string tw = "tensor " + Quote(t.name);
    if (t.offset % h.alignment != 0) {
      return DataLoss(StrFormat("%s has data offset %llu, not a multiple of the alignment %u", tw.c_str(),
                                static_cast<ull>(t.offset), h.alignment));
    }
    if (t.offset > blob || t.bytes > blob - t.offset) {
      return DataLoss(
          StrFormat("%s (%s %s, %llu bytes at data offset %llu) runs past the end of the %llu-byte "
                    "data blob; the file is truncated",
                    tw.c_str(), GgmlTypeName(t.type), ShapeString(t).c_str(), static_cast<ull>(t.bytes),
                    static_cast<ull>(t.offset), static_cast<ull>(blob)));
    }
    t.data = reinterpret_cast<const uint8_t*>(file.data()) + h.data_offset + t.offset;
  }

  // Sorted by offset, (non-empty) spans overlap iff one starts before the furthest end seen so far.
  std::vector<size_t> order(h.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return h.tensors[a].offset < h.tensors[b].offset; });
  const GgufTensor* furthest = nullptr;
  for (size_t i : order) {
    const GgufTensor& t = h.tensors[i];
    if (furthest != nullptr && t.offset < furthest->offset + furthest->bytes) {
      return DataLoss(StrFormat("tensors %s [%llu, %llu) and %s [%llu, %llu) overlap in the data blob",
                                Quote(furthest->name).c_str(), static_cast<ull>(furthest->offset),
                                static_cast<ull>(furthest->offset + furthest->bytes), Quote(t.name).c_str(),
                                static_cast<ull>(t.offset), static_cast<ull>(t.offset + t.bytes)));
    }
    if (furthest == nullptr || t.offset + t.bytes > furthest->offset + furthest->bytes) furthest = &t;
  }
  return h;
}

// ---------------------------------------------------------------------------------------------------------
// GgufFile

GgufFile::~GgufFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

Status GgufFile::Init(const void* base, size_t size) {
  LFM_ASSIGN_OR_RETURN(header_, ParseGguf(std::string_view(static_cast<const char*>(base), size)));
  header_.metadata.set_source(path_);
  for (size_t i = 0; i < header_.tensors.size(); ++i) by_name_.emplace(header_.tensors[i].name, i);
  return Status::Ok();
}

Result<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  LFM_ASSIGN_OR_RETURN(const MappedFile m, MapReadOnly(path));
  f->map_ = m.data;
  f->map_size_ = m.size;
  LFM_RETURN_IF_ERROR(f->Init(f->map_ != nullptr ? f->map_ : "", m.size).WithContext(path));
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::OpenFromMemory(std::string_view bytes, std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::move(name);
  f->owned_.Reset(bytes.size());
  if (!bytes.empty()) std::memcpy(f->owned_.data(), bytes.data(), bytes.size());
  const void* base = f->owned_.data() != nullptr ? static_cast<const void*>(f->owned_.data()) : "";
  LFM_RETURN_IF_ERROR(f->Init(base, bytes.size()).WithContext(f->path_));
  return f;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.tensors[it->second];
}

Result<const GgufTensor*> GgufFile::GetTensor(std::string_view name) const {
  const GgufTensor* t = FindTensor(name);
  if (t == nullptr) return NotFound("tensor " + std::string(name) + " is not in " + path_);
  return t;
}

}  // namespace lfmvox
