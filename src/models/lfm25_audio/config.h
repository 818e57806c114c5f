// Every configuration LFM2.5-Audio reads, in one place: one typed struct per
// stage, each parsed by `XConfig::FromJson(section, where)` with the shared
// readers of io/json_config.h and validated there, so a stage loader takes a
// struct and never sees JSON. `where` names the file and section in every
// error ("…/config.json [encoder]").
//
//   config.json                     Lfm25AudioConfig::Load, parsed once:
//     top level                       codebooks, interleaved_n_text/_audio
//     `lfm`                           Lfm2Config (lfm2_config.h)
//     `depthformer`                   DepthformerConfig
//     `encoder`                       ConformerConfig
//     `preprocessor`                  LogMelConfig
//   audio_detokenizer/config.json   Lfm25DetokenizerConfig::Load
//
// Widths only the checkpoint knows (the depthformer's ffn and codebook
// vocabulary, the detokenizer's codebook size) are filled by the stage's Load.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "base/status.h"
#include "models/lfm25_audio/lfm2_config.h"

namespace lfmvox {

// The `depthformer` section, plus the top-level `codebooks`.
struct DepthformerConfig {
  int layers = 0;  // `depthformer.layers`
  int dim = 0;     // `depthformer.dim`
  // liquid-audio builds the attention with its library defaults num_heads = 32
  // and gqa_dim = 8, which config.json cannot set (its dataclass rejects
  // unknown keys). The optional keys `depthformer.heads` / `kv_heads` exist
  // for other checkpoints; absent, 32 / 8 apply.
  int heads = 32;
  int kv_heads = 8;
  int head_dim = 0;       // dim / heads
  int ffn = 0;            // from `depthformer.layers.0.feed_forward.w1.weight` rows (Depthformer::Load)
  int num_codebooks = 0;  // top-level `codebooks` (set by Lfm25AudioConfig)
  // From `depth_embeddings.0.embedding.weight` rows (2049: 2048 codes + end-of-audio; Depthformer::Load).
  int codebook_vocab = 0;
  bool tie = true;  // `depthformer.tie`: to_logits shares the embedding table
  // liquid-audio's defaults (MHA theta, RMSNorm and SharedEmbedding eps);
  // optional keys `depthformer.rope_theta` / `norm_eps` override them.
  double rope_theta = 1e6;
  float eps = 1e-5f;

  // `section` is the `depthformer` object; everything but num_codebooks and
  // the two tensor-derived widths.
  static Result<DepthformerConfig> FromJson(const nlohmann::json& section, const std::string& where);
};

// The `encoder` section (liquid-audio's ConformerEncoderConfig). Only the
// configuration LFM2.5-Audio uses is implemented; FromJson rejects anything
// else with Unimplemented naming the key and value.
struct ConformerConfig {
  int feat_in = 0;  // mel bins
  int n_layers = 0;
  int d_model = 0;
  int n_heads = 0;
  int subsampling_channels = 0;  // `subsampling_conv_channels`
  int ff_expansion_factor = 0;   // FF width = d_model · this
  int conv_kernel_size = 0;      // odd; symmetric padding (k − 1)/2
  bool xscaling = false;         // scale the subsampled input by √d_model
  float norm_eps = 1e-5f;        // LayerNorm and BatchNorm (NeMo's fixed defaults)

  int head_dim() const { return d_model / n_heads; }
  int ff_dim() const { return d_model * ff_expansion_factor; }
  // Length after one 3×3, stride-2, padding-1 stage: ⌊(n + 2 − 3)/2⌋ + 1 = ⌈n/2⌉.
  static size_t Halved(size_t n) { return (n + 1) / 2; }
  // Frequency bins after the three stages, and frames after them (⌈F/8⌉).
  int subsampled_bins() const {
    return static_cast<int>(Halved(Halved(Halved(static_cast<size_t>(feat_in)))));
  }
  static size_t SubsampledFrames(size_t mel_frames) { return Halved(Halved(Halved(mel_frames))); }

  static Result<ConformerConfig> FromJson(const nlohmann::json& section, const std::string& where);
};

// The `preprocessor` section (liquid-audio's PreprocessorConfig).
struct LogMelConfig {
  int sample_rate = 0;     // `sample_rate`, Hz; input at another rate is resampled to it
  int win_length = 0;      // int(window_size · sample_rate), truncated as NeMo does: 0.025 s → 400
  int hop_length = 0;      // int(window_stride · sample_rate): 0.01 s → 160
  int n_fft = 0;           // `n_fft`, or null: the next power of two ≥ win_length
  int n_mels = 0;          // `features`
  float pad_value = 0.0f;  // `pad_value`: the masked frames t ≥ L

  // Reads and validates the section. Every key of PreprocessorConfig must be present except `dither`
  // (ignored: NeMo dithers only in training) and `pad_value` (default 0). Values the reference
  // supports but lfmvox does not (normalize other than "per_feature", window other than "hann",
  // log false, frame_splicing ≠ 1, pad_to ≠ 0) are Unimplemented; other keys are ignored, bad values are
  // InvalidArgument (OutOfRange for a number outside its range, NotFound for a missing key).
  static Result<LogMelConfig> FromJson(const nlohmann::json& section, const std::string& where);
};

// audio_detokenizer/config.json: an Lfm2Config plus the codec's own keys.
struct Lfm25DetokenizerConfig {
  Lfm2Config lfm;         // the `Lfm2Config` of audio_detokenizer/config.json
  int num_codebooks = 0;  // `codebooks` key; liquid-audio's FusedEmbedding uses 8
  int codebook_size = 0;  // rows of emb.emb.weight / num_codebooks (2048; Lfm25Detokenizer::Load)
  int upsample = 0;       // `upsample_factor` key; liquid-audio interpolates ×6
  int n_fft = 0;          // output_size - 2 (1280)
  int hop = 0;            // `hop_length` key; liquid-audio's ISTFT hop is 320
  int sample_rate = 0;    // `sample_rate` key; 24000
  int output_size = 0;    // `output_size`: log-magnitudes and phases, 2·(n_fft/2+1)

  int samples_per_frame() const { return upsample * hop; }
  // `j` is the whole file (codebook_size is filled in from the checkpoint by
  // Lfm25Detokenizer::Load).
  static Result<Lfm25DetokenizerConfig> FromJson(const nlohmann::json& j, const std::string& where);
  // Reads and parses the file at `path`.
  static Result<Lfm25DetokenizerConfig> Load(const std::string& path);
};

// The top-level config.json of LFM2.5-Audio (liquid-audio's nested layout:
// top-level keys plus `lfm`, `depthformer`, `encoder`, `preprocessor`).
struct Lfm25AudioConfig {
  Lfm2Config lfm;                 // the backbone (`lfm` section)
  DepthformerConfig depthformer;  // `depthformer` section (+ `codebooks`)
  ConformerConfig encoder;        // `encoder` section
  LogMelConfig preprocessor;      // `preprocessor` section
  int codebooks = 0;              // audio codes per frame (`codebooks`)
  int interleaved_n_text = 0;     // text tokens per interleaved slot
  int interleaved_n_audio = 0;    // audio frames per interleaved slot

  // Parses and validates every section of a config.json object once;
  // `where` (the file's path) prefixes every error.
  static Result<Lfm25AudioConfig> FromJson(const nlohmann::json& j, const std::string& where);
  // Reads `path` (a config.json) and parses it.
  static Result<Lfm25AudioConfig> Load(const std::string& path);
};

}  // namespace lfmvox
