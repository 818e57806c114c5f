#include "models/lfm25_audio/config.h"

#include "io/json_config.h"

namespace lfmvox {

Result<Lfm25AudioConfig> Lfm25AudioConfig::Load(const std::string& path) {
  Lfm25AudioConfig c;
  LFM_ASSIGN_OR_RETURN(c.raw, ReadJsonFile(path));
  auto lfm = c.raw.find("lfm");
  if (lfm == c.raw.end() || !lfm->is_object()) {
    return NotFound(path +
                    " lacks the \"lfm\" section (the backbone's Lfm2Config); is this an LFM2.5-Audio model?");
  }
  LFM_ASSIGN_OR_RETURN(c.lfm, ParseLfm2Config(*lfm, path + " [lfm]"));
  for (LayerKind k : c.lfm.layers) {
    if (k == LayerKind::kSlidingAttention) {
      return Unimplemented(path +
                           " [lfm]: the backbone has full-attention layers only; sliding_attention is not "
                           "supported there");
    }
  }
  LFM_RETURN_IF_ERROR(GetInt(c.raw, "codebooks", path, true, 1, 64, &c.codebooks));
  LFM_RETURN_IF_ERROR(GetInt(c.raw, "interleaved_n_text", path, true, 1, 1 << 16, &c.interleaved_n_text));
  LFM_RETURN_IF_ERROR(GetInt(c.raw, "interleaved_n_audio", path, true, 1, 1 << 16, &c.interleaved_n_audio));
  auto depth = c.raw.find("depthformer");
  if (depth == c.raw.end() || !depth->is_object())
    return NotFound(path + " lacks the \"depthformer\" section");
  return c;
}

}  // namespace lfmvox
