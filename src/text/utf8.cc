#include "text/utf8.h"

namespace lfmvox::text {
namespace {

// The shape of a well-formed sequence that starts with `lead` (Unicode Table 3-7): its length and the
// range of its second byte, which is narrower than 80..BF after E0, ED, F0 and F4 (to exclude overlong
// forms, surrogates and code points above U+10FFFF).
struct SeqShape {
  int len = 0;  // 0: `lead` cannot start a sequence
  uint8_t lo = 0x80, hi = 0xBF;
};

SeqShape ShapeOf(uint8_t lead) {
  if (lead < 0x80) return {1};
  if (lead >= 0xC2 && lead <= 0xDF) return {2};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF) return {3};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {};
}

// How many bytes of the sequence at s[pos] are well formed: shape.len for a whole character, fewer when it
// is cut short by an invalid byte or by the end of `s`.
int WellFormedPrefix(std::string_view s, size_t pos, const SeqShape& shape) {
  int n = 1;
  for (; n < shape.len && pos + n < s.size(); ++n) {
    const uint8_t b = static_cast<uint8_t>(s[pos + n]);
    const uint8_t lo = n == 1 ? shape.lo : 0x80, hi = n == 1 ? shape.hi : 0xBF;
    if (b < lo || b > hi) break;
  }
  return n;
}

}  // namespace

size_t FindInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const SeqShape shape = ShapeOf(static_cast<uint8_t>(s[i]));
    if (shape.len == 0 || WellFormedPrefix(s, i, shape) != shape.len) return i;
    i += static_cast<size_t>(shape.len);
  }
  return std::string_view::npos;
}

char32_t DecodeUtf8At(std::string_view s, size_t pos, size_t* len) {
  const uint8_t b0 = static_cast<uint8_t>(s[pos]);
  const int n = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[pos + k]) & 0x3F);
  *len = static_cast<size_t>(n);
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t AppendUtf8Lossy(std::string_view bytes, bool hold_incomplete_tail, std::string* out) {
  size_t i = 0;
  while (i < bytes.size()) {
    const SeqShape shape = ShapeOf(static_cast<uint8_t>(bytes[i]));
    if (shape.len == 0) {  // a stray continuation byte, C0, C1 or F5..FF
      AppendUtf8(kReplacementChar, out);
      ++i;
      continue;
    }
    const int n = WellFormedPrefix(bytes, i, shape);
    if (n == shape.len) {
      out->append(bytes.substr(i, static_cast<size_t>(n)));
    } else if (i + static_cast<size_t>(n) == bytes.size() && hold_incomplete_tail) {
      return i;  // a character still being completed
    } else {
      AppendUtf8(kReplacementChar, out);  // one U+FFFD for the whole maximal subpart
    }
    i += static_cast<size_t>(n);
  }
  return i;
}

bool IsUnicodeWhiteSpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

const ByteLevelAlphabet& ByteLevelAlphabet::Get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  cp_to_byte_.fill(-1);
  char32_t next_extra = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const char32_t cp = printable ? static_cast<char32_t>(b) : next_extra++;
    byte_to_cp_[b] = cp;
    cp_to_byte_[cp] = static_cast<int16_t>(b);
    std::string s;
    AppendUtf8(cp, &s);
    utf8_len_[b] = static_cast<uint8_t>(s.size());
    for (size_t k = 0; k < s.size(); ++k) utf8_[b][k] = s[k];
  }
}

}  // namespace lfmvox::text
