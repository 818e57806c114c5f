// Picks the model family from config.json.
#include "api/family.h"

#include <nlohmann/json.hpp>
#include <string>

#include "io/json_config.h"
#include "models/lfm25_audio/gguf_release.h"

namespace lfmvox {
namespace {

// `key` of `j` as compact JSON, or "none" when absent.
std::string Found(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? std::string("none") : JsonPreview(*it);
}

bool ListHas(const nlohmann::json& j, const char* key, const char* value) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return false;
  for (const auto& v : *it) {
    if (v.is_string() && v.get<std::string>() == value) return true;
  }
  return false;
}

}  // namespace

Result<std::unique_ptr<FamilyModel>> LoadFamily(const std::string& dir, const ModelOptions& options) {
  // Liquid's GGUF release (no config.json; the files say what they are).
  if (LooksLikeGgufRelease(dir)) return LoadLfm25Family(dir, options);
  const std::string path = dir + "/config.json";
  LFM_ASSIGN_OR_RETURN(const nlohmann::json cfg, ReadJsonFile(path));
  // LFM2.5-Audio: liquid-audio's "LFM2AudioModel"; a config without
  // "architectures" is taken as LFM2.5-Audio when it has its sections.
  const bool lfm25 = ListHas(cfg, "architectures", "LFM2AudioModel") ||
                     (!cfg.contains("architectures") && cfg.contains("lfm") && cfg.contains("depthformer"));
  if (lfm25) return LoadLfm25Family(dir, options);
  return Unimplemented(path + " names a model lfmvox does not support (architectures " +
                       Found(cfg, "architectures") + ", model_type " + Found(cfg, "model_type") +
                       "); supported: LFM2.5-Audio (architectures [\"LFM2AudioModel\"])");
}

}  // namespace lfmvox
