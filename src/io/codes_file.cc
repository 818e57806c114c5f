#include "io/codes_file.h"

#include <algorithm>
#include <limits>

#include "io/file_util.h"
#include "io/npy.h"

namespace lfmvox {

namespace {

// Text files larger than this are refused before reading: 2^24 frames of 8 four-digit codes are ~670 MB.
constexpr uint64_t kMaxCodesFileBytes = 1ull << 30;
constexpr int64_t kMaxCode = std::numeric_limits<int32_t>::max();

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The offending token, for messages: up to the next separator, at most 24 characters, with bytes that are
// not printable ASCII shown as '?' so a binary file gives a readable message.
std::string TokenAt(std::string_view line, size_t pos) {
  size_t end = pos;
  while (end < line.size() && !IsSpace(line[end]) && line[end] != ',' && end - pos < 24) ++end;
  std::string token(line.substr(pos, std::max<size_t>(end - pos, 1)));
  for (char& c : token) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return token;
}

Status CheckCodebooks(int num_codebooks) {
  if (num_codebooks < 1 || num_codebooks > kMaxCodebooks) {
    return InvalidArgument(
        StrFormat("num_codebooks is %d; it must be in [1, %d]", num_codebooks, kMaxCodebooks));
  }
  return Status::Ok();
}

// Appends the codes of one comment-stripped line to `codes`; returns how many it held.
Result<size_t> ParseLine(std::string_view line, size_t line_no, std::vector<int32_t>* codes) {
  size_t count = 0;
  bool after_comma = false;  // a comma must be followed by a value
  size_t i = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (IsSpace(c)) {
      ++i;
    } else if (c == ',') {
      if (count == 0 || after_comma)
        return InvalidArgument(StrFormat("line %zu: empty field before ','", line_no));
      after_comma = true;
      ++i;
    } else if (IsDigit(c)) {
      const size_t start = i;
      int64_t v = 0;
      for (; i < line.size() && IsDigit(line[i]); ++i) {
        v = v * 10 + (line[i] - '0');
        if (v > kMaxCode) {
          return OutOfRange(StrFormat("line %zu: code %s is larger than %lld", line_no,
                                      TokenAt(line, start).c_str(), static_cast<long long>(kMaxCode)));
        }
      }
      if (i < line.size() && !IsSpace(line[i]) && line[i] != ',') {
        return InvalidArgument(
            StrFormat("line %zu: '%s' is not a non-negative integer", line_no, TokenAt(line, start).c_str()));
      }
      codes->push_back(static_cast<int32_t>(v));
      ++count;
      after_comma = false;
    } else if (c == '-' && i + 1 < line.size() && IsDigit(line[i + 1])) {
      return OutOfRange(StrFormat("line %zu: code %s is negative", line_no, TokenAt(line, i).c_str()));
    } else {
      return InvalidArgument(
          StrFormat("line %zu: '%s' is not a non-negative integer", line_no, TokenAt(line, i).c_str()));
    }
  }
  if (after_comma) return InvalidArgument(StrFormat("line %zu ends with ','", line_no));
  return count;
}

Result<CodeFrames> ParseCodesNpy(std::string_view data, int num_codebooks) {
  LFM_ASSIGN_OR_RETURN(const NpyArray a, ParseNpy(data));
  if (a.dtype != DType::kI32 && a.dtype != DType::kI64) {
    return InvalidArgument(std::string(".npy codes must be integers (<i4 or <i8), not ") +
                           DTypeName(a.dtype));
  }
  const bool batched = a.shape.size() == 3 && a.shape[0] == 1;
  if ((a.shape.size() != 2 && !batched) || a.shape[a.shape.size() - 2] != num_codebooks) {
    std::string shape;
    for (int64_t d : a.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    return InvalidArgument(
        StrFormat(".npy codes have shape [%s]; expected [%d, T] (codebook-major) or [1, %d, T]",
                  shape.c_str(), num_codebooks, num_codebooks));
  }
  const int64_t t = a.shape.back();
  if (t == 0) return InvalidArgument(".npy holds no code frames");
  if (static_cast<uint64_t>(t) > kMaxCodeFrames) {
    return OutOfRange(StrFormat(".npy holds %lld frames, more than the %zu accepted",
                                static_cast<long long>(t), kMaxCodeFrames));
  }
  const std::vector<int64_t> values = a.ToInt64();  // [num_codebooks, T]
  CodeFrames out;
  out.num_codebooks = num_codebooks;
  out.codes.resize(values.size());  // [T, num_codebooks]
  const size_t k_count = static_cast<size_t>(num_codebooks), frames = static_cast<size_t>(t);
  for (size_t k = 0; k < k_count; ++k) {
    for (size_t f = 0; f < frames; ++f) {
      const int64_t v = values[k * frames + f];
      if (v < 0 || v > kMaxCode) {
        return OutOfRange(StrFormat(".npy code %lld (codebook %zu, frame %zu) is outside [0, %lld]",
                                    static_cast<long long>(v), k, f, static_cast<long long>(kMaxCode)));
      }
      out.codes[f * k_count + k] = static_cast<int32_t>(v);
    }
  }
  return out;
}

}  // namespace

Result<CodeFrames> ParseCodesText(std::string_view text, int num_codebooks) {
  LFM_RETURN_IF_ERROR(CheckCodebooks(num_codebooks));
  CodeFrames out;
  out.num_codebooks = num_codebooks;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    line = line.substr(0, line.find('#'));
    LFM_ASSIGN_OR_RETURN(const size_t count, ParseLine(line, line_no, &out.codes));
    if (count == 0) continue;  // blank or comment-only
    if (count != static_cast<size_t>(num_codebooks)) {
      return InvalidArgument(
          StrFormat("line %zu has %zu codes; expected %d (one per codebook)", line_no, count, num_codebooks));
    }
    if (out.frames() > kMaxCodeFrames) {
      return OutOfRange(
          StrFormat("more than %zu code frames; refusing an absurdly long input", kMaxCodeFrames));
    }
  }
  if (out.codes.empty())
    return InvalidArgument("no code frames found (one line of codes per frame expected)");
  return out;
}

Result<CodeFrames> ReadCodesFile(const std::string& path, int num_codebooks) {
  LFM_RETURN_IF_ERROR(CheckCodebooks(num_codebooks));
  LFM_ASSIGN_OR_RETURN(const std::string data, ReadFileToString(path, kMaxCodesFileBytes));
  Result<CodeFrames> r = std::string_view(data).starts_with("\x93NUMPY")
                             ? ParseCodesNpy(data, num_codebooks)
                             : ParseCodesText(data, num_codebooks);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

}  // namespace lfmvox
