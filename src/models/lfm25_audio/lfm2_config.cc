#include "models/lfm25_audio/lfm2_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "io/json_config.h"

namespace lfmvox {

using nlohmann::json;

const char* LayerKindName(LayerKind k) {
  switch (k) {
    case LayerKind::kConv:
      return "conv";
    case LayerKind::kFullAttention:
      return "full_attention";
    case LayerKind::kSlidingAttention:
      return "sliding_attention";
  }
  return "?";
}

int Lfm2Config::num_attention_layers() const {
  int n = 0;
  for (LayerKind k : layers) n += k != LayerKind::kConv;
  return n;
}

namespace {

constexpr int64_t kMaxDim = 1 << 20;  // far above any real width; stops absurd allocations

}  // namespace

Result<Lfm2Config> Lfm2Config::FromJson(const json& j, const std::string& where) {
  LFM_RETURN_IF_ERROR(CheckObject(j, where));
  Lfm2Config c;
  // transformers Lfm2Config defaults for keys a file may omit.
  int intermediate = 12288, multiple_of = 256;
  double multiplier = 1.0;
  bool auto_adjust = true;
  c.conv_kernel = 3;
  c.max_positions = 128000;
  c.norm_eps = 1e-5f;
  c.rope_theta = 1e6;
  LFM_RETURN_IF_ERROR(GetInt(j, "hidden_size", where, true, 1, kMaxDim, &c.hidden_size));
  LFM_RETURN_IF_ERROR(GetInt(j, "num_hidden_layers", where, true, 1, 4096, &c.num_layers));
  LFM_RETURN_IF_ERROR(GetInt(j, "num_attention_heads", where, true, 1, 4096, &c.num_heads));
  c.num_kv_heads = c.num_heads;
  LFM_RETURN_IF_ERROR(GetInt(j, "num_key_value_heads", where, false, 1, 4096, &c.num_kv_heads));
  LFM_RETURN_IF_ERROR(GetInt(j, "max_position_embeddings", where, false, 1, 1 << 30, &c.max_positions));
  LFM_RETURN_IF_ERROR(GetInt(j, "conv_L_cache", where, false, 1, 64, &c.conv_kernel));
  LFM_RETURN_IF_ERROR(GetBool(j, "conv_bias", where, false, &c.conv_bias));
  LFM_RETURN_IF_ERROR(GetInt(j, "sliding_window", where, false, 1, 1 << 30, &c.sliding_window));
  LFM_RETURN_IF_ERROR(GetFloat(j, "norm_eps", where, false, 0.0, 1.0, &c.norm_eps));

  // RoPE: the flat key, or the newer rope_parameters object. Only the plain
  // ("default") rotary schedule exists in LFM2.
  LFM_RETURN_IF_ERROR(GetDouble(j, "rope_theta", where, false, 1.0, 1e12, &c.rope_theta));
  if (auto rp = j.find("rope_parameters"); rp != j.end() && rp->is_object()) {
    const std::string rp_where = where + " rope_parameters";
    LFM_RETURN_IF_ERROR(GetDouble(*rp, "rope_theta", rp_where, false, 1.0, 1e12, &c.rope_theta));
    LFM_RETURN_IF_ERROR(RequireValue(*rp, "rope_type", rp_where, "default", true, "plain rotary positions"));
  }
  if (auto rs = j.find("rope_scaling"); rs != j.end() && !rs->is_null()) {
    return Unimplemented(where + ": rope_scaling is not supported by LFM2");
  }

  // Head geometry.
  if (c.hidden_size % c.num_heads != 0 && j.find("head_dim") == j.end()) {
    return InvalidArgument(StrFormat("%s: num_attention_heads %d does not divide hidden_size %d",
                                     where.c_str(), c.num_heads, c.hidden_size));
  }
  c.head_dim = c.hidden_size / c.num_heads;
  LFM_RETURN_IF_ERROR(GetInt(j, "head_dim", where, false, 2, 4096, &c.head_dim));
  if (c.head_dim % 2 != 0) return InvalidArgument(where + ": head_dim must be even for rotary embeddings");
  if (c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgument(StrFormat("%s: num_key_value_heads %d does not divide num_attention_heads %d",
                                     where.c_str(), c.num_kv_heads, c.num_heads));
  }

  // Layer schedule: layer_types, else full_attn_idxs (default: all attention).
  if (HasKey(j, "layer_types")) {
    std::vector<std::string> types;
    LFM_RETURN_IF_ERROR(GetStringArray(j, "layer_types", where, true, &types));
    for (const std::string& s : types) {
      if (s == "conv")
        c.layers.push_back(LayerKind::kConv);
      else if (s == "full_attention")
        c.layers.push_back(LayerKind::kFullAttention);
      else if (s == "sliding_attention")
        c.layers.push_back(LayerKind::kSlidingAttention);
      else
        return InvalidArgument(where + ": unknown layer type \"" + s +
                               "\" (expected conv, full_attention or sliding_attention)");
    }
  } else if (HasKey(j, "full_attn_idxs")) {
    std::vector<int> idxs;
    LFM_RETURN_IF_ERROR(GetIntArray(j, "full_attn_idxs", where, true, 0, c.num_layers - 1, &idxs));
    c.layers.assign(static_cast<size_t>(c.num_layers), LayerKind::kConv);
    for (int i : idxs) c.layers[static_cast<size_t>(i)] = LayerKind::kFullAttention;
  } else {
    c.layers.assign(static_cast<size_t>(c.num_layers), LayerKind::kFullAttention);
  }
  if (static_cast<int>(c.layers.size()) != c.num_layers) {
    return InvalidArgument(StrFormat("%s: layer_types lists %zu layers but num_hidden_layers is %d",
                                     where.c_str(), c.layers.size(), c.num_layers));
  }
  for (LayerKind k : c.layers) {
    if (k == LayerKind::kSlidingAttention && c.sliding_window <= 0) {
      return InvalidArgument(where + ": a sliding_attention layer needs a positive \"sliding_window\"");
    }
    // The window sizes a K/V cache; it cannot usefully exceed the positions the model can see.
    if (k == LayerKind::kSlidingAttention && c.sliding_window > c.max_positions) {
      return OutOfRange(
          StrFormat("%s: \"sliding_window\" = %d exceeds \"max_position_embeddings\" = %d; a "
                    "window cannot see more positions than the model has (fix the config)",
                    where.c_str(), c.sliding_window, c.max_positions));
    }
  }

  // FFN width, the transformers Lfm2MLP rule: legacy block_ff_dim wins over
  // intermediate_size; with auto-adjust, int(2f/3), × multiplier, rounded up
  // to a multiple of block_multiple_of.
  LFM_RETURN_IF_ERROR(GetInt(j, "intermediate_size", where, false, 1, 1 << 24, &intermediate));
  LFM_RETURN_IF_ERROR(GetInt(j, "block_ff_dim", where, false, 1, 1 << 24, &intermediate));
  LFM_RETURN_IF_ERROR(GetBool(j, "block_auto_adjust_ff_dim", where, false, &auto_adjust));
  LFM_RETURN_IF_ERROR(GetInt(j, "block_multiple_of", where, false, 1, 1 << 20, &multiple_of));
  LFM_RETURN_IF_ERROR(GetDouble(j, "block_ffn_dim_multiplier", where, false, 1e-3, 1e3, &multiplier));
  int64_t ff = intermediate;
  if (auto_adjust) {
    ff = static_cast<int64_t>(2.0 * static_cast<double>(ff) / 3.0);
    ff = static_cast<int64_t>(multiplier * static_cast<double>(ff));
    ff = multiple_of * ((ff + multiple_of - 1) / multiple_of);
  }
  if (ff < 1 || ff > (1 << 24)) return OutOfRange(where + ": the effective FFN width is out of range");
  c.ffn_dim = static_cast<int>(ff);
  return c;
}

}  // namespace lfmvox
