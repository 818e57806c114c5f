// The LFM2 layer-stack configuration (transformers `Lfm2Config`), read from a
// model's config.json and validated. Used by the LFM2.5 detokenizer
// (audio_detokenizer/config.json) and by the backbone (the `lfm` section).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace lfmvox {

enum class LayerKind { kConv, kFullAttention, kSlidingAttention };
const char* LayerKindName(LayerKind k);

struct Lfm2Config {
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;     // `head_dim` key, else hidden_size / num_heads
  int ffn_dim = 0;      // effective SwiGLU width after the LFM2 auto-adjust rule
  int conv_kernel = 0;  // `conv_L_cache`
  bool conv_bias = false;
  int sliding_window = 0;  // keys per query on sliding_attention layers (0: none)
  int max_positions = 0;   // `max_position_embeddings`
  float norm_eps = 0;
  double rope_theta = 0;
  std::vector<LayerKind> layers;

  int num_attention_layers() const;

  // Reads an Lfm2Config JSON object. Both key generations are accepted:
  // `layer_types` or the legacy `full_attn_idxs`; `intermediate_size` or the
  // legacy `block_ff_dim`; `rope_theta` or `rope_parameters.rope_theta`.
  // Missing optional keys take the transformers defaults. `where` prefixes
  // error messages (e.g. "audio_detokenizer/config.json", "config.json [lfm]").
  // `vocab_size` is not read: the embedding tables' rows are the vocabulary.
  static Result<Lfm2Config> FromJson(const nlohmann::json& j, const std::string& where);
};

}  // namespace lfmvox
