#include "codec_util.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>

namespace lfmvox::server {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::array<int8_t, 256> DecodeTable() {
  std::array<int8_t, 256> t;
  t.fill(-1);
  for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return t;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of `key=` in a header's parameters (`form-data; name="file"; filename="a.wav"`), quoted or
// not; nullopt when absent.
std::optional<std::string> Param(std::string_view h, std::string_view key) {
  const size_t n = h.size();
  size_t i = 0;
  while (i < n) {
    while (i < n && (h[i] == ' ' || h[i] == '\t' || h[i] == ';')) ++i;
    const size_t start = i;
    while (i < n && h[i] != '=' && h[i] != ';') ++i;
    const std::string name = Lower(Trim(h.substr(start, i - start)));
    if (i >= n || h[i] != '=') continue;
    ++i;
    while (i < n && h[i] == ' ') ++i;
    std::string value;
    if (i < n && h[i] == '"') {
      for (++i; i < n && h[i] != '"'; ++i) {
        if (h[i] == '\\' && i + 1 < n) ++i;
        value.push_back(h[i]);
      }
      while (i < n && h[i] != ';') ++i;
    } else {
      const size_t vs = i;
      while (i < n && h[i] != ';') ++i;
      value = std::string(Trim(h.substr(vs, i - vs)));
    }
    if (name == key) return value;
  }
  return std::nullopt;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8 |
                       static_cast<uint8_t>(bytes[i + 2]);
    out.push_back(kAlphabet[v >> 18]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back(kAlphabet[v & 63]);
  }
  if (i < bytes.size()) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out.push_back(kAlphabet[v >> 18]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

Result<std::string> Base64Decode(std::string_view text, size_t max_bytes) {
  static const std::array<int8_t, 256> table = DecodeTable();
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return InvalidArgument("base64 data has an impossible length");
  if (text.size() / 4 * 3 > max_bytes) {
    return OutOfRange("base64 data decodes to more than " + std::to_string(max_bytes) + " bytes");
  }
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const int8_t v = table[static_cast<uint8_t>(text[i])];
    if (v < 0)
      return InvalidArgument("base64 data holds a character outside the alphabet at offset " +
                             std::to_string(i));
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (out.size() > max_bytes)
    return OutOfRange("base64 data decodes to more than " + std::to_string(max_bytes) + " bytes");
  return out;
}

Result<std::string> MultipartBoundary(std::string_view content_type) {
  const std::string lower = Lower(content_type);
  if (lower.rfind("multipart/form-data", 0) != 0) {
    return InvalidArgument("the body must be multipart/form-data (Content-Type is \"" +
                           std::string(content_type) + "\")");
  }
  std::optional<std::string> b = Param(content_type, "boundary");
  if (!b || b->empty() || b->size() > 70) {
    return InvalidArgument("the multipart/form-data Content-Type needs a boundary of 1 to 70 characters");
  }
  return *b;
}

Result<std::vector<FormPart>> ParseMultipart(std::string_view body, std::string_view boundary,
                                             const MultipartLimits& limits) {
  const std::string delim = "--" + std::string(boundary);
  const std::string next_delim = "\r\n" + delim;
  std::vector<FormPart> parts;
  // The preamble ends at the first delimiter, which starts the body or follows a CRLF.
  size_t pos;
  if (body.substr(0, delim.size()) == delim) {
    pos = delim.size();
  } else {
    const size_t at = body.find(next_delim);
    if (at == std::string_view::npos) return InvalidArgument("multipart body: the boundary never appears");
    pos = at + next_delim.size();
  }
  for (;;) {
    // After a delimiter: "--" closes the body, CRLF opens a part.
    if (body.substr(pos, 2) == "--") return parts;
    if (body.substr(pos, 2) != "\r\n")
      return InvalidArgument("multipart body: a boundary is not followed by CRLF");
    pos += 2;
    if (parts.size() >= limits.max_parts) {
      return InvalidArgument("multipart body: more than " + std::to_string(limits.max_parts) + " parts");
    }
    const size_t headers_end = body.find("\r\n\r\n", pos);
    const bool no_headers = body.substr(pos, 2) == "\r\n";
    if (!no_headers && headers_end == std::string_view::npos) {
      return InvalidArgument("multipart body: a part's headers never end (truncated body?)");
    }
    const size_t hend = no_headers ? pos : headers_end;
    if (hend - pos > limits.max_part_header_bytes) {
      return InvalidArgument("multipart body: a part's headers are over " +
                             std::to_string(limits.max_part_header_bytes) + " bytes");
    }
    FormPart part;
    bool has_disposition = false;
    std::string_view headers = body.substr(pos, hend - pos);
    while (!headers.empty()) {
      const size_t eol = headers.find("\r\n");
      std::string_view line = headers.substr(0, eol);
      headers = eol == std::string_view::npos ? std::string_view{} : headers.substr(eol + 2);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos)
        return InvalidArgument("multipart body: a part header without ':'");
      const std::string key = Lower(Trim(line.substr(0, colon)));
      std::string_view value = Trim(line.substr(colon + 1));
      if (key == "content-disposition") {
        if (Lower(value).rfind("form-data", 0) != 0) {
          return InvalidArgument("multipart body: a part's Content-Disposition is not form-data");
        }
        has_disposition = true;
        part.name = Param(value, "name").value_or("");
        part.filename = Param(value, "filename").value_or("");
      } else if (key == "content-type") {
        part.content_type = std::string(value);
      }
    }
    if (!has_disposition || part.name.empty()) {
      return InvalidArgument("multipart body: a part without a Content-Disposition name");
    }
    const size_t data = hend + (no_headers ? 2 : 4);
    const size_t end = body.find(next_delim, data);
    if (end == std::string_view::npos) {
      return InvalidArgument("multipart body: part \"" + part.name +
                             "\" has no closing boundary (truncated body?)");
    }
    part.body = body.substr(data, end - data);
    parts.push_back(std::move(part));
    pos = end + next_delim.size();
  }
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

std::optional<std::string_view> HeaderToken(std::string_view list, std::string_view prefix) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view token = list.substr(0, comma);
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
    if (token.starts_with(prefix)) return token.substr(prefix.size());
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  return std::nullopt;
}

}  // namespace lfmvox::server
