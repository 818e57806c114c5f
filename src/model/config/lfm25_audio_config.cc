#include "model/config/lfm25_audio_config.h"

namespace lfmvox {

namespace {
Status RequirePositiveInt(const nlohmann::json& j, const char* key, const std::string& where, int max, int* out) {
  auto it = j.find(key);
  if (it == j.end()) return NotFound(StrFormat("%s lacks the required key \"%s\"", where.c_str(), key));
  if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > max) {
    return InvalidArgument(StrFormat("%s: \"%s\" must be an integer in [1, %d]", where.c_str(), key, max));
  }
  *out = it->get<int>();
  return Status::Ok();
}
}  // namespace

Result<Lfm25AudioConfig> Lfm25AudioConfig::Load(const std::string& path) {
  Lfm25AudioConfig c;
  LFM_ASSIGN_OR_RETURN(c.raw, ReadJsonFile(path));
  auto lfm = c.raw.find("lfm");
  if (lfm == c.raw.end() || !lfm->is_object()) {
    return NotFound(path + " lacks the \"lfm\" section (the backbone's Lfm2Config); is this an LFM2.5-Audio model?");
  }
  LFM_ASSIGN_OR_RETURN(c.lfm, ParseLfm2Config(*lfm, path + " [lfm]"));
  for (LayerKind k : c.lfm.layers) {
    if (k == LayerKind::kSlidingAttention) {
      return Unimplemented(path + " [lfm]: the backbone has full-attention layers only; sliding_attention is not "
                                  "supported there");
    }
  }
  LFM_RETURN_IF_ERROR(RequirePositiveInt(c.raw, "codebooks", path, 64, &c.codebooks));
  LFM_RETURN_IF_ERROR(RequirePositiveInt(c.raw, "interleaved_n_text", path, 1 << 16, &c.interleaved_n_text));
  LFM_RETURN_IF_ERROR(RequirePositiveInt(c.raw, "interleaved_n_audio", path, 1 << 16, &c.interleaved_n_audio));
  auto depth = c.raw.find("depthformer");
  if (depth == c.raw.end() || !depth->is_object()) return NotFound(path + " lacks the \"depthformer\" section");
  return c;
}

}  // namespace lfmvox
