#include "text/sentence_split.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "base/status.h"
#include "text/utf8.h"

namespace lfmvox::text {
namespace {

// Words that a '.' follows without ending the sentence (compared case-insensitively, without the dot).
constexpr std::array<std::string_view, 30> kAbbreviations = {
    "mr",   "mrs", "ms",  "dr",  "prof", "sr",  "jr",  "st",   "vs", "etc",
    "e.g",  "i.e", "no",  "nos", "fig",  "inc", "ltd", "co",   "mt", "approx",
    "dept", "est", "vol", "cf",  "al",   "gen", "col", "capt", "ca", "jan"};

bool IsSentenceEndCjk(char32_t c) { return c == U'。' || c == U'！' || c == U'？' || c == U'；'; }
bool IsComma(char32_t c) { return c == ',' || c == ':' || c == U'，' || c == U'、' || c == U'：'; }
bool IsCloser(char32_t c) {
  return c == '"' || c == '\'' || c == ')' || c == ']' || c == U'”' || c == U'’' || c == U'」' ||
         c == U'』' || c == U'）' || c == U'»';
}
bool IsPunctuation(char32_t c) {
  return (c < 0x80 && std::ispunct(static_cast<int>(c))) || IsSentenceEndCjk(c) || IsComma(c) ||
         IsCloser(c) || c == U'…' || c == U'«' || c == U'“' || c == U'‘' || c == U'「' || c == U'『' ||
         c == U'（' || c == U'—' || c == U'–';
}

// The code point at s[i] (s is valid UTF-8) and its length.
char32_t At(std::string_view s, size_t i, size_t* len) { return DecodeUtf8At(s, i, len); }

// Whether the '.' at s[dot] follows an abbreviation or an initial.
bool AfterAbbreviation(std::string_view s, size_t dot) {
  size_t b = dot;
  while (b > 0 && (std::isalpha(static_cast<unsigned char>(s[b - 1])) || s[b - 1] == '.')) --b;
  const std::string_view word = s.substr(b, dot - b);
  if (word.empty()) return false;
  if (word.size() == 1) return true;  // an initial
  std::string lower(word);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return std::find(kAbbreviations.begin(), kAbbreviations.end(), lower) != kAbbreviations.end();
}

// Whether `piece` holds anything to speak.
bool Speakable(std::string_view piece) {
  for (size_t i = 0, len = 0; i < piece.size(); i += len) {
    const char32_t c = At(piece, i, &len);
    if (!IsUnicodeWhiteSpace(c) && !IsPunctuation(c)) return true;
  }
  return false;
}

std::string_view Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Appends `piece` (trimmed), cut into parts of at most max_bytes.
void AppendCapped(std::string_view piece, size_t max_bytes, std::vector<std::string>* out) {
  piece = Trim(piece);
  while (piece.size() > max_bytes) {
    // The last comma, else the last space, else the last character boundary within the limit.
    size_t comma = 0, space = 0, boundary = 0;
    for (size_t i = 0, len = 0; i < piece.size(); i += len) {
      const char32_t c = At(piece, i, &len);
      if (i + len > max_bytes) break;
      boundary = i + len;
      if (IsComma(c)) comma = i + len;
      if (IsUnicodeWhiteSpace(c)) space = i + len;
    }
    size_t cut = comma ? comma : space ? space : boundary;
    if (cut == 0) At(piece, 0, &cut);  // max_bytes below one character's length: that character
    if (Speakable(piece.substr(0, cut))) out->emplace_back(Trim(piece.substr(0, cut)));
    piece = Trim(piece.substr(cut));
  }
  if (!piece.empty() && Speakable(piece)) out->emplace_back(piece);
}

}  // namespace

Result<std::vector<std::string>> SplitSentences(std::string_view text, size_t max_bytes) {
  if (max_bytes == 0) return InvalidArgument("the longest segment must be at least 1 byte");
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return InvalidArgument(StrFormat("the text is not valid UTF-8 (byte %zu is 0x%02X); convert it to UTF-8",
                                     bad, static_cast<unsigned>(static_cast<unsigned char>(text[bad]))));
  }
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0, len = 0; i < text.size(); i += len) {
    const char32_t c = At(text, i, &len);
    size_t end = 0;  // past the sentence's last byte, when it ends here
    if (c == '\n' || IsSentenceEndCjk(c)) {
      end = i + len;
    } else if (c == '.' || c == '!' || c == '?' || c == ';') {
      size_t j = i + len;
      while (j < text.size()) {  // a run of ends and closers: "?!", "...", ".)"
        size_t l;
        const char32_t d = At(text, j, &l);
        if (d != '.' && d != '!' && d != '?' && d != ';' && !IsCloser(d) && d != U'…') break;
        j += l;
      }
      size_t l = 0;
      const bool at_space = j == text.size() || IsUnicodeWhiteSpace(At(text, j, &l));
      bool ends = at_space;
      if (ends && c == '.' && j == i + 1 && j < text.size()) {
        size_t k = j;  // the next word
        while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k])) && text[k] != '\n') ++k;
        const bool lower_next = k < text.size() && std::islower(static_cast<unsigned char>(text[k]));
        ends = !lower_next && !AfterAbbreviation(text, i);
      }
      if (ends) end = j;
      len = j - i;
    }
    if (end) {
      AppendCapped(text.substr(start, end - start), max_bytes, &out);
      start = end;
    }
  }
  AppendCapped(text.substr(start), max_bytes, &out);
  return out;
}

}  // namespace lfmvox::text
