#include "codecs/mimi/mimi_config.h"

#include <nlohmann/json.hpp>

#include "io/json_config.h"

namespace lfmvox {

int MimiConfig::hop() const {
  int h = 1;
  for (int r : ratios) h *= r;
  return h;
}

bool IsMimiConfig(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  if (j.contains("model") && j["model"].is_string() &&
      j["model"].get<std::string>().find("mimi") != std::string::npos)
    return true;
  return j.contains("seanet") && j["seanet"].is_object() && j.contains("quantizer") &&
         j["quantizer"].is_object();
}

Result<MimiConfig> ParseMimiConfig(const nlohmann::json& j, const std::string& where) {
  LFM_RETURN_IF_ERROR(CheckObject(j, where));
  MimiConfig c;
  LFM_RETURN_IF_ERROR(GetInt(j, "sample_rate", where, false, 1, 1 << 20, &c.sample_rate));
  LFM_RETURN_IF_ERROR(GetInt(j, "num_codebooks", where, false, 1, 64, &c.num_codebooks));
  LFM_RETURN_IF_ERROR(GetInt(j, "codebook_size", where, false, 1, 1 << 16, &c.codebook_size));
  LFM_RETURN_IF_ERROR(GetInt(j, "codebook_dim", where, false, 1, 1 << 14, &c.codebook_dim));
  LFM_RETURN_IF_ERROR(GetInt(j, "latent_dim", where, false, 1, 1 << 14, &c.latent_dim));
  LFM_RETURN_IF_ERROR(GetFloat(j, "codebook_epsilon", where, false, 0, 1, &c.codebook_epsilon));
  if (HasKey(j, "upsample")) {
    LFM_ASSIGN_OR_RETURN(const nlohmann::json* u, GetSection(j, "upsample", where));
    const std::string w = where + " [upsample]";
    LFM_RETURN_IF_ERROR(GetInt(*u, "stride", w, false, 1, 64, &c.upsample_stride));
    LFM_RETURN_IF_ERROR(GetInt(*u, "kernel_size", w, false, 1, 256, &c.upsample_kernel));
    LFM_RETURN_IF_ERROR(RequireValue(*u, "causal", w, true, true, "a causal upsampling"));
    LFM_RETURN_IF_ERROR(RequireValue(*u, "bias", w, false, true, "an upsampling without bias"));
  }
  if (HasKey(j, "transformer")) {
    LFM_ASSIGN_OR_RETURN(const nlohmann::json* t, GetSection(j, "transformer", where));
    const std::string w = where + " [transformer]";
    LFM_RETURN_IF_ERROR(GetInt(*t, "num_layers", w, false, 0, 256, &c.num_layers));
    LFM_RETURN_IF_ERROR(GetInt(*t, "d_model", w, false, 1, 1 << 14, &c.d_model));
    LFM_RETURN_IF_ERROR(GetInt(*t, "num_heads", w, false, 1, 1024, &c.num_heads));
    LFM_RETURN_IF_ERROR(GetInt(*t, "dim_feedforward", w, false, 1, 1 << 16, &c.dim_feedforward));
    LFM_RETURN_IF_ERROR(GetInt(*t, "context", w, false, 1, 1 << 16, &c.context));
    LFM_RETURN_IF_ERROR(GetDouble(*t, "max_period", w, false, 1, 1e12, &c.max_period));
    LFM_RETURN_IF_ERROR(GetFloat(*t, "norm_eps", w, false, 0, 1, &c.norm_eps));
    LFM_RETURN_IF_ERROR(RequireValue(*t, "causal", w, true, true, "a causal transformer"));
    LFM_RETURN_IF_ERROR(RequireValue(*t, "conv_layout", w, true, true, "the conv layout"));
    LFM_RETURN_IF_ERROR(RequireValue(*t, "gating", w, "none", true, "a plain GELU feed-forward"));
    LFM_RETURN_IF_ERROR(RequireValue(*t, "norm", w, "layer_norm", true, "LayerNorm"));
    LFM_RETURN_IF_ERROR(RequireValue(*t, "positional_embedding", w, "rope", true, "RoPE"));
    LFM_RETURN_IF_ERROR(RequireValue(*t, "bias_attn", w, false, true, "attention without biases"));
    LFM_RETURN_IF_ERROR(RequireValue(*t, "bias_ff", w, false, true, "a feed-forward without biases"));
    int head_dim = 0;
    LFM_RETURN_IF_ERROR(GetInt(*t, "head_dim", w, false, 1, 1 << 14, &head_dim));
    if (head_dim != 0 && head_dim * c.num_heads != c.d_model)
      return InvalidArgument(w + ": \"head_dim\" · \"num_heads\" must equal \"d_model\"");
  }
  if (HasKey(j, "seanet")) {
    LFM_ASSIGN_OR_RETURN(const nlohmann::json* s, GetSection(j, "seanet", where));
    const std::string w = where + " [seanet]";
    LFM_RETURN_IF_ERROR(GetInt(*s, "channels", w, false, 1, 16, &c.channels));
    int dimension = c.latent_dim;
    LFM_RETURN_IF_ERROR(GetInt(*s, "dimension", w, false, 1, 1 << 14, &dimension));
    if (dimension != c.latent_dim)
      return InvalidArgument(w + ": \"dimension\" must equal the latent width \"latent_dim\"");
    LFM_RETURN_IF_ERROR(GetInt(*s, "n_filters", w, false, 1, 1 << 12, &c.n_filters));
    LFM_RETURN_IF_ERROR(GetIntArray(*s, "ratios", w, false, 1, 64, &c.ratios));
    LFM_RETURN_IF_ERROR(GetInt(*s, "kernel_size", w, false, 1, 64, &c.kernel_size));
    LFM_RETURN_IF_ERROR(GetInt(*s, "residual_kernel_size", w, false, 1, 64, &c.residual_kernel_size));
    LFM_RETURN_IF_ERROR(GetInt(*s, "last_kernel_size", w, false, 1, 64, &c.last_kernel_size));
    LFM_RETURN_IF_ERROR(GetInt(*s, "compress", w, false, 1, 64, &c.compress));
    LFM_RETURN_IF_ERROR(RequireValue(*s, "causal", w, true, true, "a causal decoder"));
    LFM_RETURN_IF_ERROR(RequireValue(*s, "n_residual_layers", w, 1, true, "one residual block per stage"));
    LFM_RETURN_IF_ERROR(RequireValue(*s, "true_skip", w, true, true, "identity skips"));
    LFM_RETURN_IF_ERROR(RequireValue(*s, "norm", w, "none", true, "unnormalised convolutions"));
    LFM_RETURN_IF_ERROR(RequireValue(*s, "pad_mode", w, "constant", true, "zero padding"));
    LFM_RETURN_IF_ERROR(RequireValue(*s, "activation", w, "ELU", true, "ELU"));
    LFM_RETURN_IF_ERROR(RequireValue(*s, "disable_norm_outer_blocks", w, 0, true, "no norm"));
  }
  if (HasKey(j, "quantizer")) {
    LFM_ASSIGN_OR_RETURN(const nlohmann::json* q, GetSection(j, "quantizer", where));
    const std::string w = where + " [quantizer]";
    int v = c.codebook_dim;
    LFM_RETURN_IF_ERROR(GetInt(*q, "dimension", w, false, 1, 1 << 14, &v));
    if (v != c.codebook_dim) return InvalidArgument(w + ": \"dimension\" must equal \"codebook_dim\"");
    v = c.codebook_size;
    LFM_RETURN_IF_ERROR(GetInt(*q, "bins", w, false, 1, 1 << 16, &v));
    if (v != c.codebook_size) return InvalidArgument(w + ": \"bins\" must equal \"codebook_size\"");
  }
  LFM_RETURN_IF_ERROR(ValidateMimiConfig(c, where));
  return c;
}

Status ValidateMimiConfig(const MimiConfig& c, const std::string& where) {
  if (c.num_heads <= 0 || c.d_model % c.num_heads != 0 || c.head_dim() % 2 != 0)
    return InvalidArgument(where + ": \"d_model\" must be heads × an even head width");
  if (c.head_dim() > 512) return Unimplemented(where + ": heads wider than 512 values");
  if (c.d_model != c.latent_dim)
    return Unimplemented(where +
                         ": a transformer width other than the latent width (input/output projections)");
  if (c.upsample_kernel != 2 * c.upsample_stride)
    return Unimplemented(where + ": an upsampling kernel other than twice its stride");
  if (c.ratios.empty() || c.ratios.size() > 8)
    return InvalidArgument(where + ": \"ratios\" must list 1..8 stages");
  if (c.n_filters * (int64_t{1} << c.ratios.size()) > (1 << 16))
    return OutOfRange(where + ": n_filters · 2^stages is too wide");
  if (c.compress <= 0 || c.n_filters % c.compress != 0)
    return InvalidArgument(where + ": \"n_filters\" must be a multiple of \"compress\"");
  if (c.channels != 1) return Unimplemented(where + ": only mono output (\"channels\" = 1)");
  if (c.hop() > (1 << 16)) return OutOfRange(where + ": the product of \"ratios\" is too large");
  if (c.num_layers > 0 && c.context < 1) return InvalidArgument(where + ": \"context\" must be at least 1");
  return Status::Ok();
}

}  // namespace lfmvox
