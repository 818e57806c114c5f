// Fuzzes the prompt JSON of `lfmvox generate --prompt` and the C API (Conversation::AddPromptJson):
// the bounded JSON parser, the segment rules and what each segment feeds (the tokenizer for "text",
// the history for "ids" and "audio_out"), on the tiny LFM2.5 checkpoint (tests/data/lfm25_tiny).
// Besides no crash, leak, hang or blow-up: a prompt that is accepted must be what the documentation
// says one is (a list of one-key objects; "ids" non-negative integers; "audio_out" frames of exactly
// num_codebooks integers in [0, audio_vocab)), so a re-cut or coerced prompt is a finding.
// Inputs with an "audio" segment are skipped: it names a file to read, and the fuzzer must not open
// arbitrary paths (audio bytes have fuzz_audio).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/json_parse.h"
#include "lfmvox/lfmvox.h"

namespace {

lfmvox::Conversation& Conv() {
  static lfmvox::Conversation* c = [] {
    auto model = lfmvox::AudioModel::Load(LFMVOX_TINY_MODEL);
    if (!model.ok()) __builtin_trap();  // a setup error, not a finding
    auto conv = lfmvox::Conversation::Create(*model, {.threads = 1, .context = 256});
    if (!conv.ok()) __builtin_trap();
    return conv->release();
  }();
  return *c;
}

bool IsCode(const nlohmann::json& x, int64_t hi) {
  if (x.is_number_unsigned()) return x.get<uint64_t>() < static_cast<uint64_t>(hi);
  return x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() < hi;
}

// What an accepted prompt must be.
bool WellFormed(const nlohmann::json& j, int codebooks, int vocab) {
  if (!j.is_array()) return false;
  for (const nlohmann::json& seg : j) {
    if (!seg.is_object() || seg.size() != 1) return false;
    const std::string& key = seg.begin().key();
    const nlohmann::json& v = seg.begin().value();
    if (key == "text") {
      if (!v.is_string()) return false;
    } else if (key == "ids") {
      if (!v.is_array()) return false;
      for (const nlohmann::json& id : v) {
        if (!IsCode(id, int64_t{INT32_MAX} + 1)) return false;
      }
    } else if (key == "audio_out") {
      if (!v.is_array()) return false;
      for (const nlohmann::json& frame : v) {
        if (!frame.is_array() || frame.size() != static_cast<size_t>(codebooks)) return false;
        for (const nlohmann::json& code : frame) {
          if (!IsCode(code, vocab)) return false;
        }
      }
    } else {
      return false;
    }
  }
  return true;
}

bool HasAudioSegment(const nlohmann::json& j) {
  if (!j.is_array()) return false;
  for (const nlohmann::json& seg : j) {
    if (seg.is_object() && seg.contains("audio")) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  lfmvox::Conversation& conv = Conv();
  // The harness's own view of the document, within limits wider than any the library uses for prompts.
  auto parsed = lfmvox::ParseJson(text, "the prompt", {.max_depth = 64, .max_values = size_t{1} << 24});
  if (parsed.ok() && HasAudioSegment(*parsed)) return 0;
  conv.Reset();
  const lfmvox::Status s = conv.AddPromptJson(text, "/nonexistent");
  if (s.ok()) {
    if (!parsed.ok()) __builtin_trap();  // accepted what is not JSON within the limits
    if (!WellFormed(*parsed, conv.model().num_codebooks(), conv.model().audio_vocab())) __builtin_trap();
  } else if (s.message().empty()) {
    __builtin_trap();  // an error must say what is wrong
  }
  return 0;
}
