// Random LFM3-Audio speech-output checkpoints in the lfm3_tiny layout (the oracle's flat config.json and
// the seed's tensor names: `codec.*`, `depth_decoder.*`, `codebook_embedding.weight`), at any size, for
// benchmarks; with `with_backbone` a whole model (the `lfm` section, `lfm.*`, tokenizer.json) that
// AudioModel::Load takes (tests/lfm3_api_test.cc, `lfmvox-make-checkpoint lfm3-audio`). Values follow the
// oracle's recipe (norm weights 1 + 0.1·N, biases 0.05·N, matrices N(0, 1/fan_in), embeddings N(0, 1),
// uniform draws of those variances), rounded to bf16; the ISTFT window is the periodic Hann window in F32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace lfmvox::tools {

struct Lfm3Shape {
  // Defaults: a real-size LFM3-Audio as far as the public facts go (spec/LFM3_AUDIO.md §2.2, §2.3); the
  // values marked "assumed" are not published.
  int text_hidden = 2048;
  // Codec decoder stack.
  int codec_hidden = 512;  // encoder_dim
  std::vector<std::string> codec_layers = {"conv", "conv",      "attention", "conv", "attention",
                                           "conv", "attention", "conv"};  // assumed (LFM2.5 detok)
  int codec_heads = 8;                           // 512 / head dim 64 (the seed's fallback)
  int codec_kv_heads = 4;                        // assumed
  int codec_ffn = 2304;                          // assumed
  int codec_conv_kernel = 3;                     // assumed
  bool codec_sandwich_norms = true;              // assumed (an upper bound on cost)
  std::vector<int> codec_gated_layers = {2, 6};  // assumed, as lfm3_tiny
  int quantizer_dim = 256;
  // Depth decoder (3 attention layers, bidirectional).
  bool with_depth = true;  // false: config only, no depth_decoder.* / codebook_embedding tensors
  int depth_hidden = 1024;
  int depth_layers = 3;
  int depth_heads = 32;
  int depth_kv_heads = 8;
  int depth_ffn = 2816;
  bool depth_sandwich_norms = true;              // assumed
  std::vector<int> depth_gated_layers = {0, 2};  // assumed, as lfm3_tiny
  // Scales each codebook table's end-of-audio row (code 2016) after it is drawn: above 1 its logit
  // spreads wider, so random speech ends sooner (tests that need end-of-audio frames).
  float eos_row_scale = 1.0f;
  // Backbone (the `lfm` section and `lfm.*` tensors, backbone.h): written when with_backbone. Its width is
  // text_hidden; heads · head dim = text_hidden. The defaults are a small stand-in, not LFM3-1.7B.
  bool with_backbone = false;
  std::vector<std::string> backbone_layers = {"conv", "full_attention", "conv", "sliding_attention"};
  int backbone_heads = 4;
  int backbone_kv_heads = 2;
  int backbone_ffn = 96;
  int backbone_conv_kernel = 7;  // LFM3-1.7B's (spec §2.1)
  int backbone_window = 8;
  double partial_rotary_factor = 0.5;  // assumed (spec §9.1)
  bool backbone_tied = true;
  bool backbone_sandwich_norms = true;           // assumed
  std::vector<int> backbone_gated_layers = {1};  // assumed
  int max_positions = 4096;
  // A tokenizer.json copied into DIR; with a backbone it is required, and its ids decide vocab_size (the
  // largest id + 1), bos_token_id (<|startoftext|>) and eos_token_id (<|im_end|>, as LFM2's config).
  std::string tokenizer;
  // The interleaved turn's schedule at the top level (0: not written).
  int interleaved_n_text = 0;
  int interleaved_n_audio = 0;
  uint64_t seed = 1;
};

// Writes DIR/{config.json, model.safetensors} (and tokenizer.json when shape.tokenizer is set).
Status WriteRandomLfm3(const std::string& dir, const Lfm3Shape& shape);

}  // namespace lfmvox::tools
