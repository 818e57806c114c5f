#include "models/lfm3_audio/lfm3_config.h"

#include <nlohmann/json.hpp>
#include <numeric>

#include "io/json_config.h"

namespace lfmvox {

using nlohmann::json;

const char* Lfm3LayerKindName(Lfm3LayerKind k) { return k == Lfm3LayerKind::kConv ? "conv" : "attention"; }

int Lfm3StackConfig::num_attention_layers() const {
  int n = 0;
  for (Lfm3LayerKind k : layers) n += k == Lfm3LayerKind::kAttention;
  return n;
}

int Lfm3StackConfig::num_conv_layers() const {
  return static_cast<int>(layers.size()) - num_attention_layers();
}

namespace {

constexpr int64_t kMaxDim = 1 << 20;  // far above any real width; stops absurd allocations

// An optional list of num_layers booleans; absent or null leaves *out empty.
Status GetBoolList(const json& j, const char* key, const std::string& where, size_t n,
                   std::vector<bool>* out) {
  out->clear();
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) {
    return InvalidArgument(StrFormat("%s: \"%s\" must be an array of booleans, got %s", where.c_str(), key,
                                     JsonPreview(*it).c_str()));
  }
  if (it->size() != n) {
    return InvalidArgument(
        StrFormat("%s: \"%s\" lists %zu layers but num_layers is %zu", where.c_str(), key, it->size(), n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!(*it)[i].is_boolean()) {
      return InvalidArgument(StrFormat("%s: \"%s\"[%zu] must be true or false, got %s", where.c_str(), key, i,
                                       JsonPreview((*it)[i]).c_str()));
    }
    out->push_back((*it)[i].get<bool>());
  }
  return Status::Ok();
}

// The optional per-layer lists of a stack section (post_operator_norm, post_ffn_norm, attn_gate, each
// num_layers booleans) into c, whose `layers` are read already; a gate on a conv layer is an error, and
// any gate needs "attn_gate_kind": "per_head".
Status GetLayerFlags(const json& j, const std::string& where, Lfm3StackConfig* c) {
  const size_t n = c->layers.size();
  LFM_RETURN_IF_ERROR(GetBoolList(j, "post_operator_norm", where, n, &c->post_operator_norm));
  LFM_RETURN_IF_ERROR(GetBoolList(j, "post_ffn_norm", where, n, &c->post_ffn_norm));
  LFM_RETURN_IF_ERROR(GetBoolList(j, "attn_gate", where, n, &c->attn_gate));
  bool any_gate = false;
  for (size_t i = 0; i < c->attn_gate.size(); ++i) {
    if (c->attn_gate[i] && c->layers[i] != Lfm3LayerKind::kAttention) {
      return InvalidArgument(
          StrFormat("%s: \"attn_gate\"[%zu] is true but layer %zu is a conv layer", where.c_str(), i, i));
    }
    any_gate = any_gate || c->attn_gate[i];
  }
  if (!any_gate) return Status::Ok();
  return RequireValue(j, "attn_gate_kind", where, "per_head", true,
                      "one sigmoid per head from gate_proj [heads, hidden], oracle decision 3");
}

}  // namespace

Result<Lfm3StackConfig> Lfm3StackConfig::FromJson(const json& j, const std::string& where) {
  LFM_RETURN_IF_ERROR(CheckObject(j, where));
  Lfm3StackConfig c;
  LFM_RETURN_IF_ERROR(GetInt(j, "hidden_size", where, true, 1, kMaxDim, &c.hidden_size));
  LFM_RETURN_IF_ERROR(GetInt(j, "num_layers", where, true, 1, 1024, &c.num_layers));
  LFM_RETURN_IF_ERROR(GetInt(j, "num_heads", where, true, 1, 4096, &c.num_heads));
  LFM_RETURN_IF_ERROR(GetInt(j, "num_kv_heads", where, true, 1, 4096, &c.num_kv_heads));
  LFM_RETURN_IF_ERROR(GetInt(j, "head_dim", where, true, 2, 4096, &c.head_dim));
  LFM_RETURN_IF_ERROR(GetInt(j, "intermediate_size", where, true, 1, 1 << 24, &c.ffn_dim));
  LFM_RETURN_IF_ERROR(GetFloat(j, "norm_eps", where, true, 0.0, 1.0, &c.norm_eps));
  LFM_RETURN_IF_ERROR(GetDouble(j, "rope_theta", where, true, 1.0, 1e12, &c.rope_theta));
  LFM_RETURN_IF_ERROR(RequireValue(j, "rope_style", where, "neox", true,
                                   "rotate-half pairs (i, i + hd/2), oracle decision 1"));
  if (c.head_dim % 2 != 0) {
    return InvalidArgument(
        StrFormat("%s: \"head_dim\" = %d must be even for rotary embeddings", where.c_str(), c.head_dim));
  }
  if (int64_t{c.num_heads} * c.head_dim != c.hidden_size) {
    return InvalidArgument(StrFormat(
        "%s: \"num_heads\" · \"head_dim\" = %d · %d must equal \"hidden_size\" = %d (the LFM3 stack computes "
        "head_dim = hidden_size / num_heads)",
        where.c_str(), c.num_heads, c.head_dim, c.hidden_size));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgument(StrFormat("%s: \"num_kv_heads\" = %d does not divide \"num_heads\" = %d",
                                     where.c_str(), c.num_kv_heads, c.num_heads));
  }
  // window: null or absent = bidirectional.
  if (HasKey(j, "window")) {
    LFM_RETURN_IF_ERROR(GetInt(j, "window", where, true, 1, 1 << 16, &c.window));
  }

  std::vector<std::string> types;
  LFM_RETURN_IF_ERROR(GetStringArray(j, "layer_types", where, true, &types));
  if (types.size() != static_cast<size_t>(c.num_layers)) {
    return InvalidArgument(StrFormat("%s: \"layer_types\" lists %zu layers but \"num_layers\" is %d",
                                     where.c_str(), types.size(), c.num_layers));
  }
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] == "conv") {
      c.layers.push_back(Lfm3LayerKind::kConv);
    } else if (types[i] == "attention") {
      c.layers.push_back(Lfm3LayerKind::kAttention);
    } else {
      return InvalidArgument(
          StrFormat("%s: \"layer_types\"[%zu] = \"%s\" is unknown (expected conv or attention)",
                    where.c_str(), i, types[i].c_str()));
    }
  }
  if (c.num_conv_layers() > 0) {
    LFM_RETURN_IF_ERROR(GetInt(j, "conv_L_cache", where, true, 1, 64, &c.conv_kernel));
  } else {
    LFM_RETURN_IF_ERROR(GetInt(j, "conv_L_cache", where, false, 1, 64, &c.conv_kernel));
  }

  LFM_RETURN_IF_ERROR(GetLayerFlags(j, where, &c));
  return c;
}

Status Lfm3StackConfig::ValidatePerLayer(const std::string& where) const {
  if (!per_layer_attention()) {
    if (!layer_rope_theta.empty() || !layer_rotary_dims.empty()) {
      return InvalidArgument(where + ": per-layer RoPE settings need per-layer windows");
    }
    return Status::Ok();
  }
  const size_t n = layers.size();
  if (window != 0) return InvalidArgument(where + ": per-layer windows replace the stack's one window");
  if (layer_window.size() != n || layer_rope_theta.size() != n || layer_rotary_dims.size() != n) {
    return InvalidArgument(
        StrFormat("%s: the per-layer attention lists need %zu entries each", where.c_str(), n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (layers[i] != Lfm3LayerKind::kAttention) continue;
    const int rd = layer_rotary_dims[i];
    if (layer_window[i] < 0 || layer_window[i] > (1 << 20) || !(layer_rope_theta[i] >= 1.0) || rd < 2 ||
        rd > head_dim || rd % 2 != 0) {
      return InvalidArgument(
          StrFormat("%s: attention layer %zu has window %d, RoPE base %g, %d rotated dims; needs a window in "
                    "[0, 2^20], "
                    "a base >= 1 and an even rotated count in [2, head_dim = %d]",
                    where.c_str(), i, layer_window[i], layer_rope_theta[i], rd, head_dim));
    }
  }
  return Status::Ok();
}

Result<Lfm3BackboneConfig> Lfm3BackboneConfig::FromJson(const json& j, const std::string& where) {
  LFM_RETURN_IF_ERROR(CheckObject(j, where));
  Lfm3BackboneConfig b;
  Lfm3StackConfig& c = b.stack;
  LFM_RETURN_IF_ERROR(GetInt(j, "vocab_size", where, true, 1, 1 << 24, &b.vocab_size));
  LFM_RETURN_IF_ERROR(GetInt(j, "hidden_size", where, true, 1, kMaxDim, &c.hidden_size));
  LFM_RETURN_IF_ERROR(GetInt(j, "num_hidden_layers", where, true, 1, 1024, &c.num_layers));
  LFM_RETURN_IF_ERROR(GetInt(j, "num_attention_heads", where, true, 1, 4096, &c.num_heads));
  LFM_RETURN_IF_ERROR(GetInt(j, "num_key_value_heads", where, true, 1, 4096, &c.num_kv_heads));
  LFM_RETURN_IF_ERROR(GetInt(j, "head_dim", where, true, 2, 4096, &c.head_dim));
  LFM_RETURN_IF_ERROR(GetInt(j, "intermediate_size", where, true, 1, 1 << 24, &c.ffn_dim));
  LFM_RETURN_IF_ERROR(GetFloat(j, "norm_eps", where, true, 0.0, 1.0, &c.norm_eps));
  LFM_RETURN_IF_ERROR(GetBool(j, "tie_word_embeddings", where, true, &b.tie_word_embeddings));
  LFM_RETURN_IF_ERROR(GetInt(j, "max_position_embeddings", where, true, 1, 1 << 24, &b.max_positions));
  LFM_RETURN_IF_ERROR(GetInt(j, "bos_token_id", where, true, 0, b.vocab_size - 1, &b.bos_token_id));
  LFM_RETURN_IF_ERROR(GetInt(j, "eos_token_id", where, true, 0, b.vocab_size - 1, &b.eos_token_id));
  LFM_RETURN_IF_ERROR(
      RequireValue(j, "rope_style", where, "neox", false,
                   "rotate-half pairs (i, i + rotated/2), as the LFM3 stacks (oracle decision 1)"));
  LFM_RETURN_IF_ERROR(GetDouble(j, "rope_theta", where, true, 1.0, 1e12, &c.rope_theta));
  LFM_RETURN_IF_ERROR(GetDouble(j, "partial_rotary_factor", where, true, 0.0, 1.0, &b.partial_rotary_factor));
  if (c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgument(
        StrFormat("%s: \"num_key_value_heads\" = %d does not divide \"num_attention_heads\" = %d",
                  where.c_str(), c.num_kv_heads, c.num_heads));
  }
  if (c.head_dim % 2 != 0) {
    return InvalidArgument(
        StrFormat("%s: \"head_dim\" = %d must be even for rotary embeddings", where.c_str(), c.head_dim));
  }
  // HF partial rotary: int(head_dim · factor) dims.
  const int full_rd = static_cast<int>(c.head_dim * b.partial_rotary_factor);
  if (full_rd < 2 || full_rd % 2 != 0) {
    return InvalidArgument(StrFormat(
        "%s: \"partial_rotary_factor\" = %g of head_dim %d rotates %d dims; needs an even count >= 2",
        where.c_str(), b.partial_rotary_factor, c.head_dim, full_rd));
  }

  std::vector<std::string> types;
  LFM_RETURN_IF_ERROR(GetStringArray(j, "layer_types", where, true, &types));
  if (types.size() != static_cast<size_t>(c.num_layers)) {
    return InvalidArgument(StrFormat("%s: \"layer_types\" lists %zu layers but \"num_hidden_layers\" is %d",
                                     where.c_str(), types.size(), c.num_layers));
  }
  bool any_sliding = false;
  for (const std::string& t : types) any_sliding = any_sliding || t == "sliding_attention";
  if (any_sliding) {
    LFM_RETURN_IF_ERROR(GetInt(j, "sliding_window", where, true, 1, 1 << 20, &b.sliding_window));
    LFM_RETURN_IF_ERROR(GetDouble(j, "rope_theta_swa", where, true, 1.0, 1e12, &b.rope_theta_swa));
  }
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] == "conv") {
      c.layers.push_back(Lfm3LayerKind::kConv);
      c.layer_window.push_back(0);
      c.layer_rope_theta.push_back(0);
      c.layer_rotary_dims.push_back(0);
    } else if (types[i] == "full_attention") {
      c.layers.push_back(Lfm3LayerKind::kAttention);
      c.layer_window.push_back(0);
      c.layer_rope_theta.push_back(c.rope_theta);
      c.layer_rotary_dims.push_back(full_rd);
    } else if (types[i] == "sliding_attention") {
      c.layers.push_back(Lfm3LayerKind::kAttention);
      c.layer_window.push_back(b.sliding_window);
      c.layer_rope_theta.push_back(b.rope_theta_swa);
      c.layer_rotary_dims.push_back(c.head_dim);
    } else {
      return InvalidArgument(StrFormat(
          "%s: \"layer_types\"[%zu] = \"%s\" is unknown (expected conv, full_attention or sliding_attention)",
          where.c_str(), i, types[i].c_str()));
    }
  }
  if (c.num_attention_layers() == 0) {
    return InvalidArgument(where +
                           ": \"layer_types\" lists no attention layer (LFM3 mixes conv and attention)");
  }
  if (c.num_conv_layers() > 0) {
    LFM_RETURN_IF_ERROR(GetInt(j, "conv_L_cache", where, true, 1, 64, &c.conv_kernel));
  }
  LFM_RETURN_IF_ERROR(GetLayerFlags(j, where, &c));
  LFM_RETURN_IF_ERROR(c.ValidatePerLayer(where));
  return b;
}

Result<Lfm3DepthConfig> Lfm3DepthConfig::FromJson(const json& j, const std::string& where) {
  Lfm3DepthConfig c;
  LFM_ASSIGN_OR_RETURN(c.stack, Lfm3StackConfig::FromJson(j, where));
  if (c.stack.window != 0) {
    return InvalidArgument(StrFormat("%s: \"window\" = %d, but the depth decoder is bidirectional (null)",
                                     where.c_str(), c.stack.window));
  }
  c.head_norm_eps = c.stack.norm_eps;
  LFM_RETURN_IF_ERROR(GetFloat(j, "head_norm_eps", where, false, 0.0, 1.0, &c.head_norm_eps));
  return c;
}

int Lfm3CodecConfig::num_codes() const {
  int64_t p = 1;
  for (int l : fsq_levels) p *= l;
  return static_cast<int>(p);
}

Result<Lfm3CodecConfig> Lfm3CodecConfig::FromJson(const json& j, const std::string& where) {
  Lfm3CodecConfig c;
  LFM_ASSIGN_OR_RETURN(c.stack, Lfm3StackConfig::FromJson(j, where));
  if (c.stack.window == 0) {
    return InvalidArgument(where + ": the codec decoder is causal: \"window\" must be a positive integer");
  }
  LFM_RETURN_IF_ERROR(GetInt(j, "n_q", where, true, 1, 256, &c.n_q));
  LFM_RETURN_IF_ERROR(GetIntArray(j, "fsq_levels", where, true, 2, 1 << 16, &c.fsq_levels));
  LFM_RETURN_IF_ERROR(GetIntArray(j, "fsq_basis", where, true, 1, 1 << 30, &c.fsq_basis));
  if (c.fsq_levels.empty() || c.fsq_levels.size() > 16) {
    return InvalidArgument(where + ": \"fsq_levels\" must list 1 to 16 levels");
  }
  if (c.fsq_basis.size() != c.fsq_levels.size()) {
    return InvalidArgument(StrFormat("%s: \"fsq_basis\" has %zu entries but \"fsq_levels\" has %zu",
                                     where.c_str(), c.fsq_basis.size(), c.fsq_levels.size()));
  }
  int64_t b = 1;
  for (size_t i = 0; i < c.fsq_levels.size(); ++i) {
    if (c.fsq_basis[i] != b) {
      return InvalidArgument(StrFormat(
          "%s: \"fsq_basis\"[%zu] = %d but the levels give %lld (the product of the levels before it)",
          where.c_str(), i, c.fsq_basis[i], static_cast<long long>(b)));
    }
    b *= c.fsq_levels[i];
    if (b > (int64_t{1} << 30))
      return OutOfRange(where + ": \"fsq_levels\" multiply to more than 2^30 codes");
  }
  LFM_RETURN_IF_ERROR(GetInt(j, "quantizer_dim", where, true, 1, kMaxDim, &c.quantizer_dim));
  LFM_RETURN_IF_ERROR(GetInt(j, "frame_stack", where, true, 1, 1024, &c.frame_stack));
  LFM_RETURN_IF_ERROR(GetInt(j, "n_fft", where, true, 4, 1 << 16, &c.n_fft));
  LFM_RETURN_IF_ERROR(GetInt(j, "hop_length", where, true, 1, 1 << 16, &c.hop));
  LFM_RETURN_IF_ERROR(GetInt(j, "sampling_rate", where, true, 1000, 1 << 20, &c.sample_rate));
  int win = c.n_fft;
  LFM_RETURN_IF_ERROR(GetInt(j, "win_length", where, false, 1, 1 << 16, &win));
  if (win != c.n_fft) {
    return Unimplemented(StrFormat("%s: \"win_length\" = %d is not supported (only win_length == n_fft = %d)",
                                   where.c_str(), win, c.n_fft));
  }
  if (c.n_fft % 2 != 0 || c.hop > c.n_fft || (c.n_fft - c.hop) % 2 != 0) {
    return InvalidArgument(
        StrFormat("%s: \"n_fft\" = %d and \"hop_length\" = %d must be even, hop <= n_fft, n_fft - hop even",
                  where.c_str(), c.n_fft, c.hop));
  }
  c.frame_samples = c.frame_stack * c.hop;
  int fs = c.frame_samples;
  LFM_RETURN_IF_ERROR(GetInt(j, "frame_samples", where, false, 1, 1 << 30, &fs));
  if (fs != c.frame_samples) {
    return InvalidArgument(StrFormat("%s: \"frame_samples\" = %d but frame_stack · hop_length = %d",
                                     where.c_str(), fs, c.frame_samples));
  }
  if (HasKey(j, "magnitude_clamp")) {
    return Unimplemented(where +
                         ": \"magnitude_clamp\" is not supported (only null: no clamp before exp, "
                         "oracle decision 8)");
  }
  return c;
}

Result<Lfm3Config> Lfm3Config::FromJson(const json& j, const std::string& where) {
  LFM_RETURN_IF_ERROR(CheckObject(j, where));
  Lfm3Config c;
  LFM_RETURN_IF_ERROR(GetInt(j, "n_codebooks", where, true, 1, 256, &c.n_codebooks));
  LFM_RETURN_IF_ERROR(GetInt(j, "codebook_size", where, true, 2, 1 << 24, &c.codebook_size));
  LFM_RETURN_IF_ERROR(GetInt(j, "audio_eos", where, true, 0, 1 << 24, &c.audio_eos));
  LFM_RETURN_IF_ERROR(GetIntArray(j, "maskgit", where, true, 1, 256, &c.maskgit));
  LFM_RETURN_IF_ERROR(GetInt(j, "text_hidden", where, true, 1, kMaxDim, &c.text_hidden));
  LFM_RETURN_IF_ERROR(GetInt(j, "interleaved_n_text", where, false, 1, 1 << 16, &c.interleaved_n_text));
  LFM_RETURN_IF_ERROR(GetInt(j, "interleaved_n_audio", where, false, 1, 1 << 16, &c.interleaved_n_audio));
  if (c.audio_eos >= c.codebook_size) {
    return InvalidArgument(StrFormat("%s: \"audio_eos\" = %d must be a code below \"codebook_size\" = %d",
                                     where.c_str(), c.audio_eos, c.codebook_size));
  }
  if (std::accumulate(c.maskgit.begin(), c.maskgit.end(), 0) != c.n_codebooks) {
    return InvalidArgument(
        StrFormat("%s: the \"maskgit\" passes reveal %d codebooks but \"n_codebooks\" is %d", where.c_str(),
                  std::accumulate(c.maskgit.begin(), c.maskgit.end(), 0), c.n_codebooks));
  }
  LFM_ASSIGN_OR_RETURN(const json* depth, GetSection(j, "depth_decoder", where));
  LFM_ASSIGN_OR_RETURN(c.depth, Lfm3DepthConfig::FromJson(*depth, where + " [depth_decoder]"));
  LFM_ASSIGN_OR_RETURN(const json* codec, GetSection(j, "codec", where));
  const std::string cw = where + " [codec]";
  LFM_ASSIGN_OR_RETURN(c.codec, Lfm3CodecConfig::FromJson(*codec, cw));
  if (c.codec.n_q != c.n_codebooks) {
    return InvalidArgument(
        StrFormat("%s: \"n_q\" = %d but \"n_codebooks\" is %d", cw.c_str(), c.codec.n_q, c.n_codebooks));
  }
  if (c.codec.num_codes() > c.codebook_size) {
    return InvalidArgument(StrFormat("%s: \"fsq_levels\" express %d codes, more than \"codebook_size\" = %d",
                                     cw.c_str(), c.codec.num_codes(), c.codebook_size));
  }
  if (HasKey(j, "lfm")) {
    LFM_ASSIGN_OR_RETURN(const json* lfm, GetSection(j, "lfm", where));
    const std::string bw = where + " [lfm]";
    LFM_ASSIGN_OR_RETURN(c.backbone, Lfm3BackboneConfig::FromJson(*lfm, bw));
    c.has_backbone = true;
    if (c.backbone.stack.hidden_size != c.text_hidden) {
      return InvalidArgument(StrFormat("%s: \"hidden_size\" = %d but \"text_hidden\" is %d", bw.c_str(),
                                       c.backbone.stack.hidden_size, c.text_hidden));
    }
  }
  return c;
}

Result<Lfm3Config> Lfm3Config::Load(const std::string& path) {
  LFM_ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  return FromJson(j, path);
}

}  // namespace lfmvox
