// The top-level config.json of LFM2.5-Audio (liquid-audio's nested layout:
// top-level keys plus `lfm`, `depthformer`, `encoder`, `preprocessor`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "models/lfm25_audio/lfm2_config.h"

namespace lfmvox {

struct Lfm25AudioConfig {
  Lfm2Config lfm;               // the backbone (`lfm` section)
  int codebooks = 0;            // audio codes per frame (`codebooks`)
  int interleaved_n_text = 0;   // text tokens per interleaved slot
  int interleaved_n_audio = 0;  // audio frames per interleaved slot
  nlohmann::json raw;           // the whole file, for the sections other stages read

  // Reads and validates `path` (a config.json).
  static Result<Lfm25AudioConfig> Load(const std::string& path);
};

}  // namespace lfmvox
