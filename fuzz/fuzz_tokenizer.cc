// Fuzzes the tokenizer (src/text). The first byte picks what the rest is:
//   0: tokenizer.json bytes for Tokenizer::LoadJson; a file that loads then encodes and decodes a fixed
//      text and the input itself.
//   1: text for the LFM2 surrogate tokenizer (tests/data/tokenizer/tokenizer.json) to encode. Valid UTF-8
//      must round-trip exactly, and the streaming decoder must agree with Decode.
//   2: little-endian int32 ids to decode with the surrogate; streaming decode must agree with Decode.
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto t = lfmvox::Tokenizer::LoadJson(rest);
      if (!t.ok()) return 0;
      for (const std::string_view text :
           {std::string_view("<|im_start|>user\nHi there, 123!<|im_end|>"), rest}) {
        auto ids = t->EncodeWithSpecialTokens(text);
        if (ids.ok()) CheckDecoders(*t, *ids);
      }
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
    default: {
      std::vector<int32_t> ids(rest.size() / 4);
      if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * 4);
      CheckDecoders(Surrogate(), ids);
      break;
    }
  }
  return 0;
}
