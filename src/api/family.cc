// Picks the model family from the files, through the registry of compiled-in families.
#include "api/family.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "io/json_config.h"

namespace lfmvox {
namespace {

// `key` of `j` as compact JSON, or "none" when absent.
std::string Found(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? std::string("none") : JsonPreview(*it);
}

std::string Supported() {
  std::string s;
  for (const FamilyEntry* f : Families()) {
    s += (s.empty() ? "" : ", ") + std::string(f->name) + " (" + f->signature + ")";
  }
  return s;
}

// The family that claims `dir` (its config.json, when there is one, parsed into *config).
Result<const FamilyEntry*> Claimant(const std::string& dir, std::optional<nlohmann::json>* config) {
  std::error_code ec;
  const std::string path = dir + "/config.json";
  if (std::filesystem::is_regular_file(path, ec)) {
    LFM_ASSIGN_OR_RETURN(nlohmann::json cfg, ReadJsonFile(path));
    config->emplace(std::move(cfg));
  }
  const FamilyFiles files{dir, config->has_value() ? &**config : nullptr};
  for (const FamilyEntry* f : Families()) {
    if (f->claims(files)) return f;
  }
  return static_cast<const FamilyEntry*>(nullptr);
}

}  // namespace

Result<std::unique_ptr<FamilyModel>> LoadFamily(const std::string& dir, const ModelOptions& options) {
  std::optional<nlohmann::json> config;
  LFM_ASSIGN_OR_RETURN(const FamilyEntry* family, Claimant(dir, &config));
  if (family != nullptr) return family->load_model(dir, options);
  if (!config) {
    return NotFound(
        "no config.json in " + dir +
        " and no GGUF release there; pass a model folder as downloaded. Supported: " + Supported());
  }
  return Unimplemented(dir + "/config.json names a model lfmvox does not support (architectures " +
                       Found(*config, "architectures") + ", model_type " + Found(*config, "model_type") +
                       "); supported: " + Supported());
}

Result<std::unique_ptr<FamilyCodec>> LoadFamilyCodec(const std::string& dir, const ModelOptions& options) {
  for (const CodecEntry* c : Codecs()) {
    if (c->claims(dir)) return c->load(dir, options);
  }
  std::optional<nlohmann::json> config;
  LFM_ASSIGN_OR_RETURN(const FamilyEntry* family, Claimant(dir, &config));
  if (family == nullptr) family = Families().front();
  return family->load_codec(dir, options);
}

}  // namespace lfmvox
