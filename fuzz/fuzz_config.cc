// Fuzzes config.json parsing: the bounded JSON parser (base/json_parse.h) and every family's config
// reader on what it accepts. The first byte picks the reader (mod 4): LFM2.5-Audio's model config,
// its detokenizer config, the LFM2 backbone section, LFM3-Audio's speech-output config; the rest
// is the JSON text. A reader must return a Status, never crash, throw, hang or allocate without
// bound.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/json_parse.h"
#include "io/json_config.h"
#include "models/lfm25_audio/config.h"
#include "models/lfm25_audio/lfm2_config.h"
#ifdef LFMVOX_WITH_LFM3
#include "models/lfm3_audio/lfm3_config.h"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto j = lfmvox::ParseJson(text, "config.json", lfmvox::kConfigLimits);
  if (!j.ok()) return 0;
  switch (data[0] % 4) {
    case 0:
      (void)lfmvox::Lfm25AudioConfig::FromJson(*j, "config.json");
      break;
    case 1:
      (void)lfmvox::Lfm25DetokenizerConfig::FromJson(*j, "config.json");
      break;
    case 2:
      (void)lfmvox::Lfm2Config::FromJson(*j, "config.json");
      break;
    default:
#ifdef LFMVOX_WITH_LFM3
      (void)lfmvox::Lfm3Config::FromJson(*j, "config.json");
#endif
      break;
  }
  return 0;
}
