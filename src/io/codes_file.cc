#include "io/codes_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "base/file_read.h"
#include "io/file_util.h"
#include "io/npy.h"

namespace lfmvox {

namespace {

// .npy files larger than this are refused before reading.
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

namespace {

// A line longer than this is not a frame of codes (kMaxCodebooks codes of ten digits are ~700 bytes).
constexpr size_t kMaxCodesLineBytes = size_t{1} << 20;

Status LineTooLong(size_t line_no) {
  return InvalidArgument(StrFormat(
      "line %zu is longer than %zu bytes; this is not a file of codes (one frame of codes per line)", line_no,
      kMaxCodesLineBytes));
}

// Text codes line by line, so a file is parsed as it is read: memory is the frames found plus one line.
class CodesTextParser {
 public:
  explicit CodesTextParser(int num_codebooks) { out_.num_codebooks = num_codebooks; }

  Status Line(std::string_view line) {
    ++line_no_;
    if (line.size() > kMaxCodesLineBytes) return LineTooLong(line_no_);
    line = line.substr(0, line.find('#'));
    LFM_ASSIGN_OR_RETURN(const size_t count, ParseLine(line, line_no_, &out_.codes));
    if (count == 0) return Status::Ok();  // blank or comment-only
    if (count != static_cast<size_t>(out_.num_codebooks)) {
      return InvalidArgument(StrFormat("line %zu has %zu codes; expected %d (one per codebook)", line_no_,
                                       count, out_.num_codebooks));
    }
    if (out_.frames() > kMaxCodeFrames) {
      return OutOfRange(
          StrFormat("more than %zu code frames; refusing an absurdly long input", kMaxCodeFrames));
    }
    return Status::Ok();
  }

  size_t line_no() const { return line_no_; }

  Result<CodeFrames> Finish() && {
    if (out_.codes.empty())
      return InvalidArgument("no code frames found (one line of codes per frame expected)");
    return std::move(out_);
  }

 private:
  CodeFrames out_;
  size_t line_no_ = 0;
};

Result<CodeFrames> ReadCodesText(const OpenedFile& file, int num_codebooks) {
  CodesTextParser parser(num_codebooks);
  std::string pending;  // the start of a line the last read cut
  std::vector<char> buf(size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(file.fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError(std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) break;
    std::string_view chunk(buf.data(), static_cast<size_t>(n));
    for (size_t nl; (nl = chunk.find('\n')) != std::string_view::npos; chunk.remove_prefix(nl + 1)) {
      if (pending.empty()) {
        LFM_RETURN_IF_ERROR(parser.Line(chunk.substr(0, nl)));
      } else {
        pending.append(chunk.substr(0, nl));
        LFM_RETURN_IF_ERROR(parser.Line(pending));
        pending.clear();
      }
    }
    pending.append(chunk);
    if (pending.size() > kMaxCodesLineBytes) return LineTooLong(parser.line_no() + 1);
  }
  if (!pending.empty()) LFM_RETURN_IF_ERROR(parser.Line(pending));
  return std::move(parser).Finish();
}

}  // namespace

Result<CodeFrames> ParseCodesText(std::string_view text, int num_codebooks) {
  LFM_RETURN_IF_ERROR(CheckCodebooks(num_codebooks));
  CodesTextParser parser(num_codebooks);
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    LFM_RETURN_IF_ERROR(parser.Line(text.substr(0, nl)));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  return std::move(parser).Finish();
}

Result<CodeFrames> ReadCodesFile(const std::string& path, int num_codebooks) {
  LFM_RETURN_IF_ERROR(CheckCodebooks(num_codebooks));
  LFM_ASSIGN_OR_RETURN(const OpenedFile file, OpenRegularFile(path));
  // A .npy array is read whole (bounded by kMaxCodesFileBytes); text is parsed as it is read.
  char magic[6] = {};
  const bool npy = ::pread(file.fd, magic, sizeof magic, 0) == static_cast<ssize_t>(sizeof magic) &&
                   std::string_view(magic, sizeof magic) == "\x93NUMPY";
  Result<CodeFrames> r = [&]() -> Result<CodeFrames> {
    if (!npy) return ReadCodesText(file, num_codebooks);
    LFM_ASSIGN_OR_RETURN(const std::string data, ReadFileToString(path, kMaxCodesFileBytes));
    return ParseCodesNpy(data, num_codebooks);
  }();
  ::close(file.fd);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

}  // namespace lfmvox
