// Fuzzes the server's parsing of request bodies (apps/server/request_parse.h, codec_util.h): the
// first byte picks the parser (mod 4): the transcription form (multipart/form-data; the next line is
// the Content-Type, the rest the body), the speech request's JSON, a chat request's JSON through the
// field access the chat handler uses, base64 (input_audio data). Each must return an error object,
// never crash, throw, hang or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "codec_util.h"
#include "request_parse.h"

using namespace lfmvox::server;

namespace {

void Chat(std::string_view text) {
  nlohmann::json body;
  if (ParseObject(text, &body)) return;
  std::string s;
  std::optional<double> d;
  bool b = false;
  uint64_t seed = 0;
  (void)GetString(body, "model", &s, false);
  (void)GetBool(body, "stream", &b);
  (void)GetNumber(body, "max_tokens", 1, 1 << 20, &d);
  (void)GetSeed(body, &seed);
  const nlohmann::json* msgs = Field(body, "messages");
  if (msgs == nullptr || !msgs->is_array()) return;
  for (const nlohmann::json& m : *msgs) {
    if (!m.is_object()) continue;
    (void)GetString(m, "role", &s, true);
    const nlohmann::json* content = Field(m, "content");
    if (content == nullptr || !content->is_array()) continue;
    for (const nlohmann::json& part : *content) {
      if (!part.is_object()) continue;
      (void)GetString(part, "type", &s, true);
      (void)GetString(part, "text", &s, false);
      const nlohmann::json* ia = Field(part, "input_audio");
      if (ia != nullptr && ia->is_object() && !GetString(*ia, "data", &s, true)) {
        (void)Base64Decode(s, 1u << 20);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      const size_t nl = text.find('\n');
      const std::string_view ct = text.substr(0, nl);
      const std::string_view body = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
      TranscriptionForm form;
      if (!ParseTranscriptionForm(ct, body, &form) && form.file >= form.parts.size()) __builtin_trap();
      break;
    }
    case 1: {
      SpeechRequest r;
      if (!ParseSpeechRequest(text, 4096, &r) && r.input.empty()) __builtin_trap();
      break;
    }
    case 2:
      Chat(text);
      break;
    default:
      (void)Base64Decode(text, 1u << 20);
      break;
  }
  return 0;
}
