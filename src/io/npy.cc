#include "io/npy.h"

#include <cstring>
#include <sstream>

#include "base/file_read.h"
#include "base/file_write.h"

namespace lfmvox {

namespace {

// Finds `'key': value` in the header dict and returns the value text.
bool FindField(std::string_view header, std::string_view key, std::string_view* value) {
  std::string quoted = "'";  // built piecewise: GCC 12 gives a false -Wrestrict on "'" + std::string(key)
  quoted.append(key).push_back('\'');
  const size_t k = header.find(quoted);
  if (k == std::string_view::npos) return false;
  size_t p = header.find(':', k + quoted.size());
  if (p == std::string_view::npos) return false;
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  *value = header.substr(p);
  return true;
}

}  // namespace

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> NpyArray::ToFloat() const {
  const size_t n = static_cast<size_t>(elements());
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::kF32: {
        float v;
        std::memcpy(&v, &bytes[i * 4], 4);
        out[i] = v;
        break;
      }
      case DType::kF64: {
        double v;
        std::memcpy(&v, &bytes[i * 8], 8);
        out[i] = static_cast<float>(v);
        break;
      }
      case DType::kI32: {
        int32_t v;
        std::memcpy(&v, &bytes[i * 4], 4);
        out[i] = static_cast<float>(v);
        break;
      }
      default: {
        int64_t v;
        std::memcpy(&v, &bytes[i * 8], 8);
        out[i] = static_cast<float>(v);
        break;
      }
    }
  }
  return out;
}

std::vector<int64_t> NpyArray::ToInt64() const {
  const size_t n = static_cast<size_t>(elements());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::kF32: {
        float v;
        std::memcpy(&v, &bytes[i * 4], 4);
        out[i] = static_cast<int64_t>(v);
        break;
      }
      case DType::kF64: {
        double v;
        std::memcpy(&v, &bytes[i * 8], 8);
        out[i] = static_cast<int64_t>(v);
        break;
      }
      case DType::kI32: {
        int32_t v;
        std::memcpy(&v, &bytes[i * 4], 4);
        out[i] = v;
        break;
      }
      default: {
        int64_t v;
        std::memcpy(&v, &bytes[i * 8], 8);
        out[i] = v;
        break;
      }
    }
  }
  return out;
}

Result<NpyArray> ParseNpy(std::string_view data) {
  static constexpr char kMagic[] = "\x93NUMPY";
  if (data.size() < 10 || std::memcmp(data.data(), kMagic, 6) != 0) {
    return InvalidArgument("not a .npy file (missing the \\x93NUMPY magic)");
  }
  const uint8_t major = static_cast<uint8_t>(data[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(data[8]) | (static_cast<size_t>(static_cast<uint8_t>(data[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) return DataLoss(".npy header is truncated");
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<uint8_t>(data[8 + i])) << (8 * i);
    offset = 12;
  } else {
    return Unimplemented(StrFormat(".npy format version %d is not supported (1, 2 or 3 are)", major));
  }
  if (header_len > data.size() - offset) return DataLoss(".npy header runs past the end of the file");
  const std::string_view header = data.substr(offset, header_len);
  offset += header_len;

  std::string_view descr, order, shape;
  if (!FindField(header, "descr", &descr) || !FindField(header, "fortran_order", &order) ||
      !FindField(header, "shape", &shape)) {
    return DataLoss(".npy header lacks descr, fortran_order or shape");
  }
  NpyArray a;
  size_t elem = 0;
  if (descr.starts_with("'<f4'")) {
    a.dtype = DType::kF32;
    elem = 4;
  } else if (descr.starts_with("'<f8'")) {
    a.dtype = DType::kF64;
    elem = 8;
  } else if (descr.starts_with("'<i4'")) {
    a.dtype = DType::kI32;
    elem = 4;
  } else if (descr.starts_with("'<i8'")) {
    a.dtype = DType::kI64;
    elem = 8;
  } else
    return Unimplemented(".npy dtype " + std::string(descr.substr(0, descr.find(','))) +
                         " is not supported (use <f4, <f8, <i4 or <i8)");
  if (!order.starts_with("False"))
    return Unimplemented(".npy in Fortran order is not supported; save C order");
  if (shape.empty() || shape[0] != '(') return DataLoss(".npy shape is malformed");
  const size_t close = shape.find(')');
  if (close == std::string_view::npos) return DataLoss(".npy shape is malformed");
  std::string_view dims = shape.substr(1, close - 1);
  uint64_t total = 1, nonzero_product = 1;
  while (!dims.empty()) {
    while (!dims.empty() && (dims[0] == ' ' || dims[0] == ',')) dims.remove_prefix(1);
    if (dims.empty()) break;
    uint64_t d = 0;
    size_t digits = 0;
    while (!dims.empty() && dims[0] >= '0' && dims[0] <= '9') {
      d = d * 10 + static_cast<uint64_t>(dims[0] - '0');
      if (d > (1ull << 40)) return OutOfRange(".npy dimension is absurdly large");
      dims.remove_prefix(1);
      ++digits;
    }
    if (digits == 0) return DataLoss(".npy shape holds a non-integer");
    if (a.shape.size() >= 8) return Unimplemented(".npy with more than 8 dimensions");
    a.shape.push_back(static_cast<int64_t>(d));
    // Bound the product of the non-zero dims, not the running product: a zero dim would otherwise let
    // later dims grow without limit and overflow elements() (e.g. shape (0, 2**40, 2**40)), and checking
    // only after the multiply lets (2**40, 2**40) wrap to 0.
    if (d != 0 &&
        (__builtin_mul_overflow(nonzero_product, d, &nonzero_product) || nonzero_product > (1ull << 40))) {
      return OutOfRange(".npy holds too many elements");
    }
    total *= d;
  }
  const uint64_t need = total * elem;
  if (data.size() - offset != need) {
    return DataLoss(StrFormat(".npy data holds %zu bytes but the shape needs %llu", data.size() - offset,
                              static_cast<unsigned long long>(need)));
  }
  a.bytes.assign(reinterpret_cast<const uint8_t*>(data.data() + offset),
                 reinterpret_cast<const uint8_t*>(data.data() + data.size()));
  return a;
}

Result<NpyArray> ReadNpy(const std::string& path) {
  // Regular files only (a FIFO would block, a directory throw), at most kMaxNpyFileBytes.
  LFM_ASSIGN_OR_RETURN(const std::string data, ReadFileToString(path, kMaxNpyFileBytes));
  Result<NpyArray> r = ParseNpy(data);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

Status WriteNpy(const std::string& path, const NpyArray& a) {
  const char* descr = a.dtype == DType::kF32 ? "<f4" : a.dtype == DType::kI64 ? "<i8" : nullptr;
  if (descr == nullptr) return Unimplemented("WriteNpy writes f32 or i64 only");
  std::ostringstream h;
  h << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < a.shape.size(); ++i)
    h << a.shape[i] << (a.shape.size() == 1 || i + 1 < a.shape.size() ? "," : "");
  h << "), }";
  std::string header = h.str();
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  const uint16_t len = static_cast<uint16_t>(header.size());
  std::string file("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(len & 0xff);
  file += static_cast<char>(len >> 8);
  file += header;
  file.append(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size());
  return WriteWholeFile(path, file);
}

}  // namespace lfmvox
