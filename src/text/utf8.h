// UTF-8 helpers for the tokenizer: validation, lossy conversion that matches Rust's
// String::from_utf8_lossy (what Hugging Face tokenizers' decoders use), and the GPT-2 byte-level alphabet.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lfmvox::text {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Byte offset of the first byte that does not start or continue a well-formed UTF-8 sequence (RFC 3629:
// no overlongs, no surrogates, nothing above U+10FFFF), or npos when `s` is valid throughout.
size_t FindInvalidUtf8(std::string_view s);

// Decodes the code point at s[pos], which must lie in a valid UTF-8 string; sets *len to its byte length.
char32_t DecodeUtf8At(std::string_view s, size_t pos, size_t* len);

// Appends the UTF-8 encoding of `cp` (< 0x110000, not a surrogate).
void AppendUtf8(char32_t cp, std::string* out);

// Appends `bytes` to `out` as text, replacing each maximal ill-formed subsequence with one U+FFFD, exactly as
// Rust's String::from_utf8_lossy does (the Unicode "maximal subpart" practice). When `hold_incomplete_tail`
// is set, a trailing sequence that is a valid prefix of a character (e.g. F0 9F) is not replaced but left
// unconsumed for the caller to complete later. Returns the number of bytes consumed.
size_t AppendUtf8Lossy(std::string_view bytes, bool hold_incomplete_tail, std::string* out);

// Unicode White_Space (the same set as Rust's char::is_whitespace and regex `\s`).
bool IsUnicodeWhiteSpace(char32_t cp);

// The GPT-2 byte-level alphabet that Hugging Face's ByteLevel pre-tokenizer and decoder use: every byte is
// shown as a printable code point (bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF as themselves, the other 68 as
// U+0100.. in byte order), so that BPE vocabularies hold no control or space characters.
class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& Get();

  char32_t CodePoint(uint8_t byte) const { return byte_to_cp_[byte]; }
  // The UTF-8 of CodePoint(byte): one or two bytes.
  std::string_view Utf8(uint8_t byte) const { return {utf8_[byte].data(), utf8_len_[byte]}; }
  // The byte shown by `cp`, or -1 when `cp` is not in the alphabet.
  int Byte(char32_t cp) const { return cp < kTableSize ? cp_to_byte_[cp] : -1; }

 private:
  static constexpr char32_t kTableSize = 0x144;  // the largest code point in the alphabet is U+0143
  ByteLevelAlphabet();

  std::array<char32_t, 256> byte_to_cp_{};
  std::array<std::array<char, 2>, 256> utf8_{};
  std::array<uint8_t, 256> utf8_len_{};
  std::array<int16_t, kTableSize> cp_to_byte_{};
};

}  // namespace lfmvox::text
