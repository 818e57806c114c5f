// Mimi's decoder configuration. Kyutai's checkpoint carries tensors only, so every value the tensors do
// not fix has the default that liquid-audio's `moshi.models.loaders.get_mimi` builds (the configuration
// LFM2-Audio-1.5B decodes with, spec GGUF_AND_MIMI.md §2.1), overridable by a flat Mimi config.json (the
// oracle's `mimi_real/config.json` layout: `seanet`, `transformer`, `quantizer` sections). The sizes the
// tensors carry (layers, widths, codebook size) are then checked against, or taken from, the file
// (mimi_decoder.cc).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace lfmvox {

struct MimiConfig {
  int sample_rate = 24000;
  // Codebooks a frame holds: the semantic one and the first num_codebooks − 1 acoustic ones
  // (LFM2-Audio: get_mimi(..., num_codebooks=8)).
  int num_codebooks = 8;
  int codebook_size = 2048;  // quantizer.bins
  int codebook_dim = 256;    // quantizer.dimension
  int latent_dim = 512;      // quantizer.output_dimension = seanet.dimension
  float codebook_epsilon = 1e-5f;
  // 12.5 Hz codes → 25 Hz latents: depthwise ConvTranspose1d, kernel 2·stride, no bias.
  int upsample_stride = 2;
  int upsample_kernel = 4;
  // Decoder transformer.
  int num_layers = 8;
  int d_model = 512;
  int num_heads = 8;
  int dim_feedforward = 2048;
  int context = 250;  // keys a query sees, itself included
  double max_period = 10000;
  float norm_eps = 1e-5f;
  // SEANet decoder.
  int n_filters = 64;
  std::vector<int> ratios = {8, 6, 5, 4};
  int kernel_size = 7;
  int residual_kernel_size = 3;
  int last_kernel_size = 3;
  int compress = 2;
  int channels = 1;

  int head_dim() const { return d_model / num_heads; }
  int hop() const;  // Π ratios: PCM samples per latent step
  int samples_per_frame() const { return upsample_stride * hop(); }
  // The widest SEANet stage: n_filters · 2^|ratios| channels after the first conv.
  int seanet_width() const { return n_filters << ratios.size(); }
};

// Reads the flat Mimi config (the oracle's config.json) over the get_mimi defaults; `where` names the file.
// Settings this decoder does not implement (another norm, gating, padding, activation, non-causal, more
// residual layers) are Unimplemented errors naming the key.
Result<MimiConfig> ParseMimiConfig(const nlohmann::json& j, const std::string& where);
// Whether a parsed config.json describes Mimi (a flat config with its "seanet" and "quantizer" sections,
// or "model" naming mimi) rather than the language model of the snapshot it sits in.
bool IsMimiConfig(const nlohmann::json& j);
// Sizes in range and consistent with each other.
Status ValidateMimiConfig(const MimiConfig& c, const std::string& where);

}  // namespace lfmvox
