// Fuzzes the tokenizer (src/text). The first byte picks what the rest is:
//   0: tokenizer.json bytes for Tokenizer::LoadJson; a file that loads then encodes and decodes a fixed
//      text and the input itself.
//   1: text for the LFM2 surrogate tokenizer (tests/data/tokenizer/tokenizer.json) to encode. Valid UTF-8
//      must round-trip exactly, and the streaming decoder must agree with Decode.
//   2: little-endian int32 ids to decode with the surrogate; streaming decode must agree with Decode.
//   3: a GGUF vocabulary for Tokenizer::FromVocab (see VocabFromBytes); one that loads encodes and decodes
//      a fixed text and the input, and goes through ExportVocab and FromVocab again.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

namespace {

const lfmvox::Tokenizer& Surrogate() {
  static const lfmvox::Tokenizer* t = [] {
    auto r = lfmvox::Tokenizer::LoadFile(LFMVOX_TOKENIZER_JSON);
    if (!r.ok()) __builtin_trap();  // a setup error, not a finding
    return new lfmvox::Tokenizer(std::move(r).value());
  }();
  return *t;
}

void CheckDecoders(const lfmvox::Tokenizer& t, const std::vector<int32_t>& ids) {
  for (const bool skip : {false, true}) {
    const std::string whole = t.Decode(ids, skip);
    lfmvox::Tokenizer::StreamDecoder d(t, skip);
    std::string streamed;
    for (const int32_t id : ids) d.Push(id, &streamed);
    streamed += d.Finish();
    if (streamed != whole) __builtin_trap();
  }
}

// rest[0]: bit 0 add_bos, bit 1 add_eos, bits 2-3 the pre name, bit 4 the byte-level alphabet first (ids
// 0..255). Then '\n'-separated lines: "m<left right>" is a merge, "<digit><text>" a token of that type, any
// other line a normal token. bos is id 0 and eos the last id, when there are tokens.
lfmvox::TokenizerVocab VocabFromBytes(std::string_view rest) {
  lfmvox::TokenizerVocab v;
  v.model = "gpt2";
  if (rest.empty()) return v;
  const uint8_t flags = static_cast<uint8_t>(rest[0]);
  static constexpr const char* kPre[] = {"lfm2", "llama-bpe", "llama3", "gpt-2"};
  v.pre = kPre[(flags >> 2) & 3];
  if (flags & 16) {
    // The GPT-2 byte-to-symbol table: printable Latin-1 as itself, the rest from U+0100 up.
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
      std::string u;
      if (cp < 0x80) {
        u.push_back(static_cast<char>(cp));
      } else {
        u.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        u.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      v.tokens.push_back(u);
      v.token_types.push_back(lfmvox::TokenizerVocab::kNormal);
    }
  }
  size_t pos = 1;
  while (pos <= rest.size()) {
    size_t end = rest.find('\n', pos);
    if (end == std::string_view::npos) end = rest.size();
    const std::string_view line = rest.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line[0] == 'm') {
      v.merges.emplace_back(line.substr(1));
    } else if (!line.empty() && line[0] >= '0' && line[0] <= '9') {
      v.tokens.emplace_back(line.substr(1));
      v.token_types.push_back(line[0] - '0');
    } else {
      v.tokens.emplace_back(line);
      v.token_types.push_back(lfmvox::TokenizerVocab::kNormal);
    }
  }
  v.add_bos = (flags & 1) != 0;
  v.add_eos = (flags & 2) != 0;
  if (!v.tokens.empty()) {
    v.bos = 0;
    v.eos = static_cast<int32_t>(v.tokens.size()) - 1;
  }
  return v;
}

void EncodeAndDecode(const lfmvox::Tokenizer& t, std::string_view input) {
  for (const std::string_view text :
       {std::string_view("<|im_start|>user\nHi there, 123!<|im_end|>"), input}) {
    auto ids = t.EncodeWithSpecialTokens(text);
    if (ids.ok()) CheckDecoders(t, *ids);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto t = lfmvox::Tokenizer::LoadJson(rest);
      if (!t.ok()) return 0;
      EncodeAndDecode(*t, rest);
      (void)t->TokenText(0);
      (void)t->TokenId("a");
      break;
    }
    case 1: {
      const lfmvox::Tokenizer& t = Surrogate();
      auto ids = t.Encode(rest);
      if (!ids.ok()) return 0;  // invalid UTF-8
      if (t.Decode(*ids) != rest) __builtin_trap();
      CheckDecoders(t, *ids);
      break;
    }
    case 3: {
      auto t = lfmvox::Tokenizer::FromVocab(VocabFromBytes(rest));
      if (!t.ok()) return 0;
      EncodeAndDecode(*t, rest);
      auto exported = t->ExportVocab();
      if (!exported.ok()) __builtin_trap();  // a tokenizer made from a vocabulary always has one
      auto again = lfmvox::Tokenizer::FromVocab(*exported);
      if (again.ok()) EncodeAndDecode(*again, rest);
      break;
    }
    default: {
      std::vector<int32_t> ids(rest.size() / 4);
      if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * 4);
      CheckDecoders(Surrogate(), ids);
      break;
    }
  }
  return 0;
}
